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


# kernel path: /tmp/ckcache/sdpa-math__default__8x16x1024x64__bfloat16__cuda-4ee477bdd2fd/inductor/gs/cgs6vtqkkglrg7rx55n3qz6obimuolj2kwego3nslruniesh4j7r.py
# Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten._to_copy, aten.mul]
# Source node to ATen node mapping:
#   scaled_dot_product_attention => convert_element_type, mul
# Graph fragment:
#   %arg0_1 : Tensor "bf16[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %convert_element_type : Tensor "f32[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg0_1, torch.float32), kwargs = {})
#   %mul : Tensor "f32[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Scalar](args = (%convert_element_type, 0.3535533905932738), kwargs = {})
#   return %expand
triton_poi_fused__to_copy_mul_0 = async_compile.triton('triton_poi_fused__to_copy_mul_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 8388608}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__to_copy_mul_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 83886080}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_mul_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 8388608
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp2 = tl.full([1], 0.3535533905932738, tl.float32)
    tmp3 = tmp1 * tmp2
    tl.store(out_ptr0 + (x0), tmp3, None)
''', device_str='cuda')


# kernel path: /tmp/ckcache/sdpa-math__default__8x16x1024x64__bfloat16__cuda-4ee477bdd2fd/inductor/mp/cmpbtyuo723avutixfs4a5j5wyeu5xrgfb2xh656qf7tojaagiqw.py
# Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten._to_copy, aten.transpose, aten.mul]
# Source node to ATen node mapping:
#   scaled_dot_product_attention => convert_element_type_1, mul_1, permute
# Graph fragment:
#   %arg1_1 : Tensor "bf16[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0" = PlaceHolder[target=arg1_1]
#   %convert_element_type_1 : Tensor "f32[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg1_1, torch.float32), kwargs = {})
#   %permute : Tensor "f32[8, 16, 64, 1024][1048576, 65536, 1, 64]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%convert_element_type_1, [0, 1, 3, 2]), kwargs = {})
#   %mul_1 : Tensor "f32[8, 16, 64, 1024][1048576, 65536, 1, 64]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Scalar](args = (%permute, 0.3535533905932738), kwargs = {})
#   return %expand_1
triton_poi_fused__to_copy_mul_transpose_1 = async_compile.triton('triton_poi_fused__to_copy_mul_transpose_1', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'y': 8192, 'x': 1024}, tile_hint=TileHint.SQUARE,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'ynumel': 'i32', 'xnumel': 'i32', 'YBLOCK': 'constexpr', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid2D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__to_copy_mul_transpose_1', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'y': 16777216, 'x': 67108864}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_mul_transpose_1(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 8192
    xnumel = 1024
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y0 = (yindex % 64)
    y1 = yindex // 64
    y3 = yindex
    tmp0 = tl.load(in_ptr0 + (y0 + 64*x2 + 65536*y1), xmask, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp2 = tl.full([1, 1], 0.3535533905932738, tl.float32)
    tmp3 = tmp1 * tmp2
    tl.store(out_ptr0 + (x2 + 1024*y3), tmp3, xmask)
''', device_str='cuda')


