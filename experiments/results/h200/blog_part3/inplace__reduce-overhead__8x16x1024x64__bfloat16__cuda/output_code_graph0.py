# AOT ID: ['0_inference']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import start_graph, end_graph
from torch._C import _cuda_getCurrentRawStream as get_raw_stream

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p
from torch._C import _cuda_getCurrentRawStream as get_raw_stream



# kernel path: /tmp/ckcache/inplace__reduce-overhead__8x16x1024x64__bfloat16__cuda-8e581f639b2e/inductor/5a/c5arvga7mamis7gihizint2at54rl6wn3w3r3xjxjprihmvnk2zi.py
# Topologically Sorted Source Nodes: [masked_fill_, scores, mul_, attn, ], Original ATen: [aten.masked_fill, aten.view, aten.mul, aten._softmax, prims.prepare_softmax_online, aten.sub, aten.exp]
# Source node to ATen node mapping:
#    => exp_default, prepare_softmax_online_default, sub_tensor
#   attn => convert_element_type_2, convert_element_type_3, div
#   masked_fill_ => full_default, where
#   mul_ => mul
#   scores => view_2
# Graph fragment:
#   %arg1_1 : Tensor "b8[1024, 1024][1024, 1]cuda:0" = PlaceHolder[target=arg1_1]
#   %bmm : Tensor "bf16[128, 1024, 1024][1048576, 1024, 1]cuda:0" = PlaceHolder[target=bmm]
#   %getitem : Tensor "f32[8, 16, 1024, 1][16384, 1024, 1, 131072]cuda:0" = PlaceHolder[target=getitem]
#   %getitem_1 : Tensor "f32[8, 16, 1024, 1][16384, 1024, 1, 131072]cuda:0" = PlaceHolder[target=getitem_1]
#   %full_default : Tensor "bf16[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.full.default](args = ([], -inf), kwargs = {dtype: torch.bfloat16, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %view_2 : Tensor "bf16[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%bmm, [8, 16, 1024, 1024]), kwargs = {})
#   %mul : Tensor "bf16[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%view_2, 0.125), kwargs = {})
#   %where : Tensor "bf16[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.where.self](args = (%arg1_1, %full_default, %mul), kwargs = {})
#   %convert_element_type_2 : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%where, torch.float32), kwargs = {})
#   %prepare_softmax_online_default : [num_users=2] = call_function[target=torch.ops.prims.prepare_softmax_online.default](args = (%convert_element_type_2, -1), kwargs = {})
#   %sub_tensor : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_2, %getitem), kwargs = {})
#   %exp_default : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%sub_tensor,), kwargs = {})
#   %div : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%exp_default, %getitem_1), kwargs = {})
#   %convert_element_type_3 : Tensor "bf16[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div, torch.bfloat16), kwargs = {})
#   return %getitem,%getitem_1,%expand_2
triton_per_fused__softmax_exp_masked_fill_mul_prepare_softmax_online_sub_view_0 = async_compile.triton('triton_per_fused__softmax_exp_masked_fill_mul_prepare_softmax_online_sub_view_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 131072, 'r0_': 1024},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*i1', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused__softmax_exp_masked_fill_mul_prepare_softmax_online_sub_view_0', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 2, 'num_store': 1, 'num_reduction': 4, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 806354944}}
)
@triton.jit
def triton_per_fused__softmax_exp_masked_fill_mul_prepare_softmax_online_sub_view_0(in_out_ptr0, in_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 131072
    r0_numel = 1024
    R0_BLOCK: tl.constexpr = 1024
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_2 = r0_index
    x0 = (xindex % 1024)
    x3 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_2 + 1024*x0), None, eviction_policy='evict_last').to(tl.int1)
    tmp1 = tl.load(in_out_ptr0 + (r0_2 + 1024*x3), None).to(tl.float32)
    tmp2 = tl.full([1, 1], 0.125, tl.float32)
    tmp3 = tmp1 * tmp2
    tmp4 = tl.full([1, 1], float("-inf"), tl.float32)
    tmp5 = tl.where(tmp0, tmp4, tmp3)
    tmp6 = tmp5.to(tl.float32)
    tmp7 = tl.broadcast_to(tmp6, [XBLOCK, R0_BLOCK])
    tmp9 = tl.broadcast_to(tmp7, [XBLOCK, R0_BLOCK])
    tmp11 = triton_helpers.max2(tmp9, 1)[:, None].to(tl.float32)
    tmp12 = tmp7 - tmp11
    tmp13 = libdevice.exp(tmp12)
    tmp14 = tl.broadcast_to(tmp13, [XBLOCK, R0_BLOCK])
    tmp16 = tl.sum(tmp14, 1)[:, None].to(tl.float32)
    tmp17 = tmp6 - tmp11
    tmp18 = libdevice.exp(tmp17)
    tmp19 = (tmp18 / tmp16)
    tmp20 = tmp19.to(tl.float32)
    tl.store(in_out_ptr0 + (r0_2 + 1024*x3), tmp20, None)
