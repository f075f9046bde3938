"""The kernels of a profiled step's GPU-side range, and the time they overlapped: a kernel
launched with programmatic dependent launch starts while the one before it still runs."""

from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from compilekit.evidence import stepwindows
from compilekit.evidence.profiling import WRAPPER_RE


def _event(name, start, end, device=DeviceType.CUDA):
    return SimpleNamespace(
        name=name, device_type=device, time_range=SimpleNamespace(start=start, end=end)
    )


def test_overlap_is_the_summed_durations_beyond_their_union():
    """Two steps in us: the second kernel starts 2 us before the first ends, a third runs
    inside another's range (counted whole), a fourth after a gap (no overlap, and the gap is
    not negative overlap)."""
    first = [(0, 10, "a"), (8, 20, "b"), (25, 30, "c")]  # 27 us summed, 25 covered
    second = [(0, 10, "a"), (2, 5, "inside"), (12, 20, "b")]  # 21 summed, 18 covered
    assert stepwindows.overlap_ms([first]) == pytest.approx(0.002)
    assert stepwindows.overlap_ms([second]) == pytest.approx(0.003)
    assert stepwindows.overlap_ms([first, second, second]) == pytest.approx(0.003)  # median
    assert stepwindows.overlap_ms([[(0, 10, "a"), (10, 20, "b")]]) == 0.0
    assert stepwindows.overlap_ms([]) == 0.0


def test_a_steps_window_holds_its_device_kernels_and_no_range_or_host_event():
    events = [
        _event("step", 0, 100, DeviceType.CPU),
        _event("step", 5, 50),  # the step's GPU-side range
        _event("step", 60, 90),
        _event("triton_red_fused_mm_0", 6, 20),
        _event("triton_poi_fused_add_1", 18, 30),
        _event("aten::mm", 7, 8, DeviceType.CPU),
        _event("Torch-Compiled Region: 0/0", 6, 40),
        _event("triton_red_fused_mm_0", 61, 80),
        _event("stray", 95, 99),  # outside every window
    ]
    windows = stepwindows.window_launches(events, "step", WRAPPER_RE)
    assert [[name for _, _, name in w] for w in windows] == [
        ["triton_red_fused_mm_0", "triton_poi_fused_add_1"],
        ["triton_red_fused_mm_0"],
    ]
    assert stepwindows.overlap_ms(windows) == pytest.approx(0.001)  # median of 0.002 and 0


def test_the_launches_no_op_claimed_keep_their_place_and_time():
    """Two steps, each launching a GEMM twice (one claimed by an op per step) and an add no op
    claimed: the unclaimed GEMM is the first of the two, each launch's time its own."""
    step = [(0, 10, "gemm"), (12, 15, "add"), (20, 26, "gemm")]
    later = [(100, 108, "gemm"), (110, 113, "add"), (120, 126, "gemm")]
    found = stepwindows.unattached([step, later], {"gemm": 2}, n_steps=2)
    assert found == {
        ("gemm", 0): [pytest.approx(0.010), pytest.approx(0.008)],
        ("add", 0): [pytest.approx(0.003), pytest.approx(0.003)],
    }