# kernel path: /tmp/ckcache/sdpa-math__default__8x16x1024x64__bfloat16__cuda-4ee477bdd2fd/inductor/xy/cxyygxf6ji5dvp5xkvbqq6swvemodqealvp7r76liabsvb5pytxa.py
# Topologically Sorted Source Nodes: [scaled_dot_product_attention, ], Original ATen: [aten.view, aten.tril, aten.ones, aten.scalar_tensor, aten.where, aten.add, aten._safe_softmax, prims.prepare_softmax_online, aten.sub, aten.exp]
# Source node to ATen node mapping:
#    => exp_default, prepare_softmax_online_default, sub_tensor
#   scaled_dot_product_attention => add, any_1, div, eq, full_default, full_default_1, full_default_2, full_default_3, iota, iota_1, le, logical_and, logical_not, logical_not_1, sub, unsqueeze, unsqueeze_1, view_2, where, where_1
# Graph fragment:
#   %bmm : Tensor "f32[128, 1024, 1024][1048576, 1024, 1]cuda:0" = PlaceHolder[target=bmm]
#   %any_1 : Tensor "b8[8, 16, 1024, 1][16384, 1024, 1, 131072]cuda:0" = PlaceHolder[target=any_1]
#   %getitem : Tensor "f32[8, 16, 1024, 1][16384, 1024, 1, 131072]cuda:0" = PlaceHolder[target=getitem]
#   %getitem_1 : Tensor "f32[8, 16, 1024, 1][16384, 1024, 1, 131072]cuda:0" = PlaceHolder[target=getitem_1]
#   %view_2 : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%bmm, [8, 16, 1024, 1024]), kwargs = {})
#   %iota : Tensor "i64[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.iota.default](args = (1024,), kwargs = {start: 0, step: 1, dtype: torch.int64, device: cuda:0, requires_grad: False})
#   %unsqueeze : Tensor "i64[1, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%iota, -2), kwargs = {})
#   %iota_1 : Tensor "i64[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.iota.default](args = (1024,), kwargs = {start: 0, step: 1, dtype: torch.int64, device: cuda:0, requires_grad: False})
#   %unsqueeze_1 : Tensor "i64[1024, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%iota_1, -1), kwargs = {})
#   %sub : Tensor "i64[1024, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%unsqueeze, %unsqueeze_1), kwargs = {})
#   %le : Tensor "b8[1024, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.le.Scalar](args = (%sub, 0), kwargs = {})
#   %full_default : Tensor "b8[1024, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.full.default](args = ([1024, 1024], True), kwargs = {dtype: torch.bool, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %logical_and : Tensor "b8[1024, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.logical_and.default](args = (%le, %full_default), kwargs = {})
#   %full_default_2 : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.full.default](args = ([], 0.0), kwargs = {dtype: torch.float32, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %full_default_1 : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.full.default](args = ([], -inf), kwargs = {dtype: torch.float32, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %where : Tensor "f32[1024, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.where.self](args = (%logical_and, %full_default_2, %full_default_1), kwargs = {})
#   %add : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.add.Tensor](args = (%view_2, %where), kwargs = {})
#   %eq : Tensor "b8[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.eq.Scalar](args = (%add, -inf), kwargs = {})
#   %logical_not : Tensor "b8[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.logical_not.default](args = (%eq,), kwargs = {})
#   %any_1 : Tensor "b8[8, 16, 1024, 1][16384, 1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.any.dim](args = (%logical_not, -1, True), kwargs = {})
#   %logical_not_1 : Tensor "b8[8, 16, 1024, 1][16384, 1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.logical_not.default](args = (%any_1,), kwargs = {})
#   %full_default_3 : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.full.default](args = ([8, 16, 1024, 1024], 0), kwargs = {dtype: torch.float32, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %prepare_softmax_online_default : [num_users=2] = call_function[target=torch.ops.prims.prepare_softmax_online.default](args = (%add, -1), kwargs = {})
#   %sub_tensor : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%add, %getitem), kwargs = {})
#   %exp_default : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%sub_tensor,), kwargs = {})
#   %div : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%exp_default, %getitem_1), kwargs = {})
#   %where_1 : Tensor "f32[8, 16, 1024, 1024][16777216, 1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.where.self](args = (%logical_not_1, %full_default_3, %div), kwargs = {})
#   return %any_1,%getitem,%getitem_1,%expand_2
triton_per_fused__safe_softmax_add_exp_ones_prepare_softmax_online_scalar_tensor_sub_tril_view_where_2 = async_compile.triton('triton_per_fused__safe_softmax_add_exp_ones_prepare_softmax_online_scalar_tensor_sub_tril_view_where_2', '''
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
    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused__safe_softmax_add_exp_ones_prepare_softmax_online_scalar_tensor_sub_tril_view_where_2', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 5, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 1610612736}}
)
@triton.jit
def triton_per_fused__safe_softmax_add_exp_ones_prepare_softmax_online_scalar_tensor_sub_tril_view_where_2(in_out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
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
    x3 = xindex
    x0 = (xindex % 1024)
    tmp0 = tl.load(in_out_ptr0 + (r0_2 + 1024*x3), None)
    tmp1 = r0_2 + ((-1)*x0)
    tmp2 = tl.full([1, 1], 0, tl.int64)
    tmp3 = tmp1 <= tmp2
    tmp4 = tl.full([1, 1], True, tl.int1)
    tmp5 = tmp3 & tmp4
    tmp6 = tl.full([1, 1], 0.0, tl.float32)
    tmp7 = tl.full([1, 1], float("-inf"), tl.float32)
    tmp8 = tl.where(tmp5, tmp6, tmp7)
    tmp9 = tmp0 + tmp8
    tmp10 = tmp9 == tmp7
    tmp11 = tmp10 == 0
    tmp12 = tmp11.to(tl.int64)
    tmp13 = (tmp12 != 0)
    tmp14 = tl.broadcast_to(tmp13, [XBLOCK, R0_BLOCK])
    tmp16 = triton_helpers.any(tmp14, 1)[:, None].to(tl.int1)
    tmp17 = tl.broadcast_to(tmp9, [XBLOCK, R0_BLOCK])
    tmp19 = tl.broadcast_to(tmp17, [XBLOCK, R0_BLOCK])
    tmp21 = triton_helpers.max2(tmp19, 1)[:, None].to(tl.float32)
    tmp22 = tmp17 - tmp21
    tmp23 = libdevice.exp(tmp22)
    tmp24 = tl.broadcast_to(tmp23, [XBLOCK, R0_BLOCK])
    tmp26 = tl.sum(tmp24, 1)[:, None].to(tl.float32)
    tmp27 = tmp16 == 0
    tmp28 = tmp9 - tmp21
    tmp29 = libdevice.exp(tmp28)
    tmp30 = (tmp29 / tmp26)
    tmp31 = tl.where(tmp27, tmp6, tmp30)
    tl.store(in_out_ptr0 + (r0_2 + 1024*x3), tmp31, None)
''', device_str='cuda')


