"""triton-flash through Triton's interpreter on the CPU: awkward sizes, GQA, windows, NaN.

The interpreter is chosen when `triton` is imported, so each check runs in a child process with
TRITON_INTERPRET=1. Skipped, with the reason, where triton (or numpy) is not installed.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("triton", reason="triton not installed (pip install triton numpy)")
pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")

# (B, H, H_kv, S, D, causal, window, dtype): S off the 16-row block, B*H odd, GQA groups 1, 2, 8,
# windows smaller than a block.
CASES = [
    (1, 3, 3, 37, 16, True, 0, "float32"),
    (2, 4, 2, 50, 32, True, 0, "float16"),
    (1, 8, 1, 33, 64, True, 0, "float32"),
    (1, 8, 8, 45, 128, True, 0, "float16"),
    (3, 1, 1, 29, 16, False, 0, "float32"),
    (1, 2, 2, 70, 16, True, 5, "float32"),
    (1, 8, 4, 41, 32, True, 9, "float16"),
    (1, 1, 1, 1, 16, True, 0, "float32"),
]
BOUND = {"float32": 1e-5, "float16": 5e-3}

CHILD = r"""
import json, sys, torch, triton
from compilekit.variants import triton_flash
from compilekit.variants.triton_flash import flash_attention
from compilekit.variants.masks import reference
if sys.argv[2:] == ["tma"]:  # K and V through tensor descriptors, as a TMA config loads them
    triton_flash._attn_fwd.configs = [
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "TMA": True}, num_warps=1, num_stages=1)
    ]
if sys.argv[2:] == ["l2 groups"]:  # tiles in groups of two rows of B x H, a last one short
    triton_flash.l2_group_heads = lambda *shape: 2
out = []
for i, (b, h, hkv, s, d, causal, window, dtype) in enumerate(json.loads(sys.argv[1])):
    gen = torch.Generator().manual_seed(i)  # fresh random inputs per case
    dt = getattr(torch, dtype)
    q = torch.randn(b, h, s, d, generator=gen).to(dt)
    k, v = (torch.randn(b, hkv, s, d, generator=gen).to(dt) for _ in range(2))
    o = flash_attention(q, k, v, causal=causal, window=window)
    r = reference(q, k, v, causal=causal, window=window)
    finite = bool(torch.isfinite(o).all())
    err = float((o.double() - r).abs().max() / r.abs().max()) if finite else float("inf")
    out.append({"case": i, "err": err, "finite": finite, "shape": list(o.shape)})
print(json.dumps(out))
"""


def _child(code, *args, interpret=True):
    env = {**os.environ, "PYTHONPATH": ROOT}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("loads", ["pointers", "tma", "l2 groups"])
def test_matches_float64_reference_on_awkward_sizes(loads):
    proc = _child(CHILD, json.dumps(CASES), loads)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for case, got in zip(CASES, json.loads(proc.stdout.strip().splitlines()[-1])):
        b, h, _, s, d, *_, dtype = case
        assert got["finite"], case
        assert got["shape"] == [b, h, s, d]
        assert got["err"] < BOUND[dtype], (case, got)


# (B, H, H_kv, Q, K, D, dtype): decode shapes, a few queries over a longer cache (the split-KV
# kernel): Q 1 and 3, GQA groups 1, 4 and 8, K off the 64-key block and over several splits
DECODE_CASES = [
    (1, 4, 4, 1, 70, 16, "float32"),
    (2, 8, 2, 3, 200, 32, "float32"),
    (1, 32, 8, 1, 333, 128, "float16"),
    (2, 8, 1, 3, 65, 64, "float16"),
    (1, 4, 2, 3, 4, 16, "float32"),
]

DECODE_CHILD = r"""
import json, sys, torch
from compilekit.variants.triton_flash import flash_attention
from compilekit.variants.masks import reference
out = []
for i, (b, h, hkv, nq, nk, d, dtype) in enumerate(json.loads(sys.argv[1])):
    gen = torch.Generator().manual_seed(100 + i)
    dt = getattr(torch, dtype)
    q = torch.randn(b, h, nq, d, generator=gen).to(dt)
    k, v = (torch.randn(b, hkv, nk, d, generator=gen).to(dt) for _ in range(2))
    o = flash_attention(q, k, v, causal=True)
    r = reference(q, k, v, causal=True)  # the queries are the last nq of nk positions
    out.append({"err": float((o.double() - r).abs().max() / r.abs().max()),
                "shape": list(o.shape)})
