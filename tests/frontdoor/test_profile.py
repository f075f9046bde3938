"""`with compilekit.profile() as p:` around a user's code as written: the op cost matrix by
time and memory, and the kernels, for eager and for already-compiled code."""

import json
import os
import re

import pytest
import torch

import compilekit


def test_an_eager_block_shows_what_each_op_allocated_per_pass(tmp_path):
    def forward(x):
        scratch = torch.full((1 << 20,), 2.0)  # 4 MiB of float32 per pass
        return x * scratch[: x.numel()].view_as(x)

    x = torch.ones(4, 4)
    with compilekit.profile(str(tmp_path), device="cpu", forwards=3) as p:
        for _ in range(3):
            forward(x)
    by_name = {r["name"]: r for r in p.ops}
    assert abs(by_name["aten::empty"]["allocated_mb"] - 4.0) < 0.01
    assert by_name["aten::mul"]["calls_per_forward"] == 1
    assert "compilekit.profile" not in by_name  # the range around the block is not an op
    assert (
        "peak, reserved memory and fragmentation are the CUDA caching allocator's"
        in (p.memory["note"])
        and p.peak_memory_mb is None
    )  # the CPU has no caching allocator to ask
    by_memory = p.table(by="memory")
    assert "measured on CUDA only" in by_memory and p.memory["note"] not in by_memory  # once
    table = p.table(by="memory").splitlines()
    assert table[2].startswith("aten::empty") or table[2].startswith("aten::full")
    # the CPU has no device time: one time column, not the CPU time twice beside dashes
    assert table[0].split("  ")[0] == "op" and table[0].count("ms") == 1
    assert table[0].split().count("self") == 1 and "device" not in table[0]
    # printed, the profile is one line of sizes and figures, not its thousands of rows
    shown = repr(p)
    assert "\n" not in shown and len(shown) < 300 and f"ops=[{len(p.ops)} rows]" in shown
    with open(tmp_path / "ops.json") as f:
        assert json.load(f) == p.ops
    # the page: the ops by memory, the largest allocation first, and every kernel of a pass
    page = (tmp_path / "index.html").read_text()
    by_memory = page.split('<table class="ops small" id="ops-memory">')[1].split("</table>")[0]
    assert re.search(r'<td class="mono">([^<]+)</td>', by_memory)[1] in (
        "aten::empty",
        "aten::full",
    )
    kernels = page.split('<table class="kernels small" id="kernels">')[1].split("</table>")[0]
    assert kernels.count("<tr>") == 1 + len(p.kernels) and p.kernels


def test_already_compiled_code_shows_inductors_kernels():
    """On a CPU, compiled with Inductor's kernel profiling on (the docstring says so)."""
    from torch._inductor import config

    compiled = torch.compile(lambda x: (x.sin() + 1) * 2)
    x = torch.randn(64, 64)
    with config.patch({"cpp.enable_kernel_profile": True}):
        compiled(x)  # compiled before the block, as a user's model would be
    with compilekit.profile(device="cpu") as p:
        compiled(x)
    names = [k["name"] for k in p.kernels]
    assert any(n.startswith("cpp_fused") for n in names), names
    assert p.forward_device_ms > 0


def test_lines_charge_each_kernel_to_the_line_that_launched_it(tmp_path):
    """profile(lines=True) on eager code: the matmul's time lands on the matmul's line, the
    softmax's on its own, and the page lists them; without it, nothing is recorded."""
    import inspect

    x, w = torch.randn(256, 256), torch.randn(256, 256)

    def forward(x, w):
        y = x @ w  # the matmul's line
        return y.softmax(-1)  # the softmax's line

    first = inspect.getsourcelines(forward)[1]
    with compilekit.profile(str(tmp_path), device="cpu", lines=True) as p:
        forward(x, w)
    by_line = {(row["file"], row["line"]): row for row in p.lines}
    here = __file__
    matmul, softmax = by_line[(here, first + 1)], by_line[(here, first + 2)]
    assert "x @ w" in matmul["code"] and "softmax" in softmax["code"]
    assert matmul["attributed_ms"] > 0 and softmax["attributed_ms"] > 0
    assert sum(r["attributed_ms"] for r in p.lines) == pytest.approx(p.forward_device_ms)
    page = (tmp_path / "index.html").read_text()
    assert 'id="lines"' in page and "x @ w" in page
    with compilekit.profile(device="cpu") as plain:
        forward(x, w)
    assert plain.lines == []


