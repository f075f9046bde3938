"""Where a sweep's seconds went, one line per finished cell: wall, the waits for the GPU and
CPU locks, compile and timing steps of each process. `python3 dev/sweep_steps.py SWEEP_DIR`"""

import json
import os
import sys

KEYS = (
    "gpu_alone_s",
    "gpu_shared_s",
    "gpu_alone_turns",
    "gpu_lock_wait_s",
    "cpu_lock_wait_s",
    "wait_for_cold",
    "compile_warm",
    "time",
)
COLD = (
    "cold.imports",
    "cold.compile_cold",
    "cold.gpu_lock_wait_s",
    "cold.gpu_alone_s",
    "cold.gpu_shared_s",
    "cold.gpu_alone_turns",
    "capture.compile_capture",
    "capture.gpu_alone_s",
    "capture.gpu_shared_s",
)


def main(sweep_dir: str) -> None:
    rows = []
    for name in sorted(os.listdir(sweep_dir)):
        path = os.path.join(sweep_dir, name, "result.json")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            r = json.load(f)
        steps = r.get("steps_s") or {}
        rows.append((r.get("wall_s") or 0, name, r.get("status"), steps))
    print("wall_s status cell " + " ".join(KEYS + COLD))
    for wall, name, status, steps in sorted(rows, reverse=True):
        cols = " ".join(f"{steps.get(k, '-')}" for k in KEYS + COLD)
        print(f"{wall:7.1f} {status} {name} {cols}")
    print(f"{len(rows)} cells, sum of walls {sum(r[0] for r in rows):.0f} s")


if __name__ == "__main__":
    main(sys.argv[1])