''', device_str='cuda')

def partition_0(args):
    arg0_1, arg2_1, arg1_1, arg3_1 = args
    args.clear()
    assert_size_stride(arg0_1, (8, 16, 1024, 64), (1048576, 65536, 64, 1))
    assert_size_stride(arg2_1, (8, 16, 1024, 64), (1048576, 65536, 64, 1))
    assert_size_stride(arg1_1, (1024, 1024), (1024, 1))
    assert_size_stride(arg3_1, (8, 16, 1024, 64), (1048576, 65536, 64, 1))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((128, 1024, 1024), (1048576, 1024, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [scores, transpose], Original ATen: [aten.view, aten.transpose, aten.bmm]
        # [Provenance debug handles] extern_kernels.bmm:1
        extern_kernels.bmm(reinterpret_tensor(arg0_1, (128, 1024, 64), (65536, 64, 1), 0), reinterpret_tensor(arg2_1, (128, 64, 1024), (65536, 1, 64), 0), out=buf0)
        del arg0_1
        del arg2_1
        buf3 = reinterpret_tensor(buf0, (8, 16, 1024, 1024), (16777216, 1048576, 1024, 1), 0); del buf0  # reuse
        # Topologically Sorted Source Nodes: [masked_fill_, scores, mul_, attn, ], Original ATen: [aten.masked_fill, aten.view, aten.mul, aten._softmax, prims.prepare_softmax_online, aten.sub, aten.exp]
        # [Provenance debug handles] triton_per_fused__softmax_exp_masked_fill_mul_prepare_softmax_online_sub_view_0:2
        stream0 = get_raw_stream(0)
        triton_per_fused__softmax_exp_masked_fill_mul_prepare_softmax_online_sub_view_0.run(buf3, arg1_1, 131072, 1024, stream=stream0)
        del arg1_1
        buf4 = empty_strided_cuda((128, 1024, 64), (65536, 64, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [masked_fill_, scores, mul_, attn, , matmul_1], Original ATen: [aten.masked_fill, aten.view, aten.mul, aten._softmax, aten.sub, aten.exp, aten.bmm]
        # [Provenance debug handles] extern_kernels.bmm:3
        extern_kernels.bmm(reinterpret_tensor(buf3, (128, 1024, 1024), (1048576, 1024, 1), 0), reinterpret_tensor(arg3_1, (128, 1024, 64), (65536, 64, 1), 0), out=buf4)
        del arg3_1
        del buf3
    return (buf4, )


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        arg0_1, arg1_1, arg2_1, arg3_1 = args
        args.clear()
        partition0_args = [arg0_1, arg2_1, arg1_1, arg3_1]
        del arg0_1, arg2_1, arg1_1, arg3_1
        (buf4,) = self.partitions[0](partition0_args)
        del partition0_args
        return (reinterpret_tensor(buf4, (8, 16, 1024, 64), (1048576, 65536, 64, 1), 0), )

runner = Runner(partitions=[partition_0,])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bool)
    arg2_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg3_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1, arg3_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))

