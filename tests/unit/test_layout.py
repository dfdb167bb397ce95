"""The tree's promise (docs/architecture.md): generator/compile/ turns models.yml into files and never imports
generator/operate/, which acts on a running stack, nor generator/demo/ (the scripted test models); generator/shipped/
(the code that runs inside the stack) imports nothing else of the generator; every package says in its docstring what
it holds. And the compiler's pipeline (loader.build_plan) stays a pipeline: it fits on a screen, and a reader who
follows its calls enters each module of a concern once (at most twice), never bouncing between them."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "generator"
LOAD = GEN / "compile" / "load"


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


def imports_under(folder: Path, wrong: Callable[[str], bool]) -> list[str]:
    """Each import of a module under `folder` that `wrong` says it may not make, as "<file> imports <module>"."""
    return sorted(
        f"{p.relative_to(ROOT)} imports {m}"
        for p in sorted(folder.rglob("*.py"))
        for m in imported_modules(p.read_text(), package_of(p))
        if wrong(m)
    )


def test_the_compiler_never_imports_what_acts_on_a_running_stack():
    offenders = imports_under(GEN / "compile", lambda m: m.startswith("generator.operate"))
    assert not offenders, offenders


def test_the_compiler_never_imports_the_scripted_models():
    """generator/demo/ holds the family models the tests and the demo serve; what the compiler needs of them comes as
    data (the parser records), and what renders them lives beside them (demo/parser_docs.py)."""
    offenders = imports_under(GEN / "compile", lambda m: m.startswith("generator.demo"))
    assert not offenders, offenders


def test_what_runs_inside_the_stack_imports_nothing_else_of_the_generator():
    """The gateway hooks are copied next to the LiteLLM config and the controller into its container: an import
    of the compiler or of operate/ would fail there."""
    offenders = imports_under(GEN / "shipped", lambda m: not m.startswith("generator.shipped"))
    assert not offenders, offenders


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


# --- the compiler's pipeline (docs/architecture.md, "The pipeline") -------------------------------------------------


def _function(source: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)


def module_stays(source: str, module: str, function: str = "build_plan") -> list[str]:
    """The modules a reader enters, in order, reading `function`'s body (of `module`, a dotted name) top to bottom and
    following each call, or each function named (a concern in a list), into the module that defines it: a name
    imported from a module, an attribute of an imported module, a method of an object made from an imported class,
    a function of the module itself. Consecutive references to one module are one stay; a loop's body is read once;
    annotations are not calls. Only the generator's modules count."""
    tree = ast.parse(source)
    parts = module.split(".")[:-1]  # its package
    origin: dict[str, str] = {}  # a name in the module -> the module it comes from
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = parts[: len(parts) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:  # `from . import x`: x is a module; `from .x import f`: f comes from x
                origin[a.asname or a.name] = mod if node.module else f"{mod}.{a.name}"
        elif isinstance(node, ast.Import):
            origin.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name != function:
            origin[node.name] = module
    fn = _function(source, function)
    made = {  # s = State(...): s.method() enters State's module
        t.id: origin[n.value.func.id]
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
        if n.value.func.id in origin
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    annotations = {id(n) for a in ast.walk(fn) if isinstance(a, ast.AnnAssign) for n in ast.walk(a.annotation)}
    refs = []
    for node in (n for stmt in fn.body for n in ast.walk(stmt) if id(n) not in annotations):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in origin:
            refs.append((node.lineno, node.col_offset, origin[node.id]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in made:
                refs.append((node.lineno, node.col_offset, made[owner.id]))
    stays: list[str] = []
    for _, _, mod in sorted(refs):
        if mod.startswith("generator") and (not stays or stays[-1] != mod):
            stays.append(mod)
    return stays


LOADER = LOAD / "loader.py"


def test_build_plan_fits_on_a_screen():
    fn = _function(LOADER.read_text(), "build_plan")
    assert fn.end_lineno is not None and fn.end_lineno - fn.lineno + 1 < 60, "build_plan: keep it a pipeline"


def test_following_build_plan_enters_each_module_at_most_twice():
    """Each concern once where it can (a concern per model and one across models: twice); the shared state twice (it
    is made, and it stops the plan at the findings)."""
    stays = module_stays(LOADER.read_text(), "generator.compile.load.loader")
    counts = Counter(stays)
    assert len(counts) > 20, stays  # control: the pipeline's concerns were all seen
    assert all(n <= 2 for n in counts.values()), {m: n for m, n in counts.items() if n > 2}


def test_the_module_counter_sees_a_return_to_a_module_already_left():
    """Control: the counter above would catch a pipeline that bounces between modules."""
    source = (
        "from . import a, b\n"
        "from .c import f\n"
        "from .state import State\n"
        "def build_plan(x):\n"
        "    s = State(x)\n"
        "    for m in s.models:\n"
        "        for concern in (a.one, b.two, a.three):\n"
        "            concern(s, m)\n"
        "    f(s); s.stop(); helper(s); a.four(s)\n"
        "def helper(s):\n"
        "    pass\n"
    )
    stays = module_stays(source, "generator.compile.load.loader")
    assert stays == [f"generator.compile.load.{m}" for m in ("state", "a", "b", "a", "c", "state", "loader", "a")]


def test_every_concern_of_the_pipeline_takes_the_shared_state():
    """A concern is a function of a module of compile/load/ whose first parameter is the State (then the model, for
    the concerns per model): nothing passes between concerns but the State and what they return to the plan."""
    loader = ast.parse(LOADER.read_text())
    modules = {
        a.asname or a.name
        for n in loader.body
        if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module is None
        for a in n.names
    }
    fn = _function(LOADER.read_text(), "build_plan")
    named = {
        (n.value.id, n.attr)
        for n in ast.walk(fn)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules
    }
    assert len(named) > 20, named
    wrong = []
    for mod, name in sorted(named):
        concern = _function((LOAD / f"{mod}.py").read_text(), name)
        first = concern.args.args[0].annotation if concern.args.args else None
        if not (isinstance(first, ast.Name) and first.id == "State"):
            wrong.append(f"{mod}.{name}")
    assert not wrong, f"concerns whose first parameter is not the State: {wrong}"


def test_rules_py_is_gone_or_holds_only_what_is_shared():
    """The rules of every concern lived in one module (rules.py); each lives with its concern now."""
    rules = LOAD / "rules.py"
    assert not rules.exists() or len(rules.read_text().splitlines()) < 150


def test_the_architecture_page_names_every_module_of_the_pipeline():
    """docs/architecture.md's table of concerns: a concern added to build_plan gets its line there."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    stays = module_stays(LOADER.read_text(), "generator.compile.load.loader")
    concerns = {m.rsplit(".", 1)[-1] for m in stays if m.startswith("generator.compile.load.")} - {"loader"}
    missing = sorted(m for m in concerns if f"| `{m}.py` |" not in page)
    assert not missing, f"docs/architecture.md's table of concerns lacks: {missing}"
