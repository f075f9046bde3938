"""The package's shape: one subpackage per step of the data flow, imported in one direction
(model <- variants <- compile <- evidence <- measure <- launch, then report and verify, then
the front doors); no import circle between modules or between subpackages, the variants
(compilekit.variants, variants/ in a checkout) counted; a variant imports of compilekit only
its public variant API (the model: Workload, errors, shapes) and other variants; model imports
no torch; every module is named in docs/layout.md; tests mirror the packages."""

import ast
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PACKAGE = os.path.join(ROOT, "compilekit")
VARIANTS = os.path.join(ROOT, "variants")  # installed as compilekit.variants
# The subpackages, and those each may import (a front door may import any of them).
MAY_IMPORT = {
    "model": set(),
    "variants": {"model"},
    "compile": {"model", "variants"},
    "evidence": {"model", "compile", "variants"},
    "measure": {"model", "compile", "evidence", "variants"},
    "launch": {"model", "compile", "measure", "evidence", "variants"},
    "report": {"model", "compile", "evidence", "variants"},
    "verify": {"model", "compile", "measure", "launch", "variants"},
}
FRONT_DOORS = {
    "cli", "usercell", "usercheck", "userexperiment", "usersweep", "userprofile", "__init__",
    "__main__",
}  # fmt: skip


def modules() -> dict[str, str]:
    """{module name under compilekit (compile.passlib.naive_to_sdpa, variants.naive): its file}."""
    found = {}
    for top, prefix in ((PACKAGE, ""), (VARIANTS, "variants.")):
        for folder, _, names in os.walk(top):
            for name in names:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(folder, name), top)[:-3]
                    module = prefix + rel.replace(os.sep, ".").removesuffix("__init__")
                    found[module.removesuffix(".") or "__init__"] = os.path.join(folder, name)
    return found


def imports(path: str, known) -> set[str]:
    """The compilekit modules a file imports, at its top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        names = []
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("compilekit"):
            base = node.module.removeprefix("compilekit").lstrip(".")
            names = [base] + [f"{base}.{a.name}".lstrip(".") for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.removeprefix("compilekit.") for a in node.names]
        out |= {n or "__init__" for n in names if (n or "__init__") in known}
    return out


def graph() -> dict[str, set[str]]:
    known = modules() | {"__init__": ""}
    return {m: imports(path, known) - {m} for m, path in modules().items()}


def package_of(module: str) -> str:
    return module.split(".")[0]


def _assert_no_circle(edges: dict[str, set[str]]) -> None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            assert state.get(other) != "open", " -> ".join(stack[stack.index(other) :] + [other])
            if other not in state:
                visit(other)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_no_import_circle_between_modules():
    _assert_no_circle({m: e - {"__init__"} for m, e in graph().items()})


def test_a_variant_reaching_deeper_than_its_api_is_a_planted_circle_and_is_caught():
    """measure.inputs imports variants.masks: were masks to import measure back (a variant
    reaching for the measuring code), both checks would say so."""
    edges = {m: e - {"__init__"} for m, e in graph().items()}
    assert "variants.masks" in edges["measure.inputs"]
    edges["variants.masks"] = edges["variants.masks"] | {"measure.inputs"}
    with pytest.raises(AssertionError, match="measure.inputs -> variants.masks"):
        _assert_no_circle(edges)
    reached = {package_of(e) for e in edges["variants.masks"]} - {"variants"}
    assert reached - MAY_IMPORT["variants"] == {"measure"}


def test_each_subpackage_imports_only_those_below_it():
    """No circle between subpackages either: measuring never imports presenting, model imports
    nothing of compilekit but itself, verify never the report, no subpackage a front door."""
    for module, edges in graph().items():
        package = package_of(module)
        if package in FRONT_DOORS:
            continue
        assert package in MAY_IMPORT, f"{module}: a module outside every subpackage"
        reached = {package_of(e) for e in edges} - {package}
        extra = reached - MAY_IMPORT[package]
        # ROOT and __version__ are the names taken from the package itself
        extra -= {"__init__"} if _only_root(module) else set()
        assert not extra, f"compilekit.{module} imports {sorted(extra)}"


def _only_root(module: str) -> bool:
    tree = ast.parse(open(modules()[module]).read())
    return all(
        {a.name for a in node.names} <= {"ROOT", "__version__"}
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "compilekit"
    )


def test_the_library_never_imports_the_command_line():
    assert "cli" not in graph()["__init__"]


def test_importing_the_model_imports_no_torch():
    model = [m for m in modules() if package_of(m) == "model"]
    code = (
        "import sys\n"
        + "".join(f"import compilekit.{m}\n" for m in model)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_command_line_and_a_cells_parent_import_no_torch():
    """`compilekit run` spends none of a cell's seconds importing torch in the parent (seconds
    of its own): the parser, the runner, the sweep and a cell process's entry module leave
    torch to the processes that measure."""
    code = (
        "import sys\nimport compilekit.cli as cli\ncli.build_parser()\n"
        "import compilekit.launch.runner, compilekit.launch.sweep, compilekit.launch.cell\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_every_module_is_named_in_the_layout_page():
    with open(os.path.join(ROOT, "docs", "layout.md")) as f:
        page = f.read()
    for module in modules():
        if package_of(module) == "variants":  # one kernel or model per file: docs/variants.md
            continue
        if module.startswith("compile.passlib."):
            module = "compile.passlib"
        if module in ("__init__", "__main__") or module in MAY_IMPORT:
            continue
        path = module.replace(".", "/")
        assert f"`{path}.py`" in page or f"`{path}/`" in page, module


def test_tests_live_in_folders_that_mirror_the_packages():
    """tests/<subpackage>/ for each subpackage that has tests; no other test folder but the
    front doors' (tests/frontdoor/) and the variants' (tests/variants/)."""
    folders = {
        name
        for name in os.listdir(os.path.join(ROOT, "tests"))
        if os.path.isdir(os.path.join(ROOT, "tests", name)) and not name.startswith("__")
    }
    assert folders <= set(MAY_IMPORT) | {"frontdoor", "variants"}, folders
    loose = [n for n in os.listdir(os.path.join(ROOT, "tests")) if n.startswith("test_")]
    assert loose == ["test_layout.py"], loose


def test_modules_and_functions_stay_short_enough_to_read_in_one_sitting():
    """No module over 400 lines, no function over 80 (variants/ aside: one kernel per file)."""
    for module, path in modules().items():
        if package_of(module) == "variants":
            continue
        with open(path) as f:
            text = f.read()
        assert len(text.splitlines()) <= 400, (module, len(text.splitlines()))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 80, (module, node.name, lines)


def test_the_wheel_lists_every_package_and_ships_the_variants_inside_compilekit():
    """pyproject lists its packages by hand (compilekit.variants is mapped from variants/, which
    setuptools' find cannot see): a subpackage left off that list is missing from every wheel."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    folders = {
        os.path.relpath(folder, ROOT).replace(os.sep, ".")
        for folder, _, names in os.walk(PACKAGE)
        if any(n.endswith((".py", ".j2")) for n in names) and "__pycache__" not in folder
    }
    listed = set(setuptools["packages"])
    assert folders | {"compilekit.variants"} == listed, folders ^ listed
    assert setuptools["package-dir"] == {"compilekit.variants": "variants"}
