"""The command: exit codes, nothing written on bad input, determinism, --check, keys, atomic writes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from generator.cli import main
from generator.compile.output import ENV_FILE, read_env_file

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "models.yml"


def files_under(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_bad_input_exits_2_with_one_line_per_problem_and_writes_nothing(write, tmp_path, capsys):
    out = tmp_path / "out"
    bad = write("m1:\n  gpus: [0]\n  command: vllm serve o/m --max-model-len 128K\n  litellm: {max_tokens: 128K}\n")
    assert main(["--models", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and "models.yml:4: m1.litellm.max_tokens" in lines[0]
    assert lines[-1] == "nothing was written" and "Traceback" not in err
    assert not out.exists()


def test_bad_input_from_a_real_process_has_no_traceback(write):
    bad = write("m1: [unclosed\n")
    run = subprocess.run(
        [sys.executable, "-m", "generator", "--models", str(bad), "--out", str(bad.parent / "o")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 2
    assert run.stderr.count("\n") == 2 and "YAML syntax error" in run.stderr and "Traceback" not in run.stderr


def test_missing_models_file(tmp_path, capsys):
    assert main(["--models", str(tmp_path / "nope.yml"), "--out", str(tmp_path)]) == 2
    assert "file not found" in capsys.readouterr().err


def test_output_is_deterministic_and_a_second_run_writes_nothing(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["--models", str(GOOD), "--out", str(a), "-q"]) == 0
    assert main(["--models", str(GOOD), "--out", str(b), "-q"]) == 0
    generated = lambda d: {k: v for k, v in files_under(d).items() if k != ENV_FILE}  # noqa: E731
    assert generated(a) == generated(b) and len(generated(a)) >= 4
    before = {p: p.stat().st_mtime_ns for p in a.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["--models", str(GOOD), "--out", str(a), "-q"]) == 0
    assert "already up to date" in capsys.readouterr().out
    assert before == {p: p.stat().st_mtime_ns for p in a.rglob("*") if p.is_file()}


def test_generated_files_name_their_source(tmp_path):
    main(["--models", str(GOOD), "--out", str(tmp_path), "-q"])
    for rel in ("compose/docker-compose.yml", "litellm/config.yaml"):
        head = (tmp_path / rel).read_text().splitlines()[0]
        assert head.startswith("# GENERATED from models.yml (sha256 ")


def test_check_detects_drift(tmp_path, capsys):
    args = ["--models", str(GOOD), "--out", str(tmp_path)]
    assert main(args + ["--check"]) == 1  # nothing generated yet
    assert main(args + ["-q"]) == 0
    assert main(args + ["--check"]) == 0
    config = tmp_path / "litellm/config.yaml"
    config.write_text(config.read_text() + "# hand edit\n")
    assert main(args + ["--check"]) == 1
    assert "stale: litellm/config.yaml" in capsys.readouterr().err
    (tmp_path / "compose/docker-compose.yml").unlink()
    assert main(args + ["--check"]) == 1


def test_files_we_no_longer_generate_are_removed_and_others_kept(tmp_path, capsys):
    args = ["--models", str(GOOD), "--out", str(tmp_path), "-q"]
    assert main(args) == 0
    old = tmp_path / "litellm/old_hook.py"
    old.write_text("# GENERATED from models.yml (sha256 0) by `python -m generator`;\n")
    mine = tmp_path / "litellm/notes.txt"
    mine.write_text("my own file\n")
    assert main(args + ["--check"]) == 1
    assert main(args) == 0
    assert not old.exists() and mine.exists()
    assert main(args + ["--check"]) == 0


def test_the_committed_files_are_up_to_date():
    """CI drift check: compose/ and litellm/ in the repo are what models.yml generates."""
    assert main(["--models", str(GOOD), "--out", str(ROOT), "--check", "-q"]) == 0, "run `make regenerate`"


def test_keys_are_made_once_kept_secret_and_reused(tmp_path):
    assert main(["--models", str(GOOD), "--out", str(tmp_path), "-q"]) == 0
    env_path = tmp_path / ENV_FILE
    keys = read_env_file(env_path)
    assert set(keys) == {
        "LITELLM_MASTER_KEY",
        "VLLM_API_KEY_GLM47_FLASH",
        "VLLM_API_KEY_QWEN3_8B",
        "VLLM_API_KEY_SMALL_CHAT",
        "REDIS_PASSWORD",  # the stack's Redis keeps stored responses (gateway.responses_ttl)
    }
    assert all(len(v) >= 32 for v in keys.values()) and len(set(keys.values())) == len(keys)
    assert stat.S_IMODE(env_path.stat().st_mode) == 0o600
    generated = "".join(t.decode() for k, t in files_under(tmp_path).items() if k != ENV_FILE)
    assert not any(v in generated for v in keys.values())
    assert main(["--models", str(GOOD), "--out", str(tmp_path), "-q"]) == 0
    assert read_env_file(env_path) == keys


def test_the_generated_master_key_is_one_litellm_starts_with(tmp_path):
    """LiteLLM 1.108 refuses to start with an unset, empty or publicly known master key (even with custom_auth);
    ours passes its own boot check as the gateway runs it, and nothing generated sets its override."""
    from litellm.proxy.auth.master_key_boot_check import (
        WEAK_OR_UNSET_MASTER_KEY_OVERRIDE_ENV_VAR,
        WEAK_OR_UNSET_MASTER_KEY_OVERRIDE_SETTING,
        SafeMasterKey,
        master_key_boot_verdict,
    )

    assert main(["--models", str(GOOD), "--out", str(tmp_path), "-q"]) == 0
    key = read_env_file(tmp_path / ENV_FILE)["LITELLM_MASTER_KEY"]
    verdict = master_key_boot_verdict(
        master_key=key,
        environment_master_key=key,
        general_settings={"master_key": "os.environ/LITELLM_MASTER_KEY"},
        config_file_path="litellm/config.yaml",
        override_env_is_on=False,
        salt_key_is_set=False,
        database_is_configured=False,
    )
    assert isinstance(verdict, SafeMasterKey)
    generated = "".join(t.decode() for k, t in files_under(tmp_path).items() if k != ENV_FILE)
    assert WEAK_OR_UNSET_MASTER_KEY_OVERRIDE_SETTING not in generated
    assert WEAK_OR_UNSET_MASTER_KEY_OVERRIDE_ENV_VAR not in generated


def test_a_new_model_gets_a_key_and_old_keys_stay(write, tmp_path):
    out = tmp_path / "out"
    main(
        [
            "--models",
            str(write("a:\n  gpus: []\n  command: vllm serve o/a --max-model-len 8K\n")),
            "--out",
            str(out),
            "-q",
        ]
    )
    first = read_env_file(out / ENV_FILE)
    main(
        [
            "--models",
            str(
                write(
                    "a:\n  gpus: []\n  command: vllm serve o/a --max-model-len 8K\n"
                    "b:\n  gpus: []\n  command: vllm serve o/b --max-model-len 8K\n"
                )
            ),
            "--out",
            str(out),
            "-q",
        ]
    )
    second = read_env_file(out / ENV_FILE)
    assert {k: second[k] for k in first} == first and "VLLM_API_KEY_B" in second


def test_a_failed_write_leaves_the_old_files_and_no_temp_files(tmp_path_factory, monkeypatch):
    tmp_path = tmp_path_factory.mktemp("out")
    assert main(["--models", str(GOOD), "--out", str(tmp_path), "-q"]) == 0
    before = files_under(tmp_path)
    changed = GOOD.read_text().replace("temperature: 0.6", "temperature: 0.5")
    models = tmp_path_factory.mktemp("src") / "models.yml"
    models.write_text(changed)
    calls = []
    real_replace = os.replace

    def failing_replace(src, dst):
        calls.append(dst)
        if len(calls) > 1:
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        from generator.compile.load.loader import load_plan
        from generator.compile.output import render_files, write_files

        write_files(render_files(load_plan(models)), tmp_path)
    after = files_under(tmp_path)
    assert not [k for k in after if k.endswith(".tmp")]
    assert set(after) == set(before)
    new = render_files(load_plan(models))
    for rel, content in after.items():  # nothing half-written: every file is either old or fully new
        assert content == before[rel] or content == new[rel].encode()


def test_internal_errors_are_one_line_unless_verbose(tmp_path, monkeypatch, capsys):
    import generator.cli as cli

    monkeypatch.setattr(cli, "render_files", lambda plan, targets: 1 / 0)
    assert main(["--models", str(GOOD), "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError" in err and "Traceback" not in err
    assert main(["--models", str(GOOD), "--out", str(tmp_path), "--verbose"]) == 3
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["stack", "k8s", "clients"])
def test_each_target_is_one_record_whose_files_name_its_command(name, tmp_path):
    """A target's render, regenerate command, keys file and --check marker live in one Target record."""
    from generator.compile.load.loader import load_plan
    from generator.compile.renderers import TARGETS
    from generator.compile.renderers.text import GENERATED_MARK

    target = TARGETS[name]
    files = target.render(load_plan(ROOT / "models.yml"))
    headed = [text for text in files.values() if text.encode().startswith(GENERATED_MARK)]
    assert headed and all(f"run `{target.regenerate}`" in text for text in headed)
    assert target.marker is None or target.marker in files
    assert main([name, "--models", str(ROOT / "models.yml"), "--out", str(tmp_path), "-q"]) == 0
    assert (tmp_path / target.keys_file[0]).exists() if target.keys_file else not (tmp_path / "compose/.env").exists()
