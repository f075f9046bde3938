"""Bytes and FLOPs read from Inductor's output code (evidence/codecost.py): on a wrapper in the
form Inductor writes for a GPU (trimmed from naive/default's on the H200, with a fallback op and
a dynamic size added), then on real CPU runs, whose C++ kernels record no tensors."""

import json
import os

from compilekit.evidence import codecost, kernelmap
from tests.conftest import CPU_SHAPE

WRAPPER = """
class Runner:
    def call(self, args):
        arg0_1, arg1_1, arg2_1, arg3_1, s0 = args
        args.clear()
        assert_size_stride(arg0_1, (8, 16, 1024, 64), (1048576, 65536, 64, 1))
        with torch.cuda._DeviceGuard(0):
            buf0 = empty_strided_cuda((128, 1024, 1024), (1048576, 1024, 1), torch.bfloat16)
            # [Provenance debug handles] extern_kernels.bmm:1
            extern_kernels.bmm(reinterpret_tensor(arg0_1, (128, 1024, 64), (65536, 64, 1), 0), reinterpret_tensor(arg2_1, (128, 64, 1024), (65536, 1, 64), 0), out=buf0)
            del arg0_1
            buf3 = reinterpret_tensor(buf0, (8, 16, 1024, 1024), (16777216, 1048576, 1024, 1), 0); del buf0  # reuse
            buf9 = buf3; del buf3  # reuse
            # [Provenance debug handles] triton_per_fused__softmax_0:2
            stream0 = get_raw_stream(0)
            triton_per_fused__softmax_0.run(buf9, arg1_1, 131072, 1024, stream=stream0)
            buf4 = empty_strided_cuda((128, 1024, 64), (65536, 64, 1), torch.bfloat16)
            # [Provenance debug handles] extern_kernels.bmm:3
            assert_size_stride(arg3_1, (8, 16, 1024, 64), (1048576, 65536, 64, 1))
            extern_kernels.bmm(reinterpret_tensor(buf9, (128, 1024, 1024), (1048576, 1024, 1), 0), reinterpret_tensor(arg3_1, (128, 1024, 64), (65536, 64, 1), 0), out=buf4)
            # [Provenance debug handles] torch.ops.aten.cumsum.default:4
            buf5 = torch.ops.aten.cumsum.default(buf4, dim=-1)
            # [Provenance debug handles] triton_poi_fused_add_1:5
            triton_poi_fused_add_1.run(buf5, buf4, 8388608, stream=stream0)
            buf6 = empty_strided_cuda((s0, 64), (64, 1), torch.float32)
            # [Provenance debug handles] triton_poi_fused_copy_2:6
            triton_poi_fused_copy_2.run(buf6, s0, stream=stream0)
        return (reinterpret_tensor(buf4, (8, 16, 1024, 64), (1048576, 65536, 64, 1), 0), )


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bool)
    arg2_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg3_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1, arg3_1]
"""
QKV = 8 * 16 * 1024 * 64 * 2  # one of q, k, v in bf16
SCORES = 128 * 1024 * 1024 * 2


RETURNED = """
class Runner:
    def call(self, args):
        arg0_1, arg1_1, arg2_1, arg3_1 = args
        buf17 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(arg0_1, arg1_1, arg2_1, scale=0.125)
        buf18 = buf17[0]
        assert_size_stride(buf18, (1, 4, 1, 32), (128, 32, 32, 1), 'sdpa')
        buf22 = reinterpret_tensor(buf18, (1, 1, 128), (128, 128, 1), 0); del buf18  # reuse
        buf23 = empty_strided_cpu((1, 256), (256, 1), torch.bfloat16)
        # [Provenance debug handles] extern_kernels.mm:11
        extern_kernels.mm(reinterpret_tensor(buf22, (1, 128), (128, 1), 0), reinterpret_tensor(arg3_1, (128, 256), (1, 128), 0), out=buf23)


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((1, 4, 1, 32), (128, 32, 32, 1), device='cpu', dtype=torch.bfloat16)
    arg1_1 = rand_strided((1, 4, 9, 32), (1152, 288, 32, 1), device='cpu', dtype=torch.bfloat16)
    arg2_1 = rand_strided((1, 4, 9, 32), (1152, 288, 32, 1), device='cpu', dtype=torch.bfloat16)
    arg3_1 = rand_strided((256, 128), (128, 1), device='cpu', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1, arg3_1]
"""


