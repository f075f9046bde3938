"""Flash-decoding's two combines, through Triton's interpreter on the CPU: the split kernel's
last program of each (batch, K/V head) combining (the eager path: one launch) and the second
kernel (torch.compile's path) give the float64 reference's output, and the arrival counters are
back at 0 after each call, so the next call (or a CUDA graph's replay) finds them ready.

The interpreter runs a grid's programs one after another, so it checks the combine's arithmetic
and the counters' reset, not the arrivals' order under a GPU's concurrency: the GPU tests of
the decode kernel (tests/variants/test_gpu_kernels.py) check that."""

import json

import pytest

from tests.variants.test_triton_flash import BOUND, DECODE_CASES, _child

pytest.importorskip("triton", reason="triton not installed (pip install triton numpy)")

CHILD = r"""
import json, sys, torch
from compilekit.variants import flash_decode_combine as combine
from compilekit.variants import triton_flash_decode as decode
from compilekit.variants.masks import reference

second_launches = []
kernel = decode.combine_kernel
class Counted:  # the second kernel, counted where it is launched
    def __getitem__(self, grid):
        second_launches.append(grid)
        return kernel[grid]
decode.combine_kernel = Counted()
if sys.argv[2:] == ["chunks"]:  # up to 5 splits, 2 combined at a time: several chunks, one short
    decode.splits_for = lambda programs, keys, device: min(5, -(-keys // 64))
    combine.CHUNK_VALUES = 1
out = []
for i, (b, h, hkv, nq, nk, d, dtype) in enumerate(json.loads(sys.argv[1])):
    gen = torch.Generator().manual_seed(300 + i)
    dt = getattr(torch, dtype)
    q = torch.randn(b, h, nq, d, generator=gen).to(dt)
    k, v = (torch.randn(b, hkv, nk, d, generator=gen).to(dt) for _ in range(2))
    lens = torch.randint(nq, nk + 1, (b,), generator=gen, dtype=torch.int32)
    for fused in (True, False, None):  # None: the eager path's own choice
        for kv_lens in (None, lens):
            before = len(second_launches)
            runs = [decode.launch_interpreted(q, k, v, True, kv_lens=kv_lens, fused=fused)
                    for _ in range(2)]  # twice: the second call finds the counters as the first left them
            err = 0.0
            for row in range(b):
                n = nk if kv_lens is None else int(kv_lens[row])
                r = reference(q[row:row + 1], k[row:row + 1, :, :n], v[row:row + 1, :, :n], causal=True)
                for o in runs:
                    err = max(err, float((o[row:row + 1].double() - r).abs().max() / r.abs().max()))
            counters = combine._COUNTERS.get(q.device)
            out.append({"case": i, "fused": fused, "lens": kv_lens is not None, "err": err,
                        "splits": decode.plan(q, k)["num_splits"],
                        "second": len(second_launches) - before,
                        "counters": 0 if counters is None else int(counters.abs().sum())})
print(json.dumps(out))
"""


@pytest.mark.parametrize("splits", ["two", "chunks"])
def test_both_combines_match_the_reference_and_leave_the_counters_at_zero(splits):
    proc = _child(CHILD, json.dumps(DECODE_CASES), splits)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == 6 * len(DECODE_CASES)
    for row in rows:
        dtype = DECODE_CASES[row["case"]][-1]
        assert row["err"] < BOUND[dtype], row
        assert row["counters"] == 0, row
        split = row["splits"] > 1
        fused = row["fused"]
        if fused is None:  # its own choice: one launch where the last program combines in one
            # step (a chunk holds two splits or more), two kernels where it would take several
            fused = row["splits"] <= 2
        # fused: no second kernel; unfused: one per call where there is more than one split
        assert row["second"] == (0 if fused or not split else 2), row
    assert any(r["splits"] > 1 and r["fused"] for r in rows)  # the fused combine ran
    if splits == "chunks":  # more splits than a chunk: the chunks' sums carry over
        assert max(r["splits"] for r in rows) > 2
