"""The import closure of a variant's or a pass's file: the file and every file of this
project (or beside the file) it imports, followed transitively, found on the file system
without importing anything; its hash is what a cell's cache key covers of the user's code."""

from __future__ import annotations

import hashlib
import os
import sys

from compilekit import ROOT


def closure_hash(path: str) -> str:
    """Hash of a file's import closure (its name and content, and every file it imports)."""
    digest = hashlib.sha256()
    for path in import_closure(path):
        digest.update(path.encode())
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()[:16]


def import_closure(path: str) -> list[str]:
    """`path` and the files of every module it imports that lives in this project or beside
    `path` (never torch or the standard library), followed transitively; sorted."""
    import ast
    import importlib.util

    roots = (ROOT + os.sep, os.path.dirname(os.path.abspath(path)) + os.sep)
    # installed packages are versioned in the key, not hashed: a virtual environment inside
    # the project (or beside the user's file) must not pull torch's sources into the closure
    installed = _installed_dirs()
    seen, todo = set(), [os.path.abspath(path)]
    while todo:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        with open(file, "rb") as f:
            tree = ast.parse(f.read(), file)
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        for name in names:
            found = _module_file(name, os.path.dirname(file), importlib.util, roots)
            inside = found and found.startswith(roots) and not found.startswith(installed)
            if inside and found not in seen:
                todo.append(found)
    return sorted(seen)


def _installed_dirs() -> tuple:
    """Where installed packages and the standard library live (site-packages, the prefixes)."""
    import site
    import sysconfig

    dirs = {sys.prefix, sys.base_prefix, sysconfig.get_paths()["stdlib"]}
    dirs.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    dirs.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else sys.prefix)
    return tuple(os.path.abspath(d) + os.sep for d in dirs if d)


def _module_file(name: str, beside: str, util, roots: tuple) -> str | None:
    """The .py file of module `name` (beside the importing file, or in a package inside
    `roots`), found on the file system: nothing is imported, not even the package itself."""
    parts = name.split(".")
    candidate = os.path.join(beside, *parts) + ".py"
    if os.path.isfile(candidate):
        return os.path.abspath(candidate)
    # the deepest package already imported holding it: its folder may lie elsewhere than its
    # parent's (compilekit.variants is variants/ in a checkout); else the top-level spec,
    # found without importing anything
    depth = next(
        (n for n in range(len(parts) - 1, 0, -1) if ".".join(parts[:n]) in sys.modules), 0
    )
    package = sys.modules[".".join(parts[:depth])] if depth else None
    try:
        top = util.find_spec(parts[0]) if package is None else package.__spec__
    except (ImportError, ValueError):
        return None
    depth = depth or 1
    locations = list(getattr(top, "submodule_search_locations", None) or []) if top else []
    if not locations or not os.path.abspath(locations[0]).startswith(roots):
        return None
    base = os.path.join(locations[0], *parts[depth:])
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return os.path.abspath(path)
    return None
