"""Attention's share of a model's device time, against a hand count: kernels of a small
modeling file whose code says which part each line is."""

import pytest

from compilekit.evidence import shares

MODELING = """class TinyAttention:
    def forward(self, x):
        q = self.q_proj(x)
        return sdpa(q)

def rotate_half(x):
    return x

class TinyMLP:
    def forward(self, x):
        return self.down_proj(x)

class TinyRMSNorm:
    def forward(self, x):
        return x * x

def embed(ids):
    return ids
"""


def _kernel(name, ops, ms, origins, stack=None, calls=1.0):
    return {"name": name, "launcher": ops[0] if ops else "", "aten_ops": ops, "device_ms": ms,
            "calls_per_forward": calls, "origin_lines": origins, "source_lines": stack or origins}  # fmt: skip


def _written(path, text):
    """Write text to path; a function from a line number to that line as the map gives it."""
    with open(path, "w") as f:
        f.write(text)
    return lambda n: {"file": str(path), "line": n, "code": text.splitlines()[n - 1].strip()}


def test_each_kernels_time_goes_to_the_part_its_code_or_its_ops_say(tmp_path):
    at = _written(tmp_path / "modeling_tiny.py", MODELING)

    records = [
        _kernel("nvjet_q_proj", ["aten.addmm"], 2.0, [at(3)]),  # a projection in attention code
        _kernel("cudnn_generated_fort_native_sdpa", ["aten._cudnn_attention"], 1.5, [at(4)],
                calls=2.0),  # two launches a forward: 3 ms
        _kernel("triton_poi_fused_mul", ["aten.mul"], 1.0, [at(7)]),  # rotary
        _kernel("nvjet_down_proj", ["aten.mm"], 4.0, [at(11)]),  # the MLP's matmul
        _kernel("triton_red_fused_mean_pow", ["aten.pow", "aten.mean"], 1.0, [at(15)]),  # norm
        # fused across a norm line and the embedding's: half each
        _kernel("triton_poi_fused_add_embedding", ["aten.add", "aten.embedding"], 2.0,
                [at(15), at(18)]),
        # one op whose own line says nothing, called from attention code
        _kernel("cat_kernel", ["aten.cat"], 1.0, [at(18)], stack=[at(18), at(3)]),
    ]  # fmt: skip
    found = shares.shares(records)
    # by hand, of 14 ms: attention 2 + 3 + 1 + 1, matmuls 4, norms 1 + 1, other 1
    assert found["device_ms"] == pytest.approx(14.0)
    assert found["attention"] == pytest.approx(7 / 14)
    assert found["matmuls"] == pytest.approx(4 / 14)
    assert found["norms_activations"] == pytest.approx(2 / 14)
    assert found["other"] == pytest.approx(1 / 14)
    assert sum(found[p] for p in shares.PARTS) == pytest.approx(1.0) and found["by"] == "code"
    assert shares.shares_line(found) == (
        "attention 50% of the device time (matmuls 29%, norms and activations 14%, other 7%)"
    )
    # no source lines (compiled code under compilekit.profile()): its kernels alone say
    bare = [{**r, "origin_lines": [], "source_lines": []} for r in records]
    alone = shares.shares(bare)
    assert alone["by"] == "kernels" and alone["attention"] == pytest.approx(3 / 14)
    assert alone["matmuls"] == pytest.approx(6 / 14) and "by kernel alone" in (
        shares.shares_line(alone)
    )
    assert shares.shares([]) is None


USER_BLOCK = """class Block:
    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(a)
"""


def test_a_line_that_calls_sdpa_is_attention_in_a_block_named_for_nothing(tmp_path):
    """A user's own block: Inductor writes SDPA out as GEMMs and a softmax on the CPU, all on
    the line that calls it; they are attention's, the projections around it matmuls."""
    at = _written(tmp_path / "mymodel.py", USER_BLOCK)

    records = [
        _kernel("aten::addmm", ["aten.addmm"], 3.0, [at(3)]),
        _kernel("aten::bmm", ["aten.bmm"], 1.0, [at(4)], calls=2.0),
        _kernel("cpp_fused__safe_softmax_1", ["aten.amax", "aten.exp", "aten.div"], 1.0, [at(4)]),
        _kernel("aten::addmm", ["aten.addmm"], 2.0, [at(5)]),
    ]
    found = shares.shares(records)  # by hand, of 8 ms: attention 2 + 1, matmuls 3 + 2
    assert found["attention"] == pytest.approx(3 / 8) and found["matmuls"] == pytest.approx(5 / 8)


GPT2_MLP = """class GPT2MLP:
    def forward(self, x):
        h = self.c_fc(x)
        h = self.act(h)
        return self.c_proj(self.act(h))
"""


def test_the_kernels_of_an_activation_module_are_its_part_whatever_their_ops(tmp_path):
    """GPT-2's eager GELU: a pow, muls, adds and a tanh, each a kernel of generic elementwise
    ops on the MLP's `self.act(h)` line; the GEMM on a line that also calls it stays a matmul."""
    at = _written(tmp_path / "modeling_gpt2.py", GPT2_MLP)

    records = [
        _kernel("nvjet_c_fc", ["aten.addmm"], 2.0, [at(3)]),
        _kernel("vectorized_elementwise_kernel", ["aten.mul"], 0.5, [at(4)], calls=4.0),
        _kernel("vectorized_elementwise_kernel", ["aten.add"], 0.5, [at(4)], calls=2.0),
        _kernel("nvjet_c_proj", ["aten.addmm"], 2.0, [at(5)]),
    ]
    found = shares.shares(records)  # by hand, of 7 ms: matmuls 2 + 2, activations 2 + 1
    assert found["matmuls"] == pytest.approx(4 / 7)
    assert found["norms_activations"] == pytest.approx(3 / 7) and found["other"] == 0


def test_a_variance_named_for_the_matmul_beside_it_is_no_matmul(tmp_path):
    """Inductor names a kernel after every node fused into it: the variance over a residual
    that holds the o projection's output carries `mm` in its name, but its ops (mean, pow,
    add) hold no matmul nor the one-row matmul's sum. On a line of no named part it is other;
    the one-row matmul itself (mul and sum) stays a matmul."""
    at = _written(
        tmp_path / "modeling_tiny.py", MODELING + "\ndef layer(h, o):\n    return h + o\n"
    )
    residual = at(21)
    records = [
        _kernel("triton_red_fused_add_mean_mm_pow_13", ["aten.mean", "aten.pow", "aten.add"],
                1.0, [residual]),
        _kernel("triton_red_fused_mm_t_view_6", ["aten.sum", "aten.mul"], 3.0, [residual]),
    ]  # fmt: skip
    found = shares.shares(records)
    assert found["matmuls"] == pytest.approx(3 / 4) and found["other"] == pytest.approx(1 / 4)
