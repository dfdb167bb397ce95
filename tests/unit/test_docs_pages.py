"""README.md is a front page (short, every docs/ page one click away) and no link of README.md or docs/ is broken."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # docs/_incoming/: drafts not yet placed
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lowercase, punctuation dropped, spaces to '-', -1, -2 ... for repeats."""
    found: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6} (.*)$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m[1].strip().lower()).replace(" ", "-")
            found[slug] = found.get(slug, -1) + 1
            if found[slug]:
                found[f"{slug}-{found[slug]}"] = 0
    return set(found)


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # links inside code are not links
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_is_a_front_page_with_every_docs_page_one_click_away():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    missing = [p.relative_to(ROOT).as_posix() for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f"docs pages the README does not link to: {missing}"


def test_the_anchor_rule_matches_githubs():
    assert anchors(
        "## `make status`\n## GPUs shared by several models\n# Kubernetes (`make k8s`)\n"
        "## `<model>.k8s` (and `defaults.k8s`)"
    ) == {"make-status", "gpus-shared-by-several-models", "kubernetes-make-k8s", "modelk8s-and-defaultsk8s"}
    assert anchors("## Plan\n## Plan\n") == {"plan", "plan-1"}