try:
    flash_attention(torch.randn(1, 64, 3, 16), torch.randn(1, 1, 40, 16), torch.randn(1, 1, 40, 16))
except RuntimeError as exc:
    out.append(str(exc))
print(json.dumps(out))
"""


def test_decode_shapes_match_the_bottom_right_reference():
    """q of 1 and 3 queries over a longer cache, with GQA, through the split-KV kernel."""
    proc = _child(DECODE_CHILD, json.dumps(DECODE_CASES))
    assert proc.returncode == 0, proc.stderr[-2000:]
    *found, refused = json.loads(proc.stdout.strip().splitlines()[-1])
    for case, got in zip(DECODE_CASES, found, strict=True):
        b, h, _, nq, _, d, dtype = case
        assert got["shape"] == [b, h, nq, d]
        assert got["err"] < BOUND[dtype], (case, got)
    assert "at most 128 query rows per K/V head" in refused and "got 192" in refused


CACHED_CHILD = r"""
import json, sys, torch
from compilekit.variants.triton_flash import cached_attention
from compilekit.variants.masks import reference
out = []
# (B, H, H_kv, Q, capacity, D, key counts per row): a static cache filled to each row's count
for i, (b, h, hkv, nq, cap, d, lens) in enumerate(json.loads(sys.argv[1])):
    gen = torch.Generator().manual_seed(200 + i)
    q = torch.randn(b, h, nq, d, generator=gen)
    k, v = (torch.randn(b, hkv, cap, d, generator=gen) for _ in range(2))
    for row, n in enumerate(lens):  # the empty slots: NaN, so a read of one shows
        k[row, :, n:], v[row, :, n:] = float("nan"), float("nan")
    o = cached_attention(q, k, v, torch.tensor(lens, dtype=torch.int32))
    errs = [float((o[r].double() - reference(q[r:r+1], k[r:r+1, :, :n], v[r:r+1, :, :n],
                                             causal=True)[0]).abs().max()) for r, n in enumerate(lens)]
    out.append({"errs": errs, "finite": bool(torch.isfinite(o).all())})
try:
    cached_attention(torch.randn(2, 4, 1, 16), torch.randn(2, 4, 8, 16), torch.randn(2, 4, 8, 16),
                     torch.tensor([3, 4]))
except RuntimeError as exc:
    out.append(str(exc))
print(json.dumps(out))
"""
# a decode step (Q = 1) and a prompt written into the cache (Q = 3), GQA 4/2 and 8/1, rows of
# different fill, one row filled to the last slot and one with a whole empty split after it
CACHED_CASES = [
    (2, 4, 2, 1, 200, 16, [37, 150]),
    (2, 8, 1, 3, 130, 32, [3, 130]),
]


def test_cached_attention_reads_each_rows_keys_only():
    """What a model's static cache needs: each row attends to its own first kv_lens keys (its
    queries the last of those positions), and never reads the empty slots past them (NaN
    there would spread into its output)."""
    proc = _child(CACHED_CHILD, json.dumps(CACHED_CASES))
    assert proc.returncode == 0, proc.stderr[-2000:]
    *found, refused = json.loads(proc.stdout.strip().splitlines()[-1])
    for case, got in zip(CACHED_CASES, found, strict=True):
        assert got["finite"], case
        assert max(got["errs"]) < 1e-5, (case, got)
    assert "kv_lens must be int32 [2]" in refused


def test_the_ragged_decode_bench_checks_every_path_against_each_rows_own_keys(tmp_path):
    """dev/ragged_decode_bench.py, the table of issue 80's per-row lengths, through Triton's
    interpreter: rows of different fill with NaN in their empty slots; the kernel with the
    lengths and SDPA's masked padding both match float64 over each row's own keys, and the
    padded kernel (which reads every slot) is timed but not judged."""
    out = tmp_path / "rows.json"
    proc = _child(
        "import runpy; runpy.run_path('dev/ragged_decode_bench.py', run_name='__main__')",
        "--device", "cpu", "--shapes", "3x4g2x96x16", "--repeats", "1", "--check",
        "--paths", "triton-flash:lens,triton-flash:padded,sdpa:mask", "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["path"]: r for r in json.loads(out.read_text())}
    assert rows["triton-flash:lens"]["lens"][0] == 96 and len(set(rows["sdpa:mask"]["lens"])) > 1
    for answering in ("triton-flash:lens", "sdpa:mask"):
        assert rows[answering]["max_rel_err"] < 1e-5, rows[answering]
    assert "max_rel_err" not in rows["triton-flash:padded"] and rows["triton-flash:padded"]["ms"]


CACHED_OP = r"""
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from compilekit.variants import triton_flash_decode as decode
wrapped = []
real_wrap = torch.library.wrap_triton
torch.library.wrap_triton = lambda kernel: wrapped.append(kernel) or real_wrap(kernel)
# the split plan asks the GPU for its SMs: an H200's, where no GPU is
torch.cuda.get_device_properties = lambda device: type("P", (), {"multi_processor_count": 132})
with FakeTensorMode():
    q = torch.empty(2, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.empty(2, 8, 2048, 128, device="cuda", dtype=torch.bfloat16)
    lens = torch.empty(2, device="cuda", dtype=torch.int32)
    with_lens = decode.decode_op(q, k, k, True, lens)
    without = decode.decode_op(q, k, k, True)
print(tuple(with_lens.shape), tuple(without.shape), len(wrapped))
"""


def test_the_cached_op_torch_compile_traces_takes_the_lengths():
    """Under torch.compile the cache's lengths go through the triton_op (a tensor argument, so
    a CUDA graph reads them on every replay), and both kernels reach Inductor via wrap_triton."""
    proc = _child(CACHED_OP, interpret=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "(2, 32, 1, 128) (2, 32, 1, 128) 4"


COMPILED_CHILD = r"""
import json, torch
from torch._dynamo.utils import counters
from compilekit.variants.masks import reference
from compilekit.variants.triton_flash import flash_attention
compiled = torch.compile(flash_attention, backend="eager")
out = []
for i, (q_len, k_len) in enumerate([(40, 40), (1, 200)]):  # one length; a decode shape
    gen = torch.Generator().manual_seed(300 + i)
    q = torch.randn(1, 4, q_len, 16, generator=gen)
    k, v = (torch.randn(1, 2, k_len, 16, generator=gen) for _ in "kv")
    o = compiled(q, k, v)
    out.append(float((o.double() - reference(q, k, v, causal=True)).abs().max()))
