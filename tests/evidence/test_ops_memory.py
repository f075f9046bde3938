"""The op cost matrix's memory column: what an op allocates shows, in MiB per forward, measured
in a profile of its own."""

import torch

from compilekit.evidence import opcost, profiling


def test_an_op_that_allocates_a_known_tensor_shows_its_bytes(tmp_path):
    def forward(x):
        scratch = torch.full((1 << 20,), 2.0)  # 4 MiB of float32 per call
        return x * scratch[: x.numel()].view_as(x)

    x = torch.ones(4, 4)
    prof = profiling.run_profiler(forward, (x,), "fwd", "cpu", str(tmp_path))
    rows = opcost.op_table(prof, "cpu", opcost.memory_profile(forward, (x,), "fwd", "cpu"))
    by_name = {r["name"]: r for r in rows}
    assert abs(by_name["aten::empty"]["allocated_mb"] - 4.0) < 0.01
    assert by_name["aten::full"]["calls_per_forward"] == 1
    assert abs(by_name["aten::mul"]["allocated_mb"] - 64 / 2**20) < 1e-6  # its 4x4 output
