"""The package's shape: no import circle, no edge from measuring to presenting, from the
library to the command line, or from verify to the report; the record's modules import no
torch; every module is named in docs/layout.md."""

import ast
import os
import subprocess
import sys

from tests.conftest import ROOT

PACKAGE = os.path.join(ROOT, "compilekit")
MEASURING = {"cell", "failures", "steady", "evidence", "runner", "timing", "inputs", "profiling",
             "kernelmap", "capture", "settings", "sweep", "raysweep", "locks", "reaper",
             "cpuwatch", "verify"}  # fmt: skip
PRESENTING = {"report", "sweepreport", "cellview", "pages", "publish", "cli"}
NO_TORCH = ("spec", "experiment", "result", "store", "kernelfile", "errors")


def modules() -> dict[str, str]:
    """{module name under compilekit (passlib.naive_to_sdpa): its file}."""
    found = {}
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, name), PACKAGE)[:-3]
                found[rel.replace(os.sep, ".").removesuffix(".__init__")] = os.path.join(
                    folder, name
                )
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
        out |= {n for n in names if n in known}
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports(path, known) - {m, "__init__"} for m, path in known.items()}


def test_no_import_circle():
    edges, state, stack = graph(), {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for other in sorted(edges[module]):
            assert state.get(other) != "open", " -> ".join(stack[stack.index(other) :] + [other])
            if other not in state:
                visit(other)
        stack.pop()
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module)


def test_measuring_never_imports_presenting_nor_the_library_the_cli():
    edges = graph()
    for module in MEASURING:
        assert not edges[module] & PRESENTING, (module, edges[module] & PRESENTING)
    assert "cli" not in edges.get("__init__", set()) | imports(
        os.path.join(PACKAGE, "__init__.py"), modules()
    )
    assert not edges["verify"] & {"report", "sweepreport", "cellview", "pages"}


def test_the_records_modules_import_no_torch():
    code = (
        "import sys\n"
        + "".join(f"import compilekit.{m}\n" for m in NO_TORCH)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_every_module_is_named_in_the_layout_page():
    with open(os.path.join(ROOT, "docs", "layout.md")) as f:
        page = f.read()
    for module in modules():
        name = module.split(".")[0] if module.startswith("passlib") else module
        if name in ("__init__", "__main__"):
            continue
        assert f"`{name}.py`" in page or f"`{name}/`" in page, module


def test_modules_and_functions_stay_short_enough_to_read_in_one_sitting():
    """No module over 400 lines, no function over 80 (variants/ aside: one kernel per file)."""
    for module, path in modules().items():
        with open(path) as f:
            text = f.read()
        assert len(text.splitlines()) <= 400, (module, len(text.splitlines()))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 80, (module, node.name, lines)