from compilekit.variants import triton_flash_varlen as varlen
from compilekit.variants.varlen import reference as per_document
lengths = [5, 17, 9]  # a ragged batch, packed
q, k, v = (torch.randn(31, 4, 16) for _ in "qkv")
o = torch.compile(varlen.attention, backend="eager")(*varlen.prepare(q, k, v, lengths))
out.append(float((o.double() - per_document(q, k, v, lengths)).abs().max()))
breaks = [reason for reason in counters["graph_break"] if "interpreter" in reason]
print(json.dumps({"errs": out, "breaks": len(breaks), "all": len(counters["graph_break"])}))
"""


def test_torch_compile_on_a_cpu_runs_the_interpreted_kernel_outside_the_graph():
    """Under torch.compile on a CPU the interpreter's launch is left out of Dynamo's trace (it
    cannot trace numpy over host memory): a named graph break, for one length, a decode shape
    and a ragged batch (triton-flash-varlen), and the kernel's answer."""
    proc = _child(COMPILED_CHILD)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert max(got["errs"]) < 1e-5, got
    assert got["breaks"] >= 1 and got["breaks"] == got["all"], got  # only the named one


def test_refuses_what_it_does_not_compute():
    code = r"""
import torch
from compilekit.variants.triton_flash import flash_attention
q = torch.randn(1, 6, 32, 16)
for k, kwargs in [(torch.randn(1, 4, 32, 16), {}), (torch.randn(1, 6, 32, 24), {}),
                  (torch.randn(1, 6, 32, 16), {"causal": False, "window": 4}),
                  (torch.randn(1, 6, 32, 16, device="meta"), {})]:
    try:
        flash_attention(q if k.shape[-1] == 16 else torch.randn(1, 6, 32, 24), k, k, **kwargs)
        print("ran")
    except RuntimeError as exc:
        print("refused:", exc)
"""
    proc = _child(code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert "must divide query heads" in lines[0]
    assert "powers of two" in lines[1]
    assert "causal window" in lines[2]
    assert "on one device; got cpu, meta, meta" in lines[3]


RUN_ON_CPU = [
    "run",
    "--variant",
    "triton-flash",
    "--mode",
    "eager",
    "--device",
    "cpu",
    "--shape",
    "1x2x48x32",
]


def test_cli_runs_it_through_the_interpreter(tmp_path, cli):
    proc = cli(*RUN_ON_CPU, "--out", str(tmp_path), env={"TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cell_dir = tmp_path / "triton-flash__eager__1x2x48x32__float32__cpu"
    result = json.loads((cell_dir / "result.json").read_text())
    assert result["status"] == "ok" and result["max_rel_err"] < 1e-5
    # the config its autotuner ran (the interpreter's one), on the record and in the summary
    (tuned,) = result["triton_autotuned"]
    assert (tuned["kernel"], tuned["module"]) == ("_attn_fwd", "compilekit.variants.triton_flash")
    assert tuned["chosen"][0]["config"].startswith("BLOCK_M: ")
    assert (
        "autotuned _attn_fwd (compilekit.variants.triton_flash) at every key (one config): BLOCK_M"
        in (proc.stdout)
    )


def test_autotuned_lines_name_each_key_an_autotuner_timed():
    from types import SimpleNamespace

    from compilekit.evidence import autotuned

    tuner = SimpleNamespace(cache={(1024, 64, "torch.bfloat16"): "BLOCK_M: 64, BLOCK_N: 64"})
    record = {"kernel": "_attn_fwd", "module": "m", "keys": ["S_BUCKET", "HEAD_DIM"]}
    assert autotuned.lines([record | {"chosen": autotuned._chosen(tuner)}]) == [
        "autotuned _attn_fwd (m) at S_BUCKET=1024, HEAD_DIM=64, torch.bfloat16: "
        "BLOCK_M: 64, BLOCK_N: 64"
    ]


def test_cli_without_gpu_or_interpreter_is_one_line(cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = cli(*RUN_ON_CPU, env={"TRITON_INTERPRET": None})
    assert proc.returncode == 2
    assert "needs a CUDA GPU, or Triton's interpreter" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


LAUNCH_PATHS = r"""
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from compilekit.variants import triton_flash as tf

wrapped = []
real_wrap = torch.library.wrap_triton
torch.library.wrap_triton = lambda kernel: wrapped.append(type(real_wrap(kernel)).__name__) or real_wrap(kernel)

# The eager path as on a GPU (no interpreter): the kernel launched straight, no wrap_triton;
# from a key's second call on, its compiled kernel's runner, with every signature argument.
launched, direct = [], []
class Compiled:  # what Triton's launch returns: a compiled kernel, indexed by its grid
    def run(self, *args):
        raise AssertionError("the runner launches, not run")
    def __getitem__(self, grid):
        return lambda *args: direct.append((grid, len(args), args[-8:]))
class Config:
    kwargs = {"BLOCK_M": 128, "BLOCK_N": 64, "TMA": False}
class Fn:
    arg_names = tf._attn_fwd.fn.arg_names
class Kernel:  # stands in for the autotuned kernel, which needs a GPU to run
    best_config, fn = Config(), Fn()
    def __getitem__(self, grid):
        return lambda *args, **kwargs: launched.append(grid({"BLOCK_M": 128})) or Compiled()
real_kernel, tf._attn_fwd = tf._attn_fwd, Kernel()
checks = []
tf.check_inputs = lambda *args: checks.append(args[-2:])
q = torch.randn(2, 4, 300, 64)
tf.flash_attention(q, q, q)
tf.flash_attention(q, q, q)
tf.flash_attention(q, q, q, causal=False)  # another key: the autotuner again
print("eager", launched, wrapped, checks)
print("direct", direct)
print("tuned", sorted(tf._TUNED.items()))
# Under a profiler the raw launch is named as the op's, so the kernel has a launcher there.
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
    tf.flash_attention(q, q, q, causal=False)
print("profiled", [(e.name, e.input_shapes) for e in prof.events() if e.name.startswith("compilekit")], len(direct))
# The path torch.compile traces: the triton_op, whose kernel goes through wrap_triton.
tf._attn_fwd = real_kernel
with FakeTensorMode():
    q = torch.empty(2, 4, 300, 64, device="cuda", dtype=torch.bfloat16)
    out = tf._flash_op(q, q, q, True, 0)
print("traced", tuple(out.shape), wrapped)
"""


def test_eager_launches_the_kernel_itself_and_the_traced_op_wraps_it():
    """Eager calls skip the custom op and wrap_triton (their host cost exceeded the kernel at
    small shapes), and a key's later calls skip the autotuner too, through the compiled kernel's
    runner; the op torch.compile traces hands its kernel to Inductor via wrap_triton.
    The grid puts heads first and the query blocks second (the LPT order's axis)."""
    proc = _child(LAUNCH_PATHS, interpret=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    eager, direct, tuned, profiled, traced = proc.stdout.strip().splitlines()[-5:]
    # each key's inputs checked once, on its first call: a known key passed the checks before
    assert eager == "eager [(8, 3), (8, 3)] [] [(True, 0), (False, 0)]"
    # 33 arguments: 25 at run time (the L2 group last), then HEAD_DIM, SM_SCALE, CAUSAL,
    # WINDOW, TMA_OK (False: a CPU tensor), BLOCK_M, BLOCK_N, TMA
    assert direct == "direct [((8, 3, 1), 33, (64, 0.125, True, 0, False, 128, 64, False))]"
    # each tuning key's winner, kept for torch.compile's tuning: S bucket, D, causal, window,
    # TMA_OK, dtype
    config = "<__main__.Config object"
    assert (
        tuned.startswith("tuned [((512, 64, False, 0, False, 'torch.float32'), " + config)
        and tuned.count(config) == 2
    ), tuned
    assert "((512, 64, True, 0, False, 'torch.float32'), " in tuned
    # with q, k, v and the output's shapes: the bytes the roofline needs
    assert profiled == f"profiled [('compilekit::flash_attention', {[[2, 4, 300, 64]] * 4})] 2"
    assert traced == "traced (2, 4, 300, 64) ['TraceableTritonKernelWrapper']"


def test_tma_configs_run_only_where_tma_can_read_k_and_v():
    """A TMA config loads K and V through tensor descriptors: unit stride along D and 16-byte
    strides and offsets, on sm90+ (or the interpreter). Elsewhere only the pointer configs are
    tried, and the autotuner keys on the difference (its best config for one is not reused for
    the other)."""
    import torch

    from compilekit.variants import triton_flash as tf

    if tf.triton is None:
        pytest.skip("triton not installed")
    q = torch.randn(1, 2, 64, 16)
    strided = torch.randn(1, 2, 64, 32)[..., ::2]  # stride 2 along D
    shifted = torch.empty(q.numel() + 1)[1:].view(q.shape)  # 4 bytes off 16
    odd_rows = torch.randn(1, 2, 64, 18)[..., :16]  # rows 72 bytes apart
    interpreting = tf.INTERPRET
    try:
        tf.INTERPRET = True
        assert tf.tma_ok(q, q, q)
        for bad in (strided, shifted, odd_rows):
            assert not tf.tma_ok(q, bad, q) and not tf.tma_ok(q, q, bad)
        tf.INTERPRET = False
        assert not tf.tma_ok(q, q, q)  # a CPU tensor without the interpreter: no TMA
    finally:
        tf.INTERPRET = interpreting

    def config(tma, n=64):
        return tf.triton.Config({"BLOCK_M": 128, "BLOCK_N": n, "TMA": tma}, num_warps=8)

    configs = [config(False), config(True), config(False, 32)]
    named = {"Q": q}
    kept = tf._fits(configs, named, HEAD_DIM=16, TMA_OK=False)
    assert [c.kwargs["TMA"] for c in kept] == [False, False]
    assert tf._fits(configs, named, HEAD_DIM=16, TMA_OK=True) == configs
    # nothing fits shared memory: the fallback is still a config that may run
    huge = tf._fits(configs[:2], named, HEAD_DIM=4096, TMA_OK=False)
    assert [c.kwargs["TMA"] for c in huge] == [False]
    assert "TMA_OK" in tf._attn_fwd.keys
    # triton-flash-varlen's autotuner drops its TMA configs the same way
    from compilekit.variants import triton_flash_varlen as fv

    prune = fv._varlen_fwd.early_config_prune
    assert [c.kwargs["TMA"] for c in prune(configs, named, TMA_OK=False)] == [False, False]
    assert prune(configs, named, TMA_OK=True) == configs
    assert "TMA_OK" in fv._varlen_fwd.keys


def test_a_key_tuned_eagerly_gives_torch_compile_its_winner_only(monkeypatch):
    """Once eager autotuning picked a config for a key, the prune torch.compile's tuning runs
    through (and a later eager tuning of the key) gets that config alone: compiled and eager
    run the same kernel. Other keys, and a winner no longer among the configs, are tuned as
    before."""
    import torch

    from compilekit.variants import triton_flash as tf

    if tf.triton is None:
        pytest.skip("triton not installed")
    monkeypatch.setattr(tf, "_TUNED", {})
    configs = [
        tf.triton.Config({"BLOCK_M": 128, "BLOCK_N": n, "TMA": False}, num_warps=8)
        for n in (128, 64, 32)
    ]
    q = torch.empty(1, 2, 1000, 64, dtype=torch.bfloat16)
    named = {"Q": q, "S_BUCKET": 1024}
    consts = {"HEAD_DIM": 64, "SM_SCALE": 0.125, "CAUSAL": True, "WINDOW": 0, "TMA_OK": False}
    assert tf._fits(configs, named, **consts) == configs
    tf._TUNED[tf.tuning_key(named, consts)] = configs[1]
    assert tf._fits(configs, named, **consts) == [configs[1]]
    assert tf._fits(configs, {**named, "S_BUCKET": 2048}, **consts) == configs  # another S
    assert tf._fits(configs, {**named, "Q": q.half()}, **consts) == configs  # another dtype
    assert tf._fits(configs[::2], named, **consts) == configs[::2]  # the winner is gone
    # under torch.compile's dynamic shapes the bucket is a SymInt, which no eager key matches
    assert tf._fits(configs, {**named, "S_BUCKET": _symbolic_size()}, **consts) == configs


def _symbolic_size():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return ShapeEnv().create_unbacked_symint()


def test_the_decode_kernel_gets_the_eager_winner_under_compile_too(monkeypatch):
    """As the prefill kernel: a split-length bucket tuned eagerly gives torch.compile's tuning
    that config alone; other buckets and dtypes, and a symbolic bucket, get every config."""
    import torch

    from compilekit.variants import triton_flash_decode as decode

    if decode.triton is None:
        pytest.skip("triton not installed")
    monkeypatch.setattr(decode, "_TUNED", {})
    configs = [decode.triton.Config({"BLOCK_N": n}, num_warps=4) for n in (128, 64, 32)]
    q = torch.empty(1, 32, 1, 128, dtype=torch.bfloat16)
    named = {"Q": q, "SPLIT_BUCKET": 512}
    consts = {"SM_SCALE": 0.088, "HEAD_DIM": 128, "BLOCK_M": 16, "CAUSAL": True}
    assert decode._known(configs, named, **consts) == configs
    decode._TUNED[decode.tuning_key(named, consts)] = configs[2]
    assert decode._known(configs, named, **consts) == [configs[2]]
    assert decode._known(configs, {**named, "SPLIT_BUCKET": 1024}, **consts) == configs
    assert decode._known(configs, {**named, "Q": q.half()}, **consts) == configs
    assert decode._known(configs, {**named, "SPLIT_BUCKET": _symbolic_size()}, **consts) == configs


def test_launch_key_tells_apart_what_triton_specializes_on():
    """A compiled kernel is reused only for arguments Triton would compile the same way, and
    that passed the same input checks: equal shapes and strides, dtypes, devices, flags and
    pointer alignment."""
    import torch

    from compilekit.variants.triton_flash import launch_key

    def key(q, causal=True, window=0):
        return launch_key(q, q, q, torch.empty_like(q), causal, window)

    q = torch.randn(1, 2, 64, 16)
    assert key(q) == key(torch.randn(1, 2, 64, 16))  # fresh tensors, one key
    shifted = torch.empty(q.numel() + 1)[1:].view(q.shape)  # same strides, 4 bytes off
    assert key(shifted) != key(q)
    assert key(q.transpose(1, 2).contiguous().transpose(1, 2)) != key(q)  # other strides
    assert key(q.half()) != key(q)
    assert key(q, causal=False) != key(q) and key(q, window=8) != key(q)
    # v apart from k: a shorter v with k's strides, or v on another device (the meta device
    # stands in for a second GPU): the first call's checks refuse both, so the key tells them
    out = torch.empty_like(q)
    same = launch_key(q, q, q, out, True, 0)
    assert launch_key(q, q, q[:, :, :-1], out, True, 0) != same
    assert launch_key(q, q, q.to("meta"), out, True, 0) != same
    assert launch_key(q, q.to("meta"), q, out, True, 0) != same


def test_the_fast_path_launches_without_triton_runner_unless_a_hook_is_set(monkeypatch):
    """A known key's launch calls the compiled kernel's launcher straight, on the current raw
    stream, with no launch metadata or hooks (what Triton's runner adds on every call); a
    launch hook set (a profiler) sends it through Triton's runner, so the hook sees it."""
    import torch
    import triton

    from compilekit.variants.launch import direct_launcher

    launched, through_runner = [], []

    class Compiled:  # a CompiledKernel's launch surface
        function, packed_metadata = "cu-function", ("packed",)

        def run(self, *args):
            launched.append(args)

        def __getitem__(self, grid):
            return lambda *args: through_runner.append((grid, args))

    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 3, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 700 + d, raising=False)
    launch = direct_launcher(Compiled(), (4, 5, 1))
    launch("q", "k", 7)
    assert launched == [(4, 5, 1, 703, "cu-function", ("packed",), None, None, None, "q", "k", 7)]
    assert through_runner == []

    def hook(metadata):
        pass

    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        launch("q", "k", 7)
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    assert through_runner == [((4, 5, 1), ("q", "k", 7))] and len(launched) == 1
    # a CompiledKernel without the launcher's pieces: Triton's runner, always
    monkeypatch.setattr(Compiled, "packed_metadata", None)
    direct_launcher(Compiled(), (4, 5, 1))("q")
    assert through_runner[-1] == ((4, 5, 1), ("q",)) and len(launched) == 1


def test_descriptor_launcher_encodes_each_descriptors_addresses_once(monkeypatch):
    """Laid out as Triton 3.6's launcher is (a wrapper over the C launcher that expands each
    host TMA descriptor, encoding its CUtensorMap, every call), a descriptor launcher calls the
    C launcher itself with each descriptor's expansion made on its base address's first call
    and kept; a new address is expanded anew, the other descriptors' kept maps serve on (a new
    output buffer beside known inputs); with a launch hook set, and on a launcher laid out
    otherwise, the descriptors go to Triton's own path, rebased on the new tensors."""
    import sys
    import types

    import torch
    import triton

    from compilekit.variants.launch import descriptor_launcher

    class Tensor:  # what a descriptor's base offers the launcher
        def __init__(self, address):
            self.address = address

        def data_ptr(self):
            return self.address

    encoded, c_calls, triton_path = [], [], []
    driver = types.ModuleType("fake_triton_36_driver")
    driver._BASE_ARGS_FORMAT = "iiiKKppOOOOOO"

    def make_tensordesc_arg(desc, meta):
        encoded.append(desc)
        return [f"map@{desc[1].address}", meta]

    driver.make_tensordesc_arg = make_tensordesc_arg

    def c_launch(*args):
        c_calls.append(args)

    def wrap(launcher):
        def inner(*args):  # Triton's wrapper: expands the descriptors, then the C launcher
            return launcher(*args)

        return inner

    class CudaLauncher:
        __module__ = driver.__name__
        global_scratch_size = profile_scratch_size = 0
        launch_cooperative_grid, launch_pdl = False, True
        launch = staticmethod(wrap(c_launch))

        def __call__(self, *args):
            triton_path.append(args)

    class Compiled:
        function, packed_metadata = "cu-function", ("packed",)
        metadata = types.SimpleNamespace(tensordesc_meta=["meta-q", "meta-k"])
        run = CudaLauncher()

        def __getitem__(self, grid):
            return lambda *args: triton_path.append(args)

    monkeypatch.setitem(sys.modules, driver.__name__, driver)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 3, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 700 + d, raising=False)
    launch = descriptor_launcher(Compiled(), (4, 5, 1), ("tq", "tk"), lambda t, b: (t, b))
    q, k = Tensor(16), Tensor(32)
    head = (4, 5, 1, 703, "cu-function", False, True, None, None, ("packed",), None, None, None)
    launch((q, k), "out", 7)
    assert c_calls == [(*head, "map@16", "meta-q", "map@32", "meta-k", "out", 7)]
    launch((Tensor(16), Tensor(32)), "out2", 7)  # the same addresses: the kept maps
    assert len(encoded) == 2 and c_calls[-1][-6:] == ("map@16", "meta-q", "map@32", "meta-k",
                                                      "out2", 7)  # fmt: skip
    launch((Tensor(48), k), "out3", 7)  # q elsewhere: its map encoded, k's kept
    assert len(encoded) == 3 and c_calls[-1][-6:] == ("map@48", "meta-q", "map@32", "meta-k",
                                                      "out3", 7)  # fmt: skip
    launch((q, Tensor(32)), "out4", 7)  # both addresses seen before, in another pairing
    assert len(encoded) == 3 and c_calls[-1][-6:-4] == ("map@16", "meta-q")
    assert triton_path == []

    def hook(metadata):
        pass

    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        launch((q, k), "out", 7)
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    assert triton_path == [(("tq", q), ("tk", k), "out", 7)] and len(c_calls) == 4
    # a launcher laid out otherwise: Triton's own path, on descriptors rebased every call
    monkeypatch.setattr(driver, "_BASE_ARGS_FORMAT", "a later layout")
    other = descriptor_launcher(Compiled(), (4, 5, 1), ("tq", "tk"), lambda t, b: (t, b))
    other((q, k), "out", 7)
    assert len(triton_path) == 2 and triton_path[-1][-4:] == (("tq", q), ("tk", k), "out", 7)
    assert len(c_calls) == 4 and not hasattr(other, "kept")


def test_tiles_run_in_groups_of_heads_whose_k_and_v_fit_in_l2():
    """32 MiB of K and V a group: 2 x 4096 x 128 x 2 bytes = 2 MiB a K/V head, 16 heads; at
    3072 keys 1.5 MiB, 21 heads, rounded down to 16; GQA: each K/V head's query heads too; and
    never more than 32 rows a group, however short the heads."""
    from compilekit.variants.launch import l2_group_heads

    assert l2_group_heads(4096, 128, 2, 1) == 16
    assert l2_group_heads(8192, 128, 2, 1) == 8
    assert l2_group_heads(3072, 128, 2, 1) == 16
    assert l2_group_heads(2048, 128, 2, 1) == 32  # 1 MiB a head: the budget and the cap agree
    assert l2_group_heads(8192, 128, 2, 4) == 32  # 8 K/V heads of 4 query heads each
    assert l2_group_heads(4096, 128, 2, 4) == 32  # the budget's 16 K/V heads, capped at 8
    assert l2_group_heads(1024, 64, 2, 1) == 32  # 256 KiB a head: the budget's 128, capped
    assert l2_group_heads(512, 64, 2, 8) == 32
    assert l2_group_heads(512, 64, 2, 64) == 64  # one K/V head's query heads: never split
    assert l2_group_heads(1 << 20, 128, 4, 1) == 1  # one head's K and V outgrow the budget


def test_the_tile_order_takes_a_groups_query_blocks_heaviest_first_before_the_next_group():
    """Three rows of B x H in groups of two, two query blocks each, causal: the first group's
    last query blocks (most keys), then its first ones, then the short group's."""
    from compilekit.variants.launch import tile_of

    order = [tile_of(t, bh=3, n_m=2, l2_heads=2, causal=True) for t in range(6)]
    assert order == [(0, 1), (1, 1), (0, 0), (1, 0), (2, 1), (2, 0)]
    assert [tile_of(t, 3, 2, 2, causal=False)[1] for t in range(6)] == [0, 0, 1, 1, 0, 1]


@pytest.mark.parametrize("shape", [(2 * 32, 4096), (32, 8192), (3 * 24, 3072), (1, 1000)])
def test_a_persistent_grid_gets_every_tile_once_and_balanced_work(shape):
    """The host's schedule for a persistent grid of 132 programs, 128 x 128 tiles, causal: each
    tile once, each program's tiles in the kernels' order, and the most loaded program within
    3% of the average (cost: a tile's key blocks plus one), where dealing them round-robin
    leaves it 12-21% over at these shapes."""
    from compilekit.variants.launch import l2_group_heads, persistent_schedule, tile_of

    bh, seq = shape
    n_m, l2 = -(-seq // 128), l2_group_heads(seq, 128, 2, 1)
    programs = min(132, bh * n_m)
    tiles, starts = persistent_schedule(bh, seq, 128, 128, l2, True, programs)
    assert sorted(tiles) == list(range(bh * n_m))
    assert len(starts) == programs + 1 and starts[0] == 0 and starts[-1] == len(tiles)

    def work(tile):
        block = tile_of(tile, bh, n_m, l2, True)[1]
        return -(-min((block + 1) * 128, seq) // 128) + 1

    dealt = [tiles[starts[p] : starts[p + 1]] for p in range(programs)]
    assert all(d == sorted(d) and d for d in dealt)
    loads = [sum(map(work, d)) for d in dealt]
    if programs == bh * n_m:  # fewer tiles than SMs: one each, nothing to balance
        assert all(len(d) == 1 for d in dealt)
        return
    average = sum(loads) / programs
    assert max(loads) <= 1.03 * average, max(loads) / average
    round_robin = [sum(map(work, range(p, bh * n_m, programs))) for p in range(programs)]
    assert max(round_robin) > 1.1 * average
