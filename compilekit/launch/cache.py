"""A cell's compile cache: its key (what shapes the compiled code, and nothing else), its
folder, and whether a kept cache may be reused.

Each cell's cache lives in COMPILEKIT_CACHE (default ~/.cache/compilekit), in a folder named by
a hash of its key; key.json beside it is checked on reuse, and a cache whose files do not read
back is dropped and compiled again (the run says so).
"""

from __future__ import annotations

import json
import os

from compilekit import ROOT
from compilekit.model.store import CorruptFile, json_fits, read_json


def default_root() -> str:
    return os.environ.get("COMPILEKIT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "compilekit"
    )


# The toolkit's own modules that shape a compile: the settings it makes inside torch, the modes
# and their options, Inductor options and graph passes, the depyf shim, the inputs a compile
# specializes on. Not the phase or measuring code: editing those never recompiles.
COMPILE_SHAPING = (
    "compile/settings.py",
    "compile/modes.py",
    "compile/knobs.py",
    "compile/passes.py",
    "compile/capture.py",
    "measure/inputs.py",
)


def key_of(cell) -> dict:
    """Everything that changes the compiled code or the cold figure of a cell, and nothing
    else: the cell (mode, options, config, passes, shape, dtype, device), the variant's import
    closure, the passes' files, the compile-shaping modules, and the versions of Python, torch,
    triton and depyf."""
    import platform

    from compilekit.compile import modes
    from compilekit.evidence.envinfo import installed_version

    # from package metadata: nothing imported
    versions = {name: installed_version(name) for name in ("torch", "triton", "depyf")}
    code = code_sources(cell)
    return {
        "cell": cell.to_dict(),
        "variant_sources": code["variant"],
        "pass_sources": code["passes"],
        "mode_options": repr(modes.MODES[cell.mode][0]),
        "compilekit_sources": compile_shaping_hash(),
        "python": platform.python_version(),
        **versions,
    }


def code_sources(cell) -> dict:
    """The user's code a cell runs, hashed: {"variant": its import closure, "passes": each
    pass file's}. A result records it; a sweep compares it with the checkout's."""
    from compilekit.compile.passes import pass_file
    from compilekit.compile.variant import closure_hash, source_hash

    return {
        "variant": source_hash(cell.variant),
        "passes": [closure_hash(pass_file(spec)) for spec in cell.passes],
    }


def code_moved(cell, recorded: dict | None, hashed: dict | None = None) -> str | None:
    """Why a cell's stored result was not measured with the checkout's code (its recorded
    code_sources against the checkout's), or None when it was. `hashed` keeps the checkout's
    per variant and passes across calls, so a sweep hashes each once."""
    if not recorded:
        return "no record of the code it was measured with"
    hashed = {} if hashed is None else hashed
    key = (cell.variant, *cell.passes)
    if key not in hashed:
        hashed[key] = code_sources(cell)
    now = hashed[key]
    if recorded.get("variant") != now["variant"]:
        return f"{cell.variant}'s code changed since it was measured"
    if recorded.get("passes") != now["passes"]:
        return "a pass's code changed since it was measured"
    return None


def compile_shaping_hash() -> str:
    """A hash of the compile-shaping modules' code, comments, docstrings and layout left out
    (their syntax tree), so a comment or a reflowed line keeps every cached compile."""
    import ast
    import hashlib

    digest = hashlib.sha256()
    for name in COMPILE_SHAPING:
        with open(os.path.join(ROOT, "compilekit", name), "rb") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and _is_docstring(body[0]):
                node.body = body[1:] or [ast.Pass()]
        digest.update(ast.dump(tree).encode())
    return digest.hexdigest()[:16]


def _is_docstring(node) -> bool:
    import ast

    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def isa_probe_folder(cache_root: str) -> str:
    """Where every cell under cache_root builds Inductor's CPU ISA probes (settings.py's
    shared_isa_probes), one folder per torch version."""
    from compilekit.evidence.envinfo import installed_version

    return os.path.join(cache_root, "cpu-isa-probes", f"torch-{installed_version('torch')}")


def inductor_env(cache_dir: str) -> dict:
    """The environment every process of the cell in cache_dir compiles under: its own Inductor
    cache, and the CPU ISA probes all cells under the same root share."""
    from compilekit.compile import settings

    return {
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_dir, "inductor"),
        settings.ISA_PROBES: isa_probe_folder(os.path.dirname(cache_dir)),
    }


def folder(cell, cache_root: str, key: dict | None = None) -> str:
    """The cell's own cache folder, named by a hash of its key (key_of(cell) if not given)."""
    import hashlib

    text = json.dumps(key if key is not None else key_of(cell), sort_keys=True)
    return os.path.join(
        cache_root, cell.label() + "-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    )


# What a first run's cold process leaves in the cache, for every later measure process.
COLD_FILES = ("cold.json", os.path.join("capture", "graphs.json"))
# What the measure process reads of cold.json (compilekit/launch/cell.py writes it).
COLD_FIELDS = {"compile_cold_s": (int, float), "measured_at": (str,), "includes": (str,)}


def _check_kept(path: str, data, fields: dict) -> None:
    """CorruptFile unless a kept cache file is a JSON object with these fields and types."""
    if not isinstance(data, dict):
        raise CorruptFile(f"{path} is corrupt (it holds {type(data).__name__}, not an object)")
    wrong = [k for k, types in fields.items() if not json_fits(data.get(k), types)]
    if wrong:
        raise CorruptFile(f"{path} is corrupt (wrong or missing {', '.join(wrong)})")


def state(key: dict, cache_dir: str, fresh: bool) -> tuple[bool, str | None]:
    """(whether cold + capture must run, a note when a kept cache had to be dropped).

    A cache is reused only when its key.json matches and cold.json and the capture read back.
    """
    if fresh:
        return True, None
    needed = ("key.json", *COLD_FILES)
    if not all(os.path.exists(os.path.join(cache_dir, f)) for f in needed):
        return True, None
    try:
        for name in needed:
            path = os.path.join(cache_dir, name)
            _check_kept(path, read_json(path), COLD_FIELDS if name == "cold.json" else {})
        # compared as JSON reads it back (a tuple in the key comes back a list)
        if read_json(os.path.join(cache_dir, "key.json")) != json.loads(json.dumps(key)):
            return True, f"the kept cache in {cache_dir} has another key; compiled again"
    except CorruptFile as exc:
        return True, f"{exc}; the cache was dropped and compiled again"
    return False, None
