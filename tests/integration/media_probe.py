"""Run with vLLM's interpreter: what a vLLM server started with this command line does with media URLs.

    .venv-vllm/bin/python tests/integration/media_probe.py '{"argv": [...], "env": {...}, "urls": [...]}'

`argv` is the backend's command line after `-m vllm.entrypoints.openai.api_server` (as the local runtime
starts it). It is parsed by vLLM's own server parser, turned into the server's ModelConfig (EngineArgs,
as the server does; the model's config.json is read), and the media connector is built from that config
exactly as vllm/renderers/chat_utils.py builds it for a request; each URL is then fetched as an image_url
part would be. Prints {"urls": {url: "fetched" | "refused: <error>"}, "allowed_media_domains": [...]}.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys


def main() -> None:
    job = json.loads(sys.argv[1])
    os.environ.update(job["env"])  # before vLLM reads its environment (VLLM_MEDIA_URL_ALLOW_REDIRECTS)
    from vllm import envs
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.multimodal.media import MEDIA_CONNECTOR_REGISTRY
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    args = make_arg_parser(FlexibleArgumentParser()).parse_args(job["argv"])
    config = EngineArgs.from_cli_args(args).create_model_config()
    connector = MEDIA_CONNECTOR_REGISTRY.load(
        envs.VLLM_MEDIA_CONNECTOR,
        media_io_kwargs=None,
        allowed_local_media_path=config.allowed_local_media_path,
        allowed_media_domains=config.allowed_media_domains,
    )

    async def fetch(url: str) -> str:
        try:
            await connector.fetch_image_async(url)
            return "fetched"
        except Exception as exc:  # noqa: BLE001 - what the server would answer with
            return f"refused: {type(exc).__name__}: {exc}"

    async def fetch_all() -> dict[str, str]:
        return {url: await fetch(url) for url in job["urls"]}

    print(json.dumps({"urls": asyncio.run(fetch_all()), "allowed_media_domains": config.allowed_media_domains}))


if __name__ == "__main__":
    main()