# kernel path: /tmp/ckcache/sdpa-math__default__8x16x1024x64__bfloat16__cuda-4ee477bdd2fd/inductor/nb/cnbye7ryiyndc7h7hmqg2qldebdfvy4kigkfqpuv65ynw3xav6e6.py
# Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten._to_copy]
# Source node to ATen node mapping:
#   scaled_dot_product_attention => convert_element_type_2
# Graph fragment:
#   %arg2_1 : Tensor "bf16[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0" = PlaceHolder[target=arg2_1]
#   %convert_element_type_2 : Tensor "f32[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg2_1, torch.float32), kwargs = {})
#   return %expand_3
triton_poi_fused__to_copy_3 = async_compile.triton('triton_poi_fused__to_copy_3', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 8388608}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__to_copy_3', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 83886080}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_3(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 8388608
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp1, None)
''', device_str='cuda')


# kernel path: /tmp/ckcache/sdpa-math__default__8x16x1024x64__bfloat16__cuda-4ee477bdd2fd/inductor/v6/cv6zdd6kiughqzwmdlqehhomf7pbfl2fyb7ixxb56ecyosdkk6o4.py
# Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten.view, aten._to_copy]
# Source node to ATen node mapping:
#   scaled_dot_product_attention => convert_element_type_4, view_5
# Graph fragment:
#   %bmm_1 : Tensor "f32[128, 1024, 64][65536, 64, 1]cuda:0" = PlaceHolder[target=bmm_1]
#   %view_5 : Tensor "f32[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%bmm_1, [8, 16, 1024, 64]), kwargs = {})
#   %convert_element_type_4 : Tensor "bf16[8, 16, 1024, 64][1048576, 65536, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_5, torch.bfloat16), kwargs = {})
#   return %convert_element_type_4
triton_poi_fused__to_copy_view_4 = async_compile.triton('triton_poi_fused__to_copy_view_4', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 8388608}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__to_copy_view_4', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 67108864}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_view_4(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 8388608
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), None)
    tmp1 = tmp0.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp1, None)
''', device_str='cuda')


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
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        assert_size_stride(arg0_1, (8, 16, 1024, 64), (1048576, 65536, 64, 1))
        assert_size_stride(arg1_1, (8, 16, 1024, 64), (1048576, 65536, 64, 1))
        assert_size_stride(arg2_1, (8, 16, 1024, 64), (1048576, 65536, 64, 1))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((8, 16, 1024, 64), (1048576, 65536, 64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten._to_copy, aten.mul]
            # [Provenance debug handles] triton_poi_fused__to_copy_mul_0:1
            stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_mul_0.run(arg0_1, buf0, 8388608, stream=stream0)
            del arg0_1
            buf1 = empty_strided_cuda((8, 16, 64, 1024), (1048576, 65536, 1024, 1), torch.float32)
            # Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten._to_copy, aten.transpose, aten.mul]
            # [Provenance debug handles] triton_poi_fused__to_copy_mul_transpose_1:2
            stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_mul_transpose_1.run(arg1_1, buf1, 8192, 1024, stream=stream0)
            del arg1_1
            buf2 = empty_strided_cuda((128, 1024, 1024), (1048576, 1024, 1), torch.float32)
            # Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten._to_copy, aten.mul, aten.view, aten.transpose, aten.bmm]
            # [Provenance debug handles] extern_kernels.bmm:3
            extern_kernels.bmm(reinterpret_tensor(buf0, (128, 1024, 64), (65536, 64, 1), 0), reinterpret_tensor(buf1, (128, 64, 1024), (65536, 1024, 1), 0), out=buf2)
            del buf0
            del buf1
            buf6 = reinterpret_tensor(buf2, (8, 16, 1024, 1024), (16777216, 1048576, 1024, 1), 0); del buf2  # reuse
            # Topologically Sorted Source Nodes: [scaled_dot_product_attention, ], Original ATen: [aten.view, aten.tril, aten.ones, aten.scalar_tensor, aten.where, aten.add, aten._safe_softmax, prims.prepare_softmax_online, aten.sub, aten.exp]
            # [Provenance debug handles] triton_per_fused__safe_softmax_add_exp_ones_prepare_softmax_online_scalar_tensor_sub_tril_view_where_2:4
            stream0 = get_raw_stream(0)
            triton_per_fused__safe_softmax_add_exp_ones_prepare_softmax_online_scalar_tensor_sub_tril_view_where_2.run(buf6, 131072, 1024, stream=stream0)
            buf7 = empty_strided_cuda((8, 16, 1024, 64), (1048576, 65536, 64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten._to_copy]
            # [Provenance debug handles] triton_poi_fused__to_copy_3:5
            stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_3.run(arg2_1, buf7, 8388608, stream=stream0)
            del arg2_1
            buf8 = empty_strided_cuda((128, 1024, 64), (65536, 64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [scaled_dot_product_attention, ], Original ATen: [aten.view, aten.tril, aten.ones, aten.scalar_tensor, aten.where, aten.add, aten._safe_softmax, aten.sub, aten.exp, aten._to_copy, aten.bmm]
            # [Provenance debug handles] extern_kernels.bmm:6
            extern_kernels.bmm(reinterpret_tensor(buf6, (128, 1024, 1024), (1048576, 1024, 1), 0), reinterpret_tensor(buf7, (128, 1024, 64), (65536, 64, 1), 0), out=buf8)
            del buf6
            del buf7
            buf9 = empty_strided_cuda((8, 16, 1024, 64), (1048576, 65536, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten.view, aten._to_copy]
            # [Provenance debug handles] triton_poi_fused__to_copy_view_4:7
            stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_view_4.run(buf8, buf9, 8388608, stream=stream0)
            del buf8
        return (buf9, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg2_1 = rand_strided((8, 16, 1024, 64), (1048576, 65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))

