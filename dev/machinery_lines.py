"""Lines of compilekit's measuring machinery (issue 79: what keeps figures honest when cells run
beside each other, which a user of such a tool would not expect), at a git revision.

Counted: whole modules (locks, the CPU watch, the reaper, sweep scheduling) and the functions
that re-time a disturbed timing, replace a noisy run, and overlap a first run's imports,
wherever they live at that revision. Also the total of compilekit/ (variants/ apart).

Usage: python dev/machinery_lines.py [REV ...]   (default: HEAD)
"""

from __future__ import annotations

import ast
import subprocess
import sys

MODULES = {
    "locks": ["compilekit/launch/locks.py", "compilekit/measure/locks.py"],
    "CPU watch": ["compilekit/measure/cpuwatch.py"],
    "reaper": ["compilekit/launch/reaper.py"],
    "sweep scheduling": [
        "compilekit/launch/sweep.py", "compilekit/launch/raysweep.py",
        "compilekit/launch/rayjoin.py", "compilekit/launch/sweeprecord.py",
    ],
}  # fmt: skip
FUNCTIONS = {
    "re-times and noisy-run replacement": {
        "compilekit/measure/steady.py": ["retimes"],
        "compilekit/launch/runner.py": ["_worse", "_other_code", "_attempt_entry", "place"],
    },
    "import overlap": {
        "compilekit/launch/coldphase.py": [
            "wait_for_measure_imports", "wait_for_cold", "_left_behind", "_wait_for_end",
            "capture_beside", "wait_for_capture",
        ],
        "compilekit/launch/runner.py": ["_beside_measure", "_after_pair"],
    },
}  # fmt: skip


def show(rev: str, path: str) -> str | None:
    done = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def function_lines(source: str, names: list[str]) -> int:
    """Lines of these top-level functions in source (decorators included)."""
    total = 0
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            total += node.end_lineno - first + 1
    return total


def retime_lines(source: str) -> int:
    """steady.time_cell's attempt loop, where it is one: the lines between its first attempt
    and the quietest kept (a timing taken once has none)."""
    lines = source.splitlines()
    start = next((i for i, ln in enumerate(lines) if "for attempt in range(" in ln), None)
    end = next((i for i, ln in enumerate(lines) if "result.compiled_ms, result" in ln), None)
    return 0 if start is None or end is None else end - start


def count(rev: str) -> dict:
    out = {}
    for name, paths in MODULES.items():
        out[name] = sum(len(s.splitlines()) for p in paths if (s := show(rev, p)) is not None)
    for name, places in FUNCTIONS.items():
        out[name] = sum(
            function_lines(s, names) for p, names in places.items() if (s := show(rev, p))
        )
    steady = show(rev, "compilekit/measure/steady.py") or ""
    out["re-times and noisy-run replacement"] += retime_lines(steady)
    out["machinery"] = sum(out.values())
    files = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "compilekit"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    out["compilekit/"] = sum(
        len((show(rev, f) or "").splitlines()) for f in files if f.endswith(".py")
    )
    return out


def main(revs: list[str]) -> None:
    counts = {rev: count(rev) for rev in revs or ["HEAD"]}
    names = list(next(iter(counts.values())))
    print(f"{'':38}" + "".join(f"{rev[:12]:>14}" for rev in counts))
    for name in names:
        print(f"{name:38}" + "".join(f"{c[name]:>14,}" for c in counts.values()))


if __name__ == "__main__":
    main(sys.argv[1:])
