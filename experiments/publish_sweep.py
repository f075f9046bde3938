"""Publish a sweep measured elsewhere (the H200) into experiments/results: what a reader needs to
check every figure, without the bulk (traces, depyf dumps, TORCH_TRACE logs stay behind).

    python3 experiments/publish_sweep.py SWEEP_DIR DEST [--extra FILE ...]

Per cell it keeps result.json, kernels.json, the generated kernels, Inductor's output code,
log.txt and the result.json of each run kept in attempts/; then it re-renders REPORT.md, the
plots and the HTML pages with this checkout's code.
The figures derived from a cell's stored kernel map (each kernel's roofline place, against the
sweep's measured ceilings in env.json; the roofline split; the CUDA-graph replay breakdown; no
bytes or FLOPs on a library's workspace memset) are
derived again too, from the same measured inputs (kernel records, host time per call,
recordings, torch's count of copied inputs), so a fix to how they are read reaches published
results without a re-run; each changed cell is named. DEST is emptied first, but for
its README.md (the prose written about the results).
"""

import argparse
import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compilekit import diagnose, pages, roofline, sweepreport  # noqa: E402
from compilekit import result as results_mod  # noqa: E402
from compilekit.store import read_json, write_json  # noqa: E402

CELL_FILES = (
    "result.json", "kernels.json", "log.txt", "output_code*.py", "kernels/*",
    # the other runs a result lists (a failed rerun, a noisy timing): their records only
    "attempts/*/result.json", "attempts/*/attempts/*/result.json",
)  # fmt: skip
TOP_FILES = ("env.json", "sweep.json")


def copy_matching(src: str, dst: str, patterns) -> None:
    for pattern in patterns:
        for path in glob.glob(os.path.join(src, pattern)):
            target = os.path.join(dst, os.path.relpath(path, src))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(path, target)


def drop_side_memsets(records: list[dict]) -> None:
    """Kernel maps measured before the longest-kernel rule (profiling.forward_kernels) gave
    every kernel of an op the op's bytes and FLOPs: a cuBLAS or cuDNN workspace memset read as
    moving the whole op's tensors. Such a memset carries neither now; a fill's own memset keeps
    its bytes."""
    for record in records:
        if record["name"].startswith("Memset") and not record["launcher"].endswith(
            ("fill_", "zero_")
        ):
            record["bytes"] = record["flops"] = None


def rederive(run_dir: str, ceilings: dict | None) -> bool:
    """Derive the roofline (per kernel, against the sweep's measured ceilings), its summary line
    and the replay breakdown again from run_dir's kernel map; True when any changed."""
    result = results_mod.load(run_dir)
    kmap_path = os.path.join(run_dir, "kernels.json")
    if not result.measured or not os.path.isfile(kmap_path):
        return False
    kmap = read_json(kmap_path)
    records = kmap["kernels"]
    before = (result.replay, result.roofline, json.dumps(records, sort_keys=True))
    drop_side_memsets(records)
    if ceilings:
        roofline.annotate(records, ceilings, result.flops, kmap.get("io_bytes"))
    write_json(kmap_path, kmap)
    result.roofline = roofline.summary(records)
    if result.replay:
        old = result.replay
        tree = {k: old[k] for k in ("recordings", "rerecords") if k in old}
        result.replay = diagnose.replay_breakdown(
            records, old["host_ms_per_call"], tree or None, old["inputs_recorded_non_static"]
        )
        result.replay["bytes_dtypes"] = old.get("bytes_dtypes")
    if (result.replay, result.roofline, json.dumps(records, sort_keys=True)) == before:
        return False
    result.save(run_dir)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir")
    parser.add_argument("dest")
    parser.add_argument("--extra", nargs="*", default=[], help="files to copy beside REPORT.md")
    args = parser.parse_args()
    cells = sorted(
        d
        for d in os.listdir(args.sweep_dir)
        if os.path.isfile(os.path.join(args.sweep_dir, d, "result.json"))
    )
    if not cells:
        print(f"publish_sweep: no cell results under {args.sweep_dir}", file=sys.stderr)
        return 2
    readme = os.path.join(args.dest, "README.md")
    prose = open(readme).read() if os.path.isfile(readme) else None
    shutil.rmtree(args.dest, ignore_errors=True)
    os.makedirs(args.dest)
    if prose is not None:
        with open(readme, "w") as f:
            f.write(prose)
    copy_matching(args.sweep_dir, args.dest, TOP_FILES)
    for extra in args.extra:
        shutil.copy2(extra, args.dest)
    ceilings = sweepreport.load_env(args.dest).get("ceilings")
    changed = []
    for cell in cells:
        os.makedirs(os.path.join(args.dest, cell))
        copy_matching(
            os.path.join(args.sweep_dir, cell), os.path.join(args.dest, cell), CELL_FILES
        )
        if rederive(os.path.join(args.dest, cell), ceilings):
            changed.append(cell)
    for cell in changed:
        print(f"re-derived from its kernel map: {cell}")
    print(sweepreport.report(args.dest))
    print(f"page: {pages.sweep_page(args.dest, refresh_runs=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