def test_what_a_fallback_returns_is_sized_by_its_meta_function_for_the_kernels_after_it():
    """A decode step's attention is a fallback (SDPA, a custom op) whose output Inductor writes
    no dtype for; the matmul after it reads a buffer reusing that output. The op's meta
    function sizes it, so the matmul gets its bytes."""
    costs = codecost.call_site_costs(RETURNED)
    assert costs["extern_kernels.mm:11"]["code_bytes"] == (128 + 256 * 128 + 256) * 2
    assert costs["extern_kernels.mm:11"]["code_flops"] == 2 * 256 * 128


def test_each_call_site_gets_the_bytes_of_its_tensors_and_a_matmul_its_flops():
    costs = codecost.call_site_costs(WRAPPER)
    # q and k (views of the inputs) read, the scores written
    assert costs["extern_kernels.bmm:1"] == {
        "code_bytes": 2 * QKV + SCORES,
        "code_flops": 2 * 128 * 1024 * 1024 * 64,
        "code_args": ["arg0_1", "arg2_1", "buf0"],  # a view's base by its name
    }
    # the scores (a view of a reused buffer, reached past the launch's stream) and the bool mask
    assert costs["triton_per_fused__softmax_0:2"] == {
        "code_bytes": SCORES + 1024 * 1024,
        "code_flops": None,
        "code_args": ["buf9", "arg1_1"],
    }
    # (not the input check that stands between the handle and its call)
    assert costs["extern_kernels.bmm:3"]["code_bytes"] == SCORES + 2 * QKV
    assert costs["extern_kernels.bmm:3"]["code_flops"] == 2 * 128 * 1024 * 64 * 1024


def test_sites_whose_sizes_the_code_does_not_give_get_nothing_and_say_why():
    costs = codecost.call_site_costs(WRAPPER)
    # returns its output: no figure, and why
    assert costs["torch.ops.aten.cumsum.default:4"] == {"code_unknown": codecost.RETURNS}
    assert costs["triton_poi_fused_add_1:5"]["code_bytes"] == 2 * QKV  # cumsum's output sized
    # a symbolic size: what it takes, no figure, and which tensor lacks a size
    assert costs["triton_poi_fused_copy_2:6"] == {
        "code_unknown": codecost.UNSIZED,
        "code_unknown_at": "buf6: a symbolic size (dynamic shapes)",
        "code_args": ["buf6"],
    }
    # an op this torch does not know, and a view of what it returned: no figure
    unknown = WRAPPER.replace("torch.ops.aten.cumsum.default", "torch.ops.aten.no_such_op.default")
    unknown = unknown.replace(
        "run(buf5, buf4,", "run(reinterpret_tensor(buf5, (8,), (1,), 0), buf4,"
    )
    site = codecost.call_site_costs(unknown)["triton_poi_fused_add_1:5"]
    assert "code_bytes" not in site and site["code_args"] == ["buf5", "buf4"]
    assert site["code_unknown_at"].startswith("buf5: returned by torch.ops.aten.no_such_op")
    assert codecost.call_site_costs("def call(:\n") == {}
    assert codecost.call_site_costs(WRAPPER.replace("Provenance debug handles", "x")) == {}


