"""dev/triton_flash_bench.py: the kernel benchmark loads an older copy of a kernel beside the
current one without taking over its op, and reads its options in one line. Not part of
`make test` (dev/ is the lab): `python -m pytest dev/tests`."""

import os

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def gluon_flash():
    from compilekit.variants import gluon_flash

    if gluon_flash.gl is None:
        pytest.skip(f"no Gluon here: {gluon_flash._NO_GLUON}")
    return gluon_flash


def _bench_module():
    import importlib.util
    import os

    path = os.path.join(ROOT, "dev", "triton_flash_bench.py")
    spec = importlib.util.spec_from_file_location("flash_bench_for_gluon", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench, path


def test_the_bench_reads_gluon_tiles_and_refuses_a_bad_one_in_one_line():
    import subprocess
    import sys

    bench, path = _bench_module()
    tiles = (
        "64x64x4x3,128x128x4x3xws,128x128x4x3xp,128x64x4x3xpxq2,128x128x4x3xpxq2xk,"
        "128x128x4x3xpxk,64x64x4x3@32,128x128x4x3xpxq2xkxn"
    )
    assert bench.gluon_tiles(tiles) == [
        {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "STAGES": 3, "WS": False,
         "PERSISTENT": False},
        {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "STAGES": 3, "WS": True,
         "PERSISTENT": False},
        {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "STAGES": 3, "WS": True,
         "PERSISTENT": True, "Q_STAGES": 1, "SHORT_K": False, "PINGPONG": True},
        {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "STAGES": 3, "WS": True,
         "PERSISTENT": True, "Q_STAGES": 2, "SHORT_K": False, "PINGPONG": True},
        {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "STAGES": 3, "WS": True,
         "PERSISTENT": True, "Q_STAGES": 2, "SHORT_K": True, "PINGPONG": True},
        {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "STAGES": 3, "WS": True,
         "PERSISTENT": True, "Q_STAGES": 1, "SHORT_K": True, "PINGPONG": True},
        {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "STAGES": 3, "WS": False,
         "PERSISTENT": False, "L2_HEADS": 32},
        {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "STAGES": 3, "WS": True,
         "PERSISTENT": True, "Q_STAGES": 2, "SHORT_K": True, "PINGPONG": False},
    ]  # fmt: skip
    for bad in ("128x128x4x3xwsxq2", "128x128x4x3xpxq2xws", "128x128x4x3xpxqq", "64x64x4x3xk",
                "128x128x4x3xwsxk", "128x128x4x3xpxkxq2", "128x128x4x3xpxq2xkxk", "64x64x4x3@",
                "128x128x4x3xpxnxk", "128x128x4x3xwsxn",
                "64x64x4x3@0", "64x64x4x3@x"):  # fmt: skip
        with pytest.raises(ValueError, match="xqN"):
            bench.gluon_tiles(bad)
    done = subprocess.run(
        [sys.executable, path, "--gluon-tiles", "64x64"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "triton_flash_bench: --gluon-tiles '64x64' is not "
        "BLOCK_MxBLOCK_Nxwarpsxstages[xws|xp[xqN][xk][xn]][@L2_HEADS] (e.g. 128x128x8x3, "
        "128x128x4x3xpxq2xk or 64x64x4x3@32)"
    ]


def test_the_bench_gluon_baseline_leaves_the_current_op_in_place(
    gluon_flash, tmp_path, monkeypatch
):
    """An older copy of gluon_flash.py loaded beside the current one must not take over
    compilekit::gluon_flash_attention, or "gluon-flash compiled" would run the copy: each op
    dispatches to its own module's launch."""
    import os

    bench, _ = _bench_module()
    copy = tmp_path / "old_gluon_flash.py"
    with open(gluon_flash.__file__) as f:
        copy.write_text(f.read())
    baseline = bench.baseline_module(str(copy))
    assert os.path.samefile(baseline.__file__, copy)
    q = torch.zeros(1, 1, 4, 64)
    # each module's launch, stood in for: what it returns says whose op ran
    monkeypatch.setattr(gluon_flash, "_launch_known", lambda *a: torch.full_like(q, 1.0))
    monkeypatch.setattr(baseline, "_launch_known", lambda *a: torch.full_like(q, 2.0))
    assert torch.ops.compilekit.gluon_flash_attention(q, q, q, True).unique().tolist() == [1.0]
    assert gluon_flash._gluon_op(q, q, q, True).unique().tolist() == [1.0]
    got = torch.ops.compilekit_baseline.gluon_flash_attention(q, q, q, True)
    assert got.unique().tolist() == [2.0]


def test_the_bench_baseline_leaves_the_current_op_in_place(tmp_path):
    """dev/triton_flash_bench.py loads an older copy of the kernel beside the current
    one: the copy's custom op must not take over the current op's name, or "triton-flash
    compiled" runs the copy's kernel."""
    import importlib.util

    custom_ops = pytest.importorskip("torch._library.custom_ops")
    from compilekit.variants import triton_flash as tf

    if not hasattr(custom_ops, "OPDEFS") or tf.OP_NAME not in custom_ops.OPDEFS:
        pytest.skip("this torch keeps no registry of custom ops (torch._library.custom_ops)")
    path = os.path.join(ROOT, "dev", "triton_flash_bench.py")
    spec = importlib.util.spec_from_file_location("flash_bench_under_test", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    copy = tmp_path / "old_triton_flash.py"
    with open(os.path.join(ROOT, "variants", "triton_flash.py")) as f:
        copy.write_text(f.read())
    current = custom_ops.OPDEFS[tf.OP_NAME]
    baseline = bench.baseline_module(str(copy))
    assert custom_ops.OPDEFS[tf.OP_NAME] is current
    assert baseline._flash_op is not current
    assert custom_ops.OPDEFS[baseline.OP_NAME] is baseline._flash_op
