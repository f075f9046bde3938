"""kernels.json read back: the kernel map's shape, checked before any view formats it.

A file of the wrong shape (a record that is a number, a time that is a string, a kernel source
outside the run directory) is CorruptFile naming the first thing wrong, never a TypeError deep
in a table or a page.
"""

from __future__ import annotations

import os

from compilekit.model.store import CorruptFile, json_fits, read_json

NUMBER = (int, float)
OPTIONAL_NUMBER = (int, float, type(None))
TOP = {"kernels": (list,), "by_source_line": (list,), "kernels_per_forward": NUMBER,
       "forward_device_ms": NUMBER}  # fmt: skip
KERNEL = {"name": (str,), "kind": (str,), "aten_ops": (list,),
          "source_lines": (list,), "source_via": (str,), "calls_per_forward": NUMBER,
          "device_ms": NUMBER}  # fmt: skip
KERNEL_OPTIONAL = {"launcher": (str,), "share": OPTIONAL_NUMBER, "source_file": (str, type(None)),
                   "roofline": (dict, type(None)), "origin_lines": (list,),
                   "bytes": OPTIONAL_NUMBER, "flops": OPTIONAL_NUMBER}  # fmt: skip
LINE = {"file": (str,), "line": (int,), "code": (str,)}
BY_LINE = {**LINE, "kernels": (list,), "attributed_ms": NUMBER}
ROOFLINE = {"gbps": OPTIONAL_NUMBER, "bandwidth_share": OPTIONAL_NUMBER,
            "tflops": OPTIONAL_NUMBER, "compute_share": OPTIONAL_NUMBER,
            "bound": (str, type(None))}  # fmt: skip


def _problem(record, required: dict, optional: dict, where: str) -> str | None:
    """What is wrong with one dict record, or None."""
    if not isinstance(record, dict):
        return f"{where} is {type(record).__name__}, not a record"
    for key, types in required.items():
        if key not in record:
            return f"{where} has no {key!r}"
        if not json_fits(record[key], types):
            return f"{where}[{key!r}] is {record[key]!r:.40}"
    for key, types in optional.items():
        if key in record and not json_fits(record[key], types):
            return f"{where}[{key!r}] is {record[key]!r:.40}"
    return None


def _kernel_problem(rec, where: str) -> str | None:
    problem = _problem(rec, KERNEL, KERNEL_OPTIONAL, where)
    if problem:
        return problem
    if not all(isinstance(op, str) for op in rec["aten_ops"]):
        return f"{where}['aten_ops'] holds a non-string"
    for i, line in enumerate(rec["source_lines"] + rec.get("origin_lines", [])):
        if problem := _problem(line, LINE, {}, f"{where} source line {i}"):
            return problem
    path = rec.get("source_file")
    if path and (os.path.isabs(path) or ".." in path.replace("\\", "/").split("/")):
        return f"{where}['source_file'] {path!r:.60} is outside the run directory"
    return _problem(rec.get("roofline") or {}, {}, ROOFLINE, f"{where} roofline")


def check(data, where: str) -> dict:
    """`data` (a parsed kernels.json) if it is a kernel map; CorruptFile naming what is not."""
    problem = _problem(data, TOP, {"forward_host_ms": OPTIONAL_NUMBER}, where)
    if problem is None:
        for i, rec in enumerate(data["kernels"]):
            if problem := _kernel_problem(rec, f"kernel {i}"):
                break
    if problem is None:
        for i, row in enumerate(data["by_source_line"]):
            problem = _problem(row, BY_LINE, {}, f"source line row {i}")
            if problem is None and not all(isinstance(k, str) for k in row["kernels"]):
                problem = f"source line row {i}['kernels'] holds a non-string"
            if problem:
                break
    if problem:
        raise CorruptFile(f"{where} is corrupt ({problem})")
    return data


def load(path: str) -> dict:
    """Read and check a kernels.json; CorruptFile names the file and what is wrong."""
    return check(read_json(path), path)