def test_lines_on_compiled_code_say_it_ran_uncompiled(tmp_path):
    """Dynamo runs no compiled code under the line recorder's dispatch mode: the block's
    figures are eager code's, and the profile says so (a warning, a note under the table and
    on the page). Eager code, and a torch.compiler.disable'd function, get no such note."""
    compiled = torch.compile(lambda x: (x.sin() + 1) * 2)
    skipped = torch.compiler.disable(lambda x: x.cos() * 2)
    x = torch.randn(64, 64)
    compiled(x)
    with pytest.warns(UserWarning, match="ran uncompiled"):
        with compilekit.profile(str(tmp_path), device="cpu", lines=True) as p:
            compiled(x)
    assert "ran uncompiled" in p.notes[0] and p.notes[0] in p.table()
    assert "ran uncompiled" in (tmp_path / "index.html").read_text()
    for eager in (lambda x: (x.sin() + 1) * 2, skipped):
        with compilekit.profile(device="cpu", lines=True) as q:
            eager(x)
        assert not [n for n in q.notes if "ran uncompiled" in n], q.notes


def test_the_line_recorders_own_time_is_not_charged_to_the_ops_it_wraps():
    """On a CPU an op's time is its kernel's: the recorder's Python (its PythonDispatchMode
    ranges, inside the op's own range) is taken out of the launch's time."""
    from types import SimpleNamespace as Event

    from compilekit.evidence.profiling import _step_launches

    def event(name, total, self_us, children=()):
        return Event(name=name, cpu_time_total=total, self_cpu_time_total=self_us,
                     cpu_children=list(children))  # fmt: skip

    addmm = event("aten::addmm", 200.0, 200.0)
    linear = event(
        "aten::linear", 1000.0, 0.0, [event("PythonDispatchMode", 1000.0, 800.0, [addmm])]
    )
    launches = _step_launches(event("step", 1000.0, 0.0, [linear]), "cpu")
    assert [(name, ms) for name, _, ms in launches] == [("aten::linear", pytest.approx(0.2))]


def _tiny(name):
    """(model, input ids) of a tiny config of transformers' own class, random weights."""
    from tests.variants.tiny_models import tiny_transformers

    model_class, config = tiny_transformers()[name]
    torch.manual_seed(0)
    return model_class(config).eval(), torch.randint(0, 100, (2, 12))


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "qwen2", "t5-encoder"])
def test_lines_hold_on_transformers_models_with_a_range_of_the_users_inside(name, tmp_path):
    """Layers launch the same kernels from the same lines, and a user's record_function range
    sits inside the block: every kernel still gets its lines, the modeling file's lines carry
    the block's time, and the files are written."""
    import transformers

    model, ids = _tiny(name)
    with torch.no_grad(), compilekit.profile(str(tmp_path), device="cpu", lines=True) as p:
        with torch.profiler.record_function("my forward"):
            model(ids)
    assert p.kernels and all("source_lines" in k for k in p.kernels)
    assert not [k for k in p.kernels if k["name"] in ("my forward", "PythonDispatchMode")]
    assert not [r for r in p.ops if r["name"] == "PythonDispatchMode"]  # the recorder's own
    assert [n for n in p.notes if "recorder's own host time" in n]
    modeling = os.path.dirname(transformers.__file__)
    charged = sum(r["attributed_ms"] for r in p.lines if r["file"].startswith(modeling))
    assert charged > 0.5 * p.forward_device_ms, [(r["file"], r["line"]) for r in p.lines][:5]
    assert sum(r["attributed_ms"] for r in p.lines) <= p.forward_device_ms * (1 + 1e-9)
    assert (tmp_path / "index.html").is_file() and (tmp_path / "kernels.json").is_file()


def test_arguments_are_checked_before_the_block_runs_and_tables_wait_for_its_end(tmp_path):
    from compilekit.model.errors import UserError

    ran = []
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    bad = [
        (dict(forwards=0), "forwards=0"),
        (dict(forwards=-2), "forwards=-2"),
        (dict(forwards=1.5), "forwards=1.5"),
        (dict(device="tpu"), "'cpu' or 'cuda'"),
        (dict(out_dir=str(a_file)), "is a file"),
    ]
    if not torch.cuda.is_available():
        bad.append((dict(device="cuda"), "no CUDA GPU"))
    for kwargs, words in bad:
        with pytest.raises(UserError, match=words):
            with compilekit.profile(**kwargs):
                ran.append(kwargs)
    assert ran == []
    with compilekit.profile(device="cpu") as outer:
        torch.ones(4).sum()
        with pytest.raises(UserError, match="inside another profiler session"):
            with compilekit.profile(device="cpu"):
                ran.append("inner")
        with pytest.raises(UserError, match="after the block"):
            outer.table()
        torch.ones(4).mul(2)
    assert ran == [] and "aten::mul" in outer.table()
