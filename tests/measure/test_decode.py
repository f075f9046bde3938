"""Decode cells (BxP+N): the shape, the arithmetic of bytes and rates, and a tiny Llama decoded
by both paths through the cell pipeline on CPU, token for token against eager."""

import os

import pytest

from compilekit.measure.decode import figures
from compilekit.model.errors import Unsupported, UserError
from compilekit.model.spec import Decode, parse_shape
from tests.report.test_null_figures import _cli

TINY = os.path.join(os.path.dirname(__file__), "..", "variants", "tiny_models.py")


def test_the_decode_shape_and_its_label():
    assert parse_shape("1x32+200") == Decode(1, 32, 200)
    assert parse_shape("8x512+128@2048") == Decode(8, 512, 128, 2048)
    assert str(Decode(1, 32, 200)) == "1x32+200" and Decode(1, 32, 200).cache_len == 232
    assert str(Decode(8, 512, 128, 2048)) == "8x512+128@2048"
    assert Decode(8, 512, 128, 2048).cache_len == 2048


@pytest.mark.parametrize(
    "text, needle",
    [
        ("1x32+0", "malformed decode shape '1x32+0': write BxP+N with positive integers"),
        ("1x32+200x4", "malformed decode shape"),
        ("1x32+200@100", "a KV cache of 100 positions cannot hold 32 prompt + 200 new tokens"),
        ("1x32+2000000", "too large"),
    ],
)
def test_bad_decode_shapes_are_one_line_exit_2(text, needle, tmp_path):
    with pytest.raises(UserError, match=needle.replace("+", r"\+")):
        parse_shape(text)
    code, err = _cli("run", "--variant", "llama2-7b", "--shape", text, "--out", str(tmp_path))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_model_that_cannot_decode_is_one_line_exit_2(tmp_path):
    """BERT attends both ways and has no generate(): the cell refuses, naming the fix."""
    pytest.importorskip("transformers")
    code, err = _cli(
        "run", "--variant", f"{TINY}:bert", "--mode", "eager", "--shape", "1x8+4",
        "--device", "cpu", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and "is not a causal LM" in err and "BxS shape" in err, err
    assert len(err.strip().splitlines()) == 1


def test_bytes_per_token_and_the_rate_against_the_copy_ceiling_by_hand():
    # 10 GB of weights, 1 MB of keys and values per cached position; a 100-token prompt and
    # 11 new tokens: the 10 steps after the first token attend to 101 .. 110 positions,
    # 105.5 on average
    per_token = figures.bytes_per_token(10e9, 1e6, prompt=100, new=11)
    assert per_token == pytest.approx(10e9 + 105.5e6)
    # 5 ms per token: 2,021.1 GB/s; against a 4,000 GB/s ceiling 50.5%, whose own limit is
    # 2.52638 ms per token (395.8 tokens/s)
    rate = figures.rate(per_token, 5.0, 4000.0)
    assert rate["gbps"] == pytest.approx(2021.1)
    assert rate["share_of_copy"] == pytest.approx(0.505275)
    assert rate["limit_ms"] == pytest.approx(2.526375)
    assert rate["limit_tokens_per_s"] == pytest.approx(395.824, rel=1e-5)
    assert figures.rate(per_token, 5.0, None)["share_of_copy"] is None
    # 30 s of compile, 25 ms eager against 5 ms compiled per token: 1,500 tokens
    assert figures.break_even_tokens(30.0, 25.0, 5.0) == pytest.approx(1500)
    assert figures.break_even_tokens(30.0, 5.0, 5.0) is None


def test_the_gap_to_the_limit_by_hand():
    """5 ms per token against 10 GB of weights and 0.1 GB of cache at 4,000 GB/s (2.525 ms):
    the matmuls take 4 ms where the weights need 2.5 at the copy speed (62.5% of it),
    attention 0.3 where its bytes need 0.025, and 0.488 ms no kernel runs."""
    kernels = [
        ("nvjet_sm90_tst_64x8_splitK_TNT", 3.0),
        ("void cublasLt::splitKreduce_kernel", 1.0),
        ("cudnn_generated_fort_native_sdpa_sm80_flash_fprop", 0.3),
        ("triton_red_fused_argmax_13", 0.01),
        ("void at::native::multi_tensor_apply_kernel", 0.002),
        ("triton_red_fused_mean_mul_pow_rsqrt_0", 0.2),
    ]
    gap = figures.gap(5.0, kernels, 10e9, 0.1e9, 4000.0)
    assert gap["limit_ms"] == pytest.approx(2.525)
    assert gap["matmuls_beyond_copy_ms"] == pytest.approx(1.5)
    assert gap["matmuls_share_of_copy"] == pytest.approx(0.625)
    assert gap["attention_beyond_copy_ms"] == pytest.approx(0.275)
    assert gap["sampling_ms"] == 0.01 and gap["graph_copies_ms"] == 0.002
    assert gap["other_kernels_ms"] == 0.2 and gap["idle_gpu_ms"] == pytest.approx(0.488)
    parts = [v for k, v in gap.items() if k.endswith("_ms") and k not in ("token_ms", "limit_ms")]
    assert sum(parts) == pytest.approx(5.0 - 2.525)
    # a CPU's matmuls are aten ops, Inductor's own are templates; a fused add is neither
    for name in ("aten::addmm", "aten::mm", "triton_tem_fused_mm_0"):
        assert figures.kernel_class(name) == "matmuls", name
    assert figures.kernel_class("triton_poi_fused_add_mul_0") == "other_kernels"


def test_the_gap_line_names_the_parts_largest_first_and_leaves_out_those_no_kernel_made():
    """A CPU's loop or a GPU's without CUDA graphs copies no graph inputs: that part is not
    printed as 0.000."""
    from compilekit.report.decodeview import gap_line

    gap = figures.gap(5.0, [("aten::mm", 3.0), ("triton_red_fused_argmax_13", 0.01)], 10e9,
                      0.1e9, 4000.0)  # fmt: skip
    line = gap_line(gap)
    assert line.startswith("gap         5.000 ms per token against a limit of 2.525 ms: ")
    assert line.index("device idle") < line.index("matmuls") < line.index("sampling 0.010")
    assert "CUDA-graph input copies" not in line and "other kernels" not in line
    assert "CUDA-graph input copies 0.002" in gap_line(
        figures.gap(5.0, [("multi_tensor_apply_kernel", 0.002)], 10e9, 0.1e9, 4000.0)
    )


def _step_map(tmp_path, **top):
    """A decode step's kernels.json: 32 calls of a 0.1 ms matmul reduction and 16 of a
    0.01 ms add (3.36 ms per step), with `top`'s fields beside them."""
    from compilekit.model.store import write_json

    kernels = [
        {"name": "triton_red_fused_mm_t_view_6", "device_ms": 0.1, "calls_per_forward": 32},
        {"name": "triton_poi_fused_add_1", "device_ms": 0.01, "calls_per_forward": 16},
    ]
    write_json(str(tmp_path / "kernels.json"), {"kernels": kernels, **top})


def test_the_cells_gap_counts_every_call_of_a_kernel(tmp_path):
    """A kernel map's row is one kernel's time per call and its calls per step (32 layers
    share one fused matmul kernel): 32 x 0.1 ms of matmuls is 3.2 ms, not 0.1."""
    from compilekit.launch.decodephase import _step_gap

    _step_map(tmp_path)
    gap = _step_gap(str(tmp_path), 4.0, 10e9, 10e9, 4000.0)
    assert gap["matmuls_beyond_copy_ms"] == pytest.approx(3.2 - 2.5)
    assert gap["other_kernels_ms"] == pytest.approx(0.16)
    assert gap["idle_gpu_ms"] == pytest.approx(4.0 - 3.36)


def test_the_gap_reads_a_kernels_ops_and_lines_not_its_name_alone(tmp_path):
    """Inductor names a kernel after every node fused into it: a norm's variance over the o
    projection's output carries `mm` (it reads no weight: mean and pow, no matmul's sum), the
    o projection's reduction carries the attention call's line (it reads the attention's
    output: still a matmul), and a plugged-in attention's own kernel has no telling name
    (it runs inside the model's attention call)."""
    from compilekit.launch.decodephase import _step_gap
    from compilekit.model.store import write_json

    call = {"file": "modeling_llama.py", "line": 258,
            "code": "attn_output, attn_weights = attention_interface("}  # fmt: skip
    o_proj = {"file": "modeling_llama.py", "line": 270, "code": "self.o_proj(attn_output)"}
    kernels = [
        {"name": "triton_red_fused__to_copy__unsafe_view_add_mean_mm_pow_13", "device_ms": 0.002,
         "calls_per_forward": 32, "aten_ops": ["aten.mean", "aten.pow", "aten.add"],
         "source_lines": [o_proj]},
        {"name": "triton_red_fused_mm_t_transpose_view_4", "device_ms": 0.01,
         "calls_per_forward": 32, "aten_ops": ["aten.sum", "aten.mul", "aten.unsqueeze"],
         "source_lines": [o_proj, call]},
        {"name": "_split_kernel", "device_ms": 0.003, "calls_per_forward": 32,
         "aten_ops": ["aten.add"], "source_lines": [{"file": "triton_flash.py", "line": 606,
                                                     "code": "return launch(q, k, v)"}, call]},
    ]  # fmt: skip
    write_json(str(tmp_path / "kernels.json"), {"kernels": kernels})
    gap = _step_gap(str(tmp_path), 1.0, 1e9, 1e9 + 0.1e9, 1000.0)  # 1 ms of weights, 0.1 of cache
    assert gap["matmuls_beyond_copy_ms"] == pytest.approx(0.32 - 1.0)
    assert gap["other_kernels_ms"] == pytest.approx(0.064)
    assert gap["attention_beyond_copy_ms"] == pytest.approx(0.096 - 0.1)
    # a bare name still goes by the name
    assert figures.kernel_class("triton_red_fused__to_copy_add_mean_mm_pow_13") == "matmuls"


def test_kernels_that_ran_at_once_count_once_in_the_gap_and_the_busy_share(tmp_path):
    """Under programmatic dependent launch a kernel starts while the one before it finishes:
    both kernels' times hold that overlap. The gap takes it back once, as its own negative
    part, so the parts still add up and the idle GPU is the time no kernel ran; the busy
    share is the time any kernel ran, not the summed durations (3.36 ms summed in a 3.2 ms
    token would read busy, capped at 100%, where 0.4 ms of it the GPU idled)."""
    from compilekit.evidence.diagnose import judge_host_bound
    from compilekit.launch.decodephase import _step_gap
    from compilekit.model.result import CellResult
    from compilekit.report.decodeview import gap_line

    _step_map(tmp_path, forward_overlap_ms=0.56)
    gap = _step_gap(str(tmp_path), 3.2, 2e9, 2e9, 4000.0)
    assert gap["idle_gpu_ms"] == pytest.approx(3.2 - (3.36 - 0.56))
    assert gap["overlapped_ms"] == pytest.approx(-0.56)
    parts = [v for k, v in gap.items() if k.endswith("_ms") and k not in ("token_ms", "limit_ms")]
    assert sum(parts) == pytest.approx(3.2 - 0.5)
    assert "kernels at once (counted twice above) -0.560" in gap_line(gap)

    result = CellResult(variant="llama2-7b", mode="reduce-overhead", shape="1x32+200",
                        dtype="bfloat16", device="cuda")  # fmt: skip
    result.compiled_loop_ms, result.profiled_forward_device_ms = 3.2, 3.36
    result.profiled_forward_overlap_ms = 0.56
    judge_host_bound(result)
    assert result.gpu_busy_share == pytest.approx(2.8 / 3.2)


@pytest.mark.parametrize(
    "options, mode",
    [
        ({}, None),
        ({"mode": "reduce-overhead"}, "reduce-overhead"),
        ({"options": {"freezing": True}}, None),
    ],
)
def test_generate_compiles_with_the_cells_own_mode(options, mode):
    """transformers' CompileConfig defaults to reduce-overhead: default mode, and a config's
    options (torch.compile refuses a mode beside them), must say mode=None."""
    pytest.importorskip("transformers")
    from compilekit.measure.decode.generate import compile_config

    config = compile_config(options, "cpu")
    assert config.mode == mode
    assert config.options == options.get("options")
    assert compile_config(None, "cpu") is None


def test_per_token_summary_uses_the_nearest_rank_p90():
    stats = figures.summary([float(ms) for ms in range(1, 11)])  # 1 .. 10 ms
    assert stats["median_ms"] == 5.5 and stats["p90_ms"] == 9.0 and stats["mean_ms"] == 5.5
    assert stats["tokens_per_s"] == pytest.approx(1000 / 5.5)


def test_weights_read_per_token_count_only_the_batchs_embedding_rows():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import LlamaConfig, LlamaForCausalLM

    dims = dict(hidden_size=8, intermediate_size=16, num_attention_heads=2,
                num_key_value_heads=1, num_hidden_layers=1, vocab_size=100)  # fmt: skip
    untied = LlamaForCausalLM(LlamaConfig(**dims)).to(torch.bfloat16)
    total = sum(p.numel() for p in untied.parameters()) * 2
    # the 100 x 8 input table is read for 3 rows only
    assert figures.weight_bytes(untied, batch=3) == total - 100 * 8 * 2 + 3 * 8 * 2
    tied = LlamaForCausalLM(LlamaConfig(**dims, tie_word_embeddings=True)).to(torch.bfloat16)
    # shared with the output layer, the table is read whole, and counted once
    assert figures.weight_bytes(tied, batch=3) == sum(p.numel() for p in tied.parameters()) * 2


@pytest.fixture(scope="module")
def decoded(tmp_path_factory, cache_root):
    """A tiny Llama (1 layer, GQA 4/2) decoding 12 tokens after an 8-token prompt, batch 2,
    under default: both paths, eager and compiled."""
    pytest.importorskip("transformers")
    from compilekit.usercell import make_cell, run_cell

    cell = make_cell(f"{TINY}:llama_lm", "default", "2x8+12", "float32", "cpu")
    out = str(tmp_path_factory.mktemp("decode"))
    return run_cell(cell, out, cache_root=cache_root, timeout_s=900)


def test_both_decode_paths_give_eagers_tokens_and_the_figures_add_up(decoded):
    assert decoded.status == "ok", decoded.reason
    assert decoded.max_rel_err < decoded.error_bound
    assert "against the same model in float64" in decoded.reference
    paths = decoded.decode["paths"]
    for path in ("loop", "generate"):
        for kind in ("eager", "compiled"):
            figs = paths[path][kind]
            assert figs["tokens"] == {"same_tokens": 12, "of": 12, "first_difference": None}
            assert figs["median_ms"] > 0 and figs["ttft_ms"] > 0
            # the rate is the cell's own bytes over its own time
            assert figs["gbps"] == pytest.approx(
                decoded.decode["bytes_per_token"] / figs["median_ms"] / 1e6
            )
        # eager beside a compiled cell is timed for one generation, the cell's own kind for
        # three; each gives 11 token times (the 12 tokens after the first)
        assert (paths[path]["eager"]["tokens_timed"], figs["tokens_timed"]) == (11, 33)
    # the cell's latency is the loop's time per token
    assert decoded.compiled_ms == paths["loop"]["compiled"]["median_ms"]
    assert decoded.eager_ms == paths["loop"]["eager"]["median_ms"]
    # 1 layer x (keys + values) x batch 2 x 2 KV heads x head dim 16 x 4 bytes
    assert decoded.decode["kv_bytes_per_position"] == 1 * 2 * 2 * 2 * 16 * 4
    assert decoded.decode["cache_len"] == 20
    assert decoded.decode["generate_graphs"] >= 1  # generate() really compiled, on a CPU too


def test_the_decode_summary_names_each_path_and_its_limit(decoded):
    from compilekit.report import cellview

    summary = cellview.cell_summary(decoded)
    assert "2 x 8-token prompt + 12 new tokens, KV cache of 20 positions" in summary
    rows = [line.split()[:2] for line in summary.splitlines()]
    for row in (["loop", "eager"], ["loop", "compiled"], ["generate", "compiled"]):
        assert row in rows, summary
    assert "12/12" in summary and "pays off after" in summary
    # the loop's own time per token, split against its limit (on a CPU too)
    gap = decoded.decode["gap"]
    assert gap["token_ms"] == decoded.compiled_ms
    parts = [v for k, v in gap.items() if k.endswith("_ms") and k not in ("token_ms", "limit_ms")]
    assert sum(parts) == pytest.approx(gap["token_ms"] - gap["limit_ms"])
    assert "against a limit of" in summary


def test_a_sweeps_report_and_page_give_each_decode_path_its_tokens_per_second(decoded, tmp_path):
    """REPORT.md and the sweep page of a folder holding the decode cell: one row per path and
    kind, with the figures the cell recorded, and the cell's limit and gap under the table."""
    import shutil

    from compilekit.report import sweepreport

    shutil.copytree(decoded.run_dir, tmp_path / os.path.basename(decoded.run_dir))
    sweepreport.report(str(tmp_path))
    md = (tmp_path / "REPORT.md").read_text()
    assert "## Decode" in md
    section = md.split("## Decode: tokens per second against the copy ceiling")[1]
    section = section.split("\n## ")[0]
    rows = [r.split(" | ")[1:4] for r in section.splitlines() if r.startswith("| `tiny")]
    paths = decoded.decode["paths"]
    assert [r[:2] for r in rows] == [
        ["loop", "eager"], ["loop", "compiled"], ["generate", "eager"], ["generate", "compiled"]
    ]  # fmt: skip
    for path, kind, rate in rows:
        assert rate == f"{paths[path][kind]['tokens_per_s']:,.1f}"
    assert "KV cache of 20 positions" in section and "against a limit of" in section
    # the sweep page: the same rows, each cell linked to its run page
    from compilekit.report import sweeppage

    page = open(sweeppage.sweep_page(str(tmp_path), run_pages=False)).read()
    page = page.split('id="decode"')[1].split("<h2")[0]
    assert page.count("<td>loop</td>") == 2 and page.count("<td>generate</td>") == 2
    assert f"<td>{paths['loop']['compiled']['tokens_per_s']:,.1f}</td>" in page


def test_a_first_difference_says_where_and_how_close_eagers_logits_were():
    """A run whose token 3 differs from eager's: reported at 3, with eager's margin there
    between its own token and the other (never negative: eager chose its own)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from compilekit.launch.decodephase import _agreement
    from compilekit.measure import workload
    from compilekit.measure.decode.loop import run_loop
    from compilekit.measure.decode.session import Session
    from tests.variants import tiny_models

    shape = parse_shape("1x4+6")
    made = workload.build(tiny_models.llama_lm, "tiny", shape, "float32", "cpu", 0)
    session = Session(made, shape, "tiny")
    eager = run_loop(session, session.prefill, session.step).tokens
    other = eager.clone()
    other[0, 3] = (eager[0, 3] + 1) % 256
    fns = {"eager": (session.prefill, session.step, None)}
    found = _agreement(other, eager, session, fns, ("generate", "compiled"))
    assert found["first_difference"] == 3 and found["same_tokens"] == 5
    logits = run_loop(session, session.prefill, session.step, forced=eager, keep=[3]).logits[0]
    expected = logits[0, eager[0, 3]] - logits[0, other[0, 3]]
    assert found["eager_margin"] == pytest.approx(float(expected)) and expected >= 0
    assert torch.equal(run_loop(session, session.prefill, session.step).tokens, eager)


def test_forced_runs_stop_at_their_last_kept_token_and_the_warm_up_is_short():
    """A teacher-forced run steps only as far as its last kept logits, which are those of a
    whole run; a timed path's untimed generation is WARM_TOKENS long, its timed ones whole."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from compilekit.launch import decodephase
    from compilekit.measure import workload
    from compilekit.measure.decode.loop import run_loop
    from compilekit.measure.decode.session import Session
    from tests.variants import tiny_models

    shape = parse_shape("1x4+6")
    made = workload.build(tiny_models.llama_lm, "tiny", shape, "float32", "cpu", 0)
    session = Session(made, shape, "tiny")
    steps = []

    def step(ids, position):
        steps.append(int(position))
        return session.step(ids, position)

    whole = run_loop(session, session.prefill, session.step, keep=[3])
    forced = run_loop(session, session.prefill, step, forced=whole.tokens, keep=[3])
    assert steps == [4, 5, 6]  # the steps that give tokens 1, 2 and 3
    assert torch.equal(forced.logits[0], whole.logits[0])
    steps.clear()
    fns = {"eager": (session.prefill, step, None)}
    timed = decodephase._timed(("loop", "eager"), session, fns, 2)
    warm = decodephase.WARM_TOKENS - 1
    assert len(steps) == warm + 2 * (shape.new - 1) and warm < shape.new - 1
    assert [run.tokens.shape[1] for run in timed["runs"]] == [shape.new, shape.new]


def test_a_failed_path_says_failed_in_its_row_and_why_under_the_table():
    from compilekit.report.decodeview import failure_lines, rows

    why = "generate compiled failed: RuntimeError: " + "index out of bounds " * 20
    decode = {"paths": {"generate": {"compiled": {"error": why}}}}
    (row,) = rows(decode)
    assert row[:3] == ["generate", "compiled", "failed"] and set(row[3:]) == {"-"}
    assert failure_lines(decode) == [f"error       {why[:300]}"]


def test_an_eager_baseline_far_from_the_eager_cells_own_is_said():
    """A compiled cell's eager loop, timed beside it, 1.87x the same shape's eager cell: both
    figures are said under the table; 1.02x apart, or with no eager cell of that shape,
    nothing is."""
    from types import SimpleNamespace

    from compilekit.report.decodeview import beside_note

    def cell(mode, eager_ms, shape="1x32+200@8192", alloc=""):
        loop = {"eager": {"median_ms": eager_ms}}
        return SimpleNamespace(
            mode=mode, variant="llama2-7b", shape=shape, dtype="bfloat16", device="cuda",
            alloc=alloc, grad="off", weights="auto", measured=True,
            decode={"paths": {"loop": loop}},
        )  # fmt: skip

    eager, other = cell("eager", 24.055), cell("eager", 10.0, shape="1x32+200@2048")
    off, close = cell("reduce-overhead", 44.881), cell("default", 24.641)
    results = [other, eager, off, close]
    note = beside_note(off, results)
    assert "44.881" in note and "24.055" in note and "(1.87x)" in note
    assert beside_note(close, results) is None and beside_note(eager, results) is None
    assert beside_note(off, [other, off]) is None
    # the other allocator's eager cell is another workload's baseline
    expandable = "expandable_segments:True"
    beside = [
        eager,
        cell("eager", 44.0, alloc=expandable),
        cell("default", 45.0, alloc=expandable),
    ]
    assert beside_note(beside[2], beside) is None


def test_the_float_reference_cache_holds_only_the_checked_positions():
    """The reference's cache is as long as its steps write (a float32 cache of a 7B model's
    whole capacity would not fit beside the bf16 ones), and its logits are those of a
    reference over the shape's whole cache."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from compilekit.measure import workload
    from compilekit.measure.decode.loop import run_loop
    from compilekit.measure.decode.session import Session
    from tests.variants import tiny_models

    shape = parse_shape("1x4+6@16")
    capacities = []

    def reference(positions):
        made = workload.build(tiny_models.llama_lm, "tiny", shape, "float32", "cpu", 0)
        session = Session(made, shape, "tiny")
        tokens = run_loop(session, session.prefill, session.step).tokens
        session.retyped(torch.float64, positions)
        capacities.append(session.cache.layers[0].keys.shape[-2])
        run = run_loop(session, session.prefill, session.step, forced=tokens, keep=range(3))
        return run.logits

    whole, short = reference(None), reference(shape.prompt + 3)
    assert capacities == [16, 7]
    assert all(torch.allclose(a, b, rtol=1e-12, atol=1e-12) for a, b in zip(whole, short))


def test_a_plugged_in_attentions_decode_is_checked_against_the_models_own_sdpa(
    tmp_path, cache_root, monkeypatch
):
    """A tiny Llama with triton-flash plugged in, decoding eagerly through Triton's interpreter:
    its float reference is the same model with SDPA, not the kernel under test in float64."""
    pytest.importorskip("transformers")
    pytest.importorskip("triton", reason="triton not installed (pip install triton numpy)")
    from compilekit.usercell import make_cell, run_cell

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the cell's processes choose it at import
    cell = make_cell(f"{TINY}:llama_lm_triton_flash", "eager", "1x6+4", "float32", "cpu")
    result = run_cell(cell, str(tmp_path), cache_root=cache_root, timeout_s=900)
    assert result.status == "ok", result.reason
    assert result.reference.endswith(
        "against the same model in float64 with {'_attn_implementation': 'sdpa'}"
    ), result.reference


def _sliding_session(tmp_path, window: int, shape: str):
    """A tiny Mistral (a sliding window of `window` positions in every layer) saved as a
    checkpoint, its decode session on CPU in float32."""
    pytest.importorskip("transformers")
    import torch
    import transformers as tf

    from compilekit.compile.variant import load_variant
    from compilekit.measure import workload
    from compilekit.measure.decode.session import Session

    config = tf.MistralConfig(vocab_size=100, hidden_size=32, intermediate_size=64,
                              num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                              max_position_embeddings=64, sliding_window=window)  # fmt: skip
    torch.manual_seed(0)
    tf.MistralForCausalLM(config).save_pretrained(tmp_path / "mistral")
    spec = f"hf:{tmp_path / 'mistral'}"
    made = workload.build(
        load_variant(spec).factory, spec, parse_shape(shape), "float32", "cpu", 0
    )
    return Session(made, parse_shape(shape), spec)


def test_a_sliding_window_models_decode_gives_its_own_logits(tmp_path):
    """Mistral's sliding-window cache counts the tokens it took on the host; the loop sets its
    position on the device and calls a step more than once at one position (the session's own
    prefill, then the run's). Each token's logits are the model's forward over the whole
    sequence, as if no cache were there."""
    import torch

    from compilekit.measure.decode.loop import run_loop

    session = _sliding_session(tmp_path, window=32, shape="1x6+8")
    run_loop(session, session.prefill, session.step)  # a warm-up run, as the timed paths have
    run = run_loop(session, session.prefill, session.step, keep=range(8))
    sequence = torch.cat([session.prompt, run.tokens[:, :-1]], dim=1)
    with torch.no_grad():
        whole = session.model(input_ids=sequence).logits[0, 5:]
    assert all(torch.allclose(mine[0], ref, atol=1e-5) for mine, ref in zip(run.logits, whole))


def test_a_decode_past_the_models_sliding_window_is_one_line(tmp_path):
    words = r"attention window \(8 positions\) is shorter than this decode's 14 "
    with pytest.raises(Unsupported, match=words):  # a sweep's cell: unsupported, not failed
        _sliding_session(tmp_path, window=8, shape="1x6+8")


@pytest.mark.parametrize("layered", [True, False], ids=["transformers 5", "transformers 4"])
def test_the_shortest_window_is_read_from_the_config(layered, monkeypatch):
    """Where transformers lists its layers' kinds (5.x), and from the config's own fields where
    it does not (4.x): Mistral's window, Qwen2's only where it is on, none for Llama."""
    tf = pytest.importorskip("transformers")
    from transformers import cache_utils

    from compilekit.measure.decode.session import _shortest_window

    if not layered:
        monkeypatch.delattr(cache_utils, "get_layer_types_and_kwargs", raising=False)
    tiny = dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=1)
    assert _shortest_window(tf.MistralConfig(sliding_window=8, **tiny)) == 8
    assert _shortest_window(tf.MistralConfig(sliding_window=None, **tiny)) is None
    assert _shortest_window(tf.LlamaConfig(**tiny)) is None
    assert _shortest_window(tf.Qwen2Config(use_sliding_window=False, **tiny)) is None


def test_generates_cache_takes_the_cells_capacity_or_says_which_transformers_cannot(monkeypatch):
    """transformers 5 sizes generate()'s static cache by max_cache_len; 4.x by the tokens it
    generates, so there a cell's larger capacity is a failed path with its reason."""
    transformers = pytest.importorskip("transformers")
    from compilekit.measure.decode.generate import _cache_capacity

    if hasattr(transformers.GenerationConfig(), "max_cache_len"):
        assert _cache_capacity(parse_shape("1x4+4@16")) == {"max_cache_len": 16}
    monkeypatch.setattr(transformers, "GenerationConfig", lambda: object())  # as in 4.x
    assert _cache_capacity(parse_shape("1x4+4")) == {}
    with pytest.raises(RuntimeError, match="a cache of 16 positions needs transformers 5"):
        _cache_capacity(parse_shape("1x4+4@16"))
