"""Where a kernel's warps stall, by SASS instruction and by opcode, from Nsight Compute's source
page (its PC sampling, the SourceCounters section):

    ncu --section SourceCounters -f -o rep python3 dev/attention_calls.py gluon-flash 1x32x8192x128
    ncu --import rep.ncu-rep --page source --csv --print-source sass > rep_sass.csv
    python3 dev/ncu_stalls.py rep_sass.csv [--top 20]

(dev/h200_check.sh's P phase does all three where P_NCU_ARGS names SourceCounters.) For each
kernel in the file: the share of its stall samples per opcode (BAR.SYNC: a warpgroup or CTA
rendezvous; SYNCS.*: an mbarrier wait or arrive; WARPGROUP.*: waiting on an MMA), each with its
leading stall reasons (the stall_* columns), then the instructions that hold the most samples.
The CSV holds a header row per kernel (naming "Source" and a "Warp Stall Sampling" column), after
a row with the kernel's name; a file without one says which columns it has instead.
"""

from __future__ import annotations

import argparse
import collections
import csv
import re
import sys

PREDICATE = re.compile(r"^@!?U?P[T0-9]+\s+")


def kernels(path: str) -> list[dict]:
    """[{name, header, rows}] for each kernel's table in the source page's CSV."""
    with open(path, newline="", errors="replace") as f:
        lines = list(csv.reader(f))
    found, name = [], ""
    for i, row in enumerate(lines):
        if "Source" in row and any(c.startswith("Warp Stall Sampling") for c in row):
            found.append({"name": name, "header": row, "rows": []})
        elif found and len(row) == len(found[-1]["header"]):
            found[-1]["rows"].append(row)
        elif row and len(row) <= 2:  # a kernel's name (or "Kernel Name", name) before its table
            name = row[-1]
    if not found:
        seen = next((row for row in lines if len(row) > 2), [])
        raise SystemExit(
            f"{path}: no table with a 'Source' and a 'Warp Stall Sampling' column "
            f"(the columns there: {', '.join(seen[:20]) or 'none'})"
        )
    return found


def number(text: str) -> float:
    try:
        return float(text.replace(",", "")) if text.strip() else 0.0
    except ValueError:
        return 0.0


def opcode(source: str) -> str:
    """`@!P0 BAR.SYNC.DEFER_BLOCKING 0x0, 0x80` -> `BAR.SYNC`: the opcode's first two parts."""
    words = PREDICATE.sub("", source.strip()).split()
    return ".".join(words[0].split(".")[:2]) if words else "?"


def summary(kernel: dict, top: int) -> str:
    """The kernel's stall samples by opcode and its costliest instructions, as text."""
    header = kernel["header"]
    col = {name: i for i, name in enumerate(header)}
    samples = next(c for c in header if c.startswith("Warp Stall Sampling (All"))
    reasons = [c for c in header if c.startswith("stall_")]
    rows = [r for r in kernel["rows"] if number(r[col[samples]]) > 0]
    total = sum(number(r[col[samples]]) for r in rows)
    name = kernel["name"] or "(kernel)"
    lines = [f"{name}: {total:,.0f} stall samples, {len(rows)} instructions"]
    if not total:
        return lines[0]
    by_op = collections.defaultdict(lambda: [0.0, collections.Counter()])
    for r in rows:
        entry = by_op[opcode(r[col["Source"]])]
        entry[0] += number(r[col[samples]])
        entry[1].update({c: number(r[col[c]]) for c in reasons})
    lines.append("  by opcode (share of samples; leading reasons):")
    for op, (n, why) in sorted(by_op.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"    {n / total:6.1%}  {op:24s} {_reasons(why, n)}")
    lines.append(f"  the {top} instructions with the most samples:")
    address = next((c for c in header if "Address" in c), None)
    for r in sorted(rows, key=lambda r: -number(r[col[samples]]))[:top]:
        n = number(r[col[samples]])
        where = r[col[address]] if address else ""
        why = collections.Counter({c: number(r[col[c]]) for c in reasons})
        lines.append(f"    {n / total:6.1%}  {where:>8s}  {r[col['Source']].strip()[:60]:60s} "
                     f"{_reasons(why, n)}")  # fmt: skip
    return "\n".join(lines)


def _reasons(counts: collections.Counter, n: float) -> str:
    lead = [(c.removeprefix("stall_"), v) for c, v in counts.most_common(3) if v > 0]
    return ", ".join(f"{c} {v / n:.0%}" for c, v in lead)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="ncu --import REP --page source --csv --print-source sass")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    for kernel in kernels(args.csv):
        print(summary(kernel, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