def test_where_the_profiler_and_the_call_differ_the_call_counts_each_tensor_once():
    """The softmax's launch as the profiler recorded it: torch 2.11 records no dtypes (its bool
    mask took the cell's 2 bytes an element), and a tensor passed twice counts twice. Its call
    in the output code names each tensor once with its own dtype: that figure wins where the
    two differ, and the profiler's stands, unmarked, where they agree."""
    graph = {
        "output_code": WRAPPER,
        "node_mappings": {"cppCodeToPost": {"triton_per_fused__softmax_0:2": ["amax"]}},
    }

    def mapped(recorded):
        kernel = {"name": "triton_per_fused__softmax_0", "bytes": recorded, "device_ms": 1.0,
                  "launcher": "triton_per_fused__softmax_0", "calls_per_forward": 1}  # fmt: skip
        forward = {"forward_device_ms": 1.0, "kernels": [kernel]}
        return kernelmap.build_map(forward, {"0/0": graph}, {}, "", True)[0]

    code = SCORES + 1024 * 1024
    for recorded in (SCORES + 1024 * 1024 * 2, 2 * SCORES + 1024 * 1024):
        record = mapped(recorded)
        assert record["bytes"] == code and record["bytes_from"] == codecost.CODE_BYTES_FROM
    agreed = mapped(code)
    assert agreed["bytes"] == code and "bytes_from" not in agreed


# max-autotune's shape of it: the second bmm a template with the softmax fused in; a third,
# symbolic-size matmul beside
TEMPLATE_GRAPH = {
    "post_grad_graph": """
    def forward(self, arg0_1: "bf16[128, 1024, 64][65536, 64, 1]cuda:0", arg1_1: "bf16[128, 64, 1024][65536, 1, 64]cuda:0", arg3_1: "bf16[128, 1024, 64][65536, 64, 1]cuda:0", arg4_1: "bf16[s0, 64][64, 1]cuda:0"):
        bmm: "bf16[128, 1024, 1024][1048576, 1024, 1]cuda:0" = torch.ops.aten.bmm.default(arg0_1, arg1_1)
        div: "bf16[128, 1024, 1024][1048576, 1024, 1]cuda:0" = torch.ops.aten.div.Tensor(bmm, 8.0)
        bmm_1: "bf16[128, 1024, 64][65536, 64, 1]cuda:0" = torch.ops.aten.bmm.default(div, arg3_1)
        mm: "bf16[s0, s0][s0, 1]cuda:0" = torch.ops.aten.mm.default(arg4_1, arg4_1)
""",
    "node_mappings": {
        "cppCodeToPost": {
            "extern_kernels.bmm:1": ["bmm"],
            "triton_tem_fused_bmm_div_0:2": ["div", "bmm_1"],
            "extern_kernels.mm:3": ["mm"],
        }
    },
    "output_code": """
def call(args):
    buf0 = empty_strided_cuda((128, 1024, 1024), (1048576, 1024, 1), torch.bfloat16)
    # [Provenance debug handles] extern_kernels.bmm:1
    extern_kernels.bmm(arg0_1, arg1_1, out=buf0)
    buf1 = empty_strided_cuda((128, 1024, 64), (65536, 64, 1), torch.bfloat16)
    # [Provenance debug handles] triton_tem_fused_bmm_div_0:2
    triton_tem_fused_bmm_div_0.run(buf0, arg3_1, buf1, grid=grid(8192, 1, 1), stream=stream0)
def get_args():
    arg0_1 = rand_strided((128, 1024, 64), (65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((128, 64, 1024), (65536, 1, 64), device='cuda:0', dtype=torch.bfloat16)
    arg3_1 = rand_strided((128, 1024, 64), (65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
""",
}


