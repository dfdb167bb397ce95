"""Every command README.md and docs/*.md show is run by CI or says why it cannot run here (tests/docs/readme.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs import readme

ROOT = Path(__file__).resolve().parents[2]


def test_every_readme_command_is_run_or_says_why_not():
    unclassified = [f"{c.where_shown}: {c.text}" for c in readme.commands() if c.where is None]
    assert not unclassified, "add a rule to tests/docs/readme.py WHERE for:\n" + "\n".join(unclassified)


def test_every_rule_still_matches_a_readme_command():
    texts = [c.text for c in readme.commands()]
    stale = [pattern for pattern, _ in readme.WHERE if not any(re.search(pattern, t) for t in texts)]
    assert not stale, f"rules that match no command of README.md or docs/ (a page changed?): {stale}"


def test_the_docs_pages_are_read_and_the_incoming_drafts_are_not():
    pages = [p.relative_to(ROOT).as_posix() for p in readme.pages()]
    assert pages[0] == "README.md" and "docs/kubernetes.md" in pages and "docs/on-demand.md" in pages
    assert not [p for p in pages if p.startswith("docs/_incoming/")]
    shown = {c.page for c in readme.commands()}
    assert {"README.md", "docs/kubernetes.md", "docs/testing.md", "docs/observability.md"} <= shown


def test_a_command_on_a_docs_page_is_classified_like_a_readme_command():
    page = "# A page\n\n```bash\nmake status JSON=1\nrm -rf /somewhere\n```\n"
    found = readme.page_commands(page, "docs/x.md")
    assert [(c.where_shown, c.where) for c in found] == [("docs/x.md:4", readme.RUN), ("docs/x.md:5", None)]


def test_a_command_two_pages_show_runs_once():
    texts = [c.text for c in readme.to_run()]
    assert len(texts) == len(set(texts))
    assert "make status JSON=1" in texts  # shown on docs/observability.md only


def test_ci_runs_the_quick_start_and_the_commands():
    ci = (ROOT / ".ci/run").read_text()
    assert "tests/docs/readme.py quick-start" in ci and "tests/docs/readme.py commands" in ci
    assert [c.text for c in readme.quick_start()][:2] == ["make demo", "make test"]
    assert {"make demo STOP=1", "make down", "make regenerate", "make check"} <= {c.text for c in readme.to_run()}
    assert [c.text for c in readme.to_run()][-2:] == ["make demo STOP=1", "make down"]  # they stop the stack


def test_make_commands_are_makefile_targets_and_every_user_target_is_in_the_readme():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.M))
    documented = set(re.findall(r"^([a-z][a-z0-9-]*):.*## ", makefile, re.M))
    shown = {c.text.split()[1] for c in readme.commands() if c.text.startswith("make ")}
    assert shown <= targets, f"README names make targets that do not exist: {shown - targets}"
    assert documented <= shown | {"help", "venv", "venv-vllm", "demo-models", "bench-tools", "redis-server"}, (
        f"make targets with a ## help line that the README never shows: {documented - shown}"
    )


@pytest.mark.parametrize(
    "block, expected",
    [
        ("make demo    # a comment\n", ["make demo"]),
        ("A=1 B='x # not a comment' \\\n  cmd --flag   # comment\n", ["A=1 B='x # not a comment' cmd --flag"]),
        ("# only a comment\n\nmake test\n", ["make test"]),
        ("curl http://h/#frag\n", ["curl http://h/#frag"]),
    ],
)
def test_blocks_are_read_as_a_user_types_them(block, expected):
    ((_, commands),) = readme.bash_blocks(f"```bash\n{block}```\n")
    assert [c.text for c in commands] == expected
