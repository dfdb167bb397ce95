"""The tree's promise (docs/architecture.md): generator/compile/ turns models.yml into files and never imports
generator/operate/, which acts on a running stack; generator/shipped/ (the code that runs inside the stack) imports
nothing else of the generator; every package says in its docstring what it holds."""

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
    offenders = {
        f"{p.relative_to(ROOT)} imports {m}"
        for p in sorted((GEN / "compile").rglob("*.py"))
        for m in imported_modules(p.read_text(), package_of(p))
        if m.startswith("generator.operate")
    }
    assert not offenders, sorted(offenders)


def test_what_runs_inside_the_stack_imports_nothing_else_of_the_generator():
    """The gateway hooks are copied next to the LiteLLM config and the controller into its container: an import
    of the compiler or of operate/ would fail there."""
    shipped = GEN / "shipped"
    offenders = {
        f"{p.relative_to(ROOT)} imports {m}"
        for p in sorted(shipped.rglob("*.py"))
        for m in imported_modules(p.read_text(), package_of(p))
        if not m.startswith("generator.shipped")
    }
    assert not offenders, sorted(offenders)


def test_the_resolver_sees_relative_and_absolute_imports():
    """Control: the check above would catch compile/ importing operate/ either way."""
    package = package_of(GEN / "compile" / "renderers" / "compose.py")
    assert "generator.operate.status" in imported_modules("from ...operate import status\n", package)
    assert "generator.operate.runtime" in imported_modules("from ...operate.runtime import local\n", package)
    assert "generator.operate.apply" in imported_modules("import generator.operate.apply\n", package)
    assert "generator.operate.apply" not in imported_modules("from ..plan import Plan\n", package)


def test_every_import_inside_the_generator_names_a_module_that_exists():
    """A relative import resolved against the wrong package (a module moved, its import not) fails only when the
    line runs; some run only in one runtime (the controller's local driver)."""

    def exists(module: str) -> bool:
        path = ROOT.joinpath(*module.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    missing = set()
    for p in sorted(GEN.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("generator")):
                parts = package_of(p).split(".")
                base = parts[: len(parts) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                if not exists(module):
                    missing.add(f"{p.relative_to(ROOT)}:{node.lineno} imports {module}")
    assert not missing, sorted(missing)


def test_every_package_says_what_it_holds():
    missing = [
        str(init.relative_to(ROOT))
        for init in sorted(GEN.rglob("__init__.py"))
        if not ast.get_docstring(ast.parse(init.read_text()))
    ]
    assert not missing, f"packages without a docstring: {missing}"