def test_a_gemm_template_takes_the_flops_of_the_matmuls_fused_into_it():
    """max-autotune's template shows no matmul in its call: it takes the FLOPs of the graph's
    matmuls mapped into it. A pointwise kernel that provenance also maps a matmul into (it
    prepares that matmul's input) does not: only a template's call is a matmul."""
    graph = {**TEMPLATE_GRAPH, "node_mappings": {"cppCodeToPost": {
        **TEMPLATE_GRAPH["node_mappings"]["cppCodeToPost"],
        "triton_poi_fused_div_1:4": ["div", "bmm_1"],
    }}}  # fmt: skip
    costs = codecost.site_costs(graph)
    assert costs["triton_tem_fused_bmm_div_0:2"]["graph_flops"] == 2 * 128 * 1024 * 64 * 1024
    assert "extern_kernels.mm:3" not in costs  # a symbolic size: no number
    kernel = lambda name: {"name": name, "launcher": "## Call CompiledFxGraph abc",  # noqa: E731
                           "calls_per_forward": 1, "device_ms": 1.0}  # fmt: skip
    forward = {"forward_device_ms": 3.0, "kernels": [kernel("nvjet_gemm"),
               kernel("triton_tem_fused_bmm_div_0"), kernel("triton_poi_fused_div_1")]}  # fmt: skip
    records = {r["name"]: r for r in kernelmap.build_map(forward, {"0/0": graph}, {}, "", True)}
    template = records["triton_tem_fused_bmm_div_0"]
    assert template["kind"] == "template"
    assert template["flops"] == 2 * 128 * 1024 * 64 * 1024  # bmm_1 only: div adds none
    assert template["flops_from"] == codecost.GRAPH_FLOPS_FROM
    assert template["bytes"] == SCORES + 2 * QKV  # the scores and v in, [128, 1024, 64] out
    gemm = records["nvjet_gemm"]  # the extern bmm, by launch order: its call's own FLOPs
    assert gemm["flops"] == 2 * 128 * 1024 * 1024 * 64
    assert gemm["flops_from"] == codecost.CODE_FLOPS_FROM
    assert records["triton_poi_fused_div_1"]["flops"] is None


# a model's attention under a CUDA-graph replay: cuDNN's SDPA as a fallback op, which returns
# its output, beside the kernel that builds a mask and lists the SDPA node too
SDPA_GRAPH = {
    "post_grad_graph": """
    def forward(self, arg0_1: "bf16[2, 16, 512, 64][524288, 32768, 64, 1]cuda:0", arg1_1: "bf16[2, 4, 512, 64][131072, 32768, 64, 1]cuda:0", arg2_1: "bf16[2, 4, 512, 64][131072, 32768, 64, 1]cuda:0", mask: "b8[512, 512][512, 1]cuda:0"):
        _scaled_dot_product_cudnn_attention = torch.ops.aten._scaled_dot_product_cudnn_attention.default(arg0_1, arg1_1, arg2_1, None, False, 0.0, True, scale = 0.125)
        _scaled_dot_product_flash_attention_for_cpu = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(arg0_1, arg0_1, arg0_1, attn_mask = mask, scale = 0.125)
""",
    "node_mappings": {
        "cppCodeToPost": {
            "triton_poi_fused_mask_0:1": ["mask", "_scaled_dot_product_cudnn_attention"],
            "torch.ops.aten._scaled_dot_product_cudnn_attention.default:2": [
                "_scaled_dot_product_cudnn_attention",
                "mask",
            ],
        }
    },
}


