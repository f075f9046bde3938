"""Custom Inductor graph passes per cell: `--pass NAME` (shipped, compilekit/passlib) or
`--pass path/to/file.py:factory`.

`factory()` returns a `torch._inductor.custom_graph_pass.CustomGraphPass` (a callable on an FX
graph with a `uuid()`). A cell's passes run at `joint_custom_pre_pass`, before Inductor's own
patterns, as one composite pass object (torch 2.11 takes one object there; 2.13 also a list).
The composite counts, per pass, how often it ran and how many graphs it changed, plus the
pass's own `matches` attribute if it keeps one. A pass runs only in a compile that really
happens (an FX-cache hit skips it), so the counts recorded are the capture recompile's, which
always recompiles.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys

from compilekit.compile.passlib import PASSES
from compilekit.model.errors import UserError


def is_pass_spec(spec: str) -> bool:
    return spec in PASSES or (":" in spec and spec.split(":", 1)[0].endswith(".py"))


def _file_and_factory(spec: str) -> tuple[str, str]:
    if spec in PASSES:  # shipped with compilekit: compilekit/compile/passlib/<file>, make_pass()
        return os.path.join(os.path.dirname(__file__), "passlib", PASSES[spec]), "make_pass"
    if not is_pass_spec(spec):
        raise UserError(
            f"pass {spec!r}: give one of {', '.join(PASSES)}, or path/to/file.py:factory "
            "(a function returning a CustomGraphPass)"
        )
    return os.path.abspath(spec.rsplit(":", 1)[0]), spec.rsplit(":", 1)[1]


def pass_file(spec: str) -> str:
    """The file a pass lives in (its cache key covers the file and what it imports)."""
    return _file_and_factory(spec)[0]


def load_pass(spec: str):
    """The pass object `factory()` returns; UserError when the file, the factory or the
    object's interface is missing."""
    path, name = _file_and_factory(spec)
    if not os.path.isfile(path):
        raise UserError(f"pass file {path!r} not found: give an existing path/to/file.py:factory")
    module_name = "compilekit_pass_" + hashlib.sha1(path.encode()).hexdigest()[:8]
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
        factory = getattr(module, name)
        graph_pass = factory()
    except AttributeError:
        raise UserError(f"no factory {name!r} in {path}: define {name}() there") from None
    except (Exception, SystemExit) as exc:  # the user's file: one line, never a traceback
        raise UserError(f"pass {spec!r} failed to load ({type(exc).__name__}: {exc})") from None
    if not callable(graph_pass) or not callable(getattr(graph_pass, "uuid", None)):
        raise UserError(
            f"pass {spec!r}: {name}() returned {type(graph_pass).__name__}, not a "
            "CustomGraphPass (a callable on an FX graph with a uuid() method)"
        )
    return graph_pass


def composite(specs: list[str]):
    """One CustomGraphPass running the cell's passes in order, counting what each did."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    loaded = [(spec, load_pass(spec)) for spec in specs]

    class CellPasses(CustomGraphPass):
        def __init__(self):
            self.stats = {spec: {"invocations": 0, "graphs_changed": 0} for spec in specs}

        def __call__(self, graph) -> None:
            for spec, graph_pass in loaded:
                before = _fingerprint(graph)
                graph_pass(graph)
                stats = self.stats[spec]
                stats["invocations"] += 1
                stats["graphs_changed"] += _fingerprint(graph) != before
                if isinstance(getattr(graph_pass, "matches", None), int):
                    stats["matches"] = graph_pass.matches

        def uuid(self):
            return hashlib.sha256(
                json.dumps([str(p.uuid()) for _, p in loaded]).encode()
            ).hexdigest()

    return CellPasses()


def _fingerprint(graph) -> list:
    return [(node.op, str(node.target), len(node.args)) for node in graph.nodes]
