"""The tree's promise (docs/architecture.md): generator/compile/ turns models.yml into files and never imports
generator/operate/, which acts on a running stack; every package says in its docstring what it holds."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "generator"


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])


def imported_modules(source: str, package: str) -> set[str]:
    """Absolute names of the generator modules a module of `package` imports (relative imports resolved)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("generator")}


def test_the_compiler_never_imports_what_acts_on_a_running_stack():
    offenders = {f"{p.relative_to(ROOT)} imports {m}" for p in sorted((GEN / "compile").rglob("*.py"))
                 for m in imported_modules(p.read_text(), package_of(p)) if m.startswith("generator.operate")}
    assert not offenders, sorted(offenders)


def test_the_resolver_sees_relative_and_absolute_imports():
    """Control: the check above would catch compile/ importing operate/ either way."""
    package = package_of(GEN / "compile" / "renderers" / "compose.py")
    assert "generator.operate.status" in imported_modules("from ...operate import status\n", package)
    assert "generator.operate.runtime" in imported_modules("from ...operate.runtime import local\n", package)
    assert "generator.operate.apply" in imported_modules("import generator.operate.apply\n", package)
    assert "generator.operate.apply" not in imported_modules("from ..plan import Plan\n", package)


def test_every_package_says_what_it_holds():
    missing = [str(init.relative_to(ROOT)) for init in sorted(GEN.rglob("__init__.py"))
               if not ast.get_docstring(ast.parse(init.read_text()))]
    assert not missing, f"packages without a docstring: {missing}"