def test_a_replayed_sdpa_call_takes_its_graph_nodes_shapes_and_flag():
    """The fallback returns its output, so its call says nothing: the SDPA node does (q, k, v,
    is_causal in its sixth place, or masked in a keyword), and only the SDPA kernel takes it."""
    costs = codecost.graph_sdpa_costs(SDPA_GRAPH["post_grad_graph"])
    q, kv = 2 * 16 * 512 * 64, 2 * 4 * 512 * 64  # GQA: K/V at 4 heads
    cudnn = costs["_scaled_dot_product_cudnn_attention"]
    assert cudnn["sdpa_flops"] == 4 * 2 * 16 * 64 * (512 * 513 // 2)  # causal, every query head
    assert cudnn["sdpa_bytes"] == (q + 2 * kv + q) * 2
    masked = costs["_scaled_dot_product_flash_attention_for_cpu"]
    assert masked["sdpa_flops"] == 4 * 2 * 16 * 64 * 512 * 512  # a mask: every pair computed
    kernel = lambda name: {"name": name, "launcher": "## Call CompiledFxGraph abc",  # noqa: E731
                           "calls_per_forward": 1, "device_ms": 1.0}  # fmt: skip
    forward = {"forward_device_ms": 2.0,
               "kernels": [kernel("triton_poi_fused_mask_0"), kernel("cudnn_sdpa_fprop")]}  # fmt: skip
    records = {
        r["name"]: r for r in kernelmap.build_map(forward, {"0/0": SDPA_GRAPH}, {}, "", True)
    }
    attention = records["cudnn_sdpa_fprop"]
    assert (attention["flops"], attention["bytes"]) == (cudnn["sdpa_flops"], cudnn["sdpa_bytes"])
    assert attention["flops_from"] == attention["bytes_from"] == codecost.GRAPH_SDPA_FROM
    assert records["triton_poi_fused_mask_0"]["flops"] is None


def test_a_cpu_runs_fused_kernel_is_placed_from_its_call(run_cell):
    """Inductor's C++ kernel records no tensors in the profile: its bytes come from its call in
    the output code, at least the scores it rewrites and the mask it reads, and the roofline
    places it."""
    result = run_cell("naive", "default", shape=CPU_SHAPE)
    with open(os.path.join(result.run_dir, "kernels.json")) as f:
        records = json.load(f)["kernels"]
    fused = next(r for r in records if r["kind"] == "generated")
    batch, heads, seq, _ = (int(d) for d in CPU_SHAPE.split("x"))
    scores, mask = batch * heads * seq * seq * 4, seq * seq  # float32 scores, a bool mask
    assert scores + mask <= fused["bytes"] < 2 * scores, fused
    assert fused["bytes_from"] == codecost.CODE_BYTES_FROM
    assert fused["roofline"]["bound"] == "memory" and fused["roofline"]["gbps"] > 0
    # the matmuls keep the profiler's figures, which need no code
    assert all("bytes_from" not in r for r in records if r["kind"] == "extern")
    assert "not placed" not in result.roofline, result.roofline


def test_a_kernel_off_the_roofline_says_why_in_the_map_and_the_table():
    """A kernel whose call takes a tensor of symbolic size gets no bytes: its record says so
    and which tensor (bytes_unknown, bytes_unknown_at), and the kernel table marks its GB/s
    with that reason under the table; a generated kernel with no call in the output code says
    that instead."""
    from compilekit.report import runview

    graph = {
        "output_code": WRAPPER,
        "node_mappings": {"cppCodeToPost": {"triton_poi_fused_copy_2:6": ["copy"]}},
    }
    kernel = lambda name: {"name": name, "launcher": name, "calls_per_forward": 1,  # noqa: E731
                           "device_ms": 1.0}  # fmt: skip
    forward = {"forward_device_ms": 2.0,
               "kernels": [kernel("triton_poi_fused_copy_2"), kernel("triton_poi_fused_gone_9")]}  # fmt: skip
    records = {r["name"]: r for r in kernelmap.build_map(forward, {"0/0": graph}, {}, "", True)}
    unsized = records["triton_poi_fused_copy_2"]
    assert unsized["bytes"] is None and unsized["bytes_unknown"] == codecost.UNSIZED
    assert unsized["bytes_unknown_at"] == "buf6: a symbolic size (dynamic shapes)"
    assert records["triton_poi_fused_gone_9"]["bytes_unknown"] == kernelmap.NO_SITE
    notes: list[str] = []
    cells = runview._roofline_cells(unsized, notes)
    assert cells[0] == "- [a]" and notes == [
        f"no bytes: {codecost.UNSIZED} (kernels.json's bytes_unknown_at names it and why)"
    ]
    from compilekit.report import pages

    assert pages.roofline_sources(unsized).endswith("(buf6: a symbolic size (dynamic shapes))")
