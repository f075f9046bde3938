"""The part of a tensor an indexing op touches (evidence/partial.py): an eager gather's table,
a compiled kernel's gathered table, slice and cache write, counted at the part it touches."""

from types import SimpleNamespace

from compilekit.evidence import kernelmap, partial, profiling

ROW = 4096  # Llama-2-7B's hidden size: one embedding row, bf16
BF16, I64 = "c10::BFloat16", "long int"


def _op(name, shapes, dtypes, concrete=()):
    return SimpleNamespace(
        name=name, input_shapes=shapes, input_dtypes=dtypes, concrete_inputs=list(concrete)
    )


def test_an_eager_gather_counts_the_rows_it_reads_and_its_output_not_the_table():
    """Decode's one-token embedding on a 32,000-row table: 8 KB read and written, not 262 MB.
    On CUDA the kernel's launcher is the index_select inside, whose dim is a concrete input."""
    one_row = ROW * 2
    embedding = _op("aten::embedding", [[32000, ROW], [1, 1], [], [], []], [BF16, I64])
    assert profiling.launcher_bytes(embedding, 2) == one_row + 8 + one_row
    select = _op("aten::index_select", [[32000, ROW], [], [1]], [BF16, "", I64], [None, 0, None])
    assert profiling.launcher_bytes(select, 2) == one_row + 8 + one_row
    # along dim 1, one column of every row
    columns = _op("aten::index_select", [[32000, ROW], [], [1]], [BF16, "", I64], [None, 1])
    assert profiling.launcher_bytes(columns, 2) == 32000 * 2 + 8 + 32000 * 2
    # a dim the profiler did not record: the whole table, as before (no guess)
    unknown = _op("aten::index_select", [[32000, ROW], [], [1]], [BF16, "", I64])
    assert profiling.launcher_bytes(unknown, 2) == 32000 * one_row + 8
    # BERT's token-type table has two rows: read once however many tokens, written per token
    types = _op("aten::embedding", [[2, 768], [1, 128], [], [], []], [BF16, I64])
    assert profiling.launcher_bytes(types, 2) == 2 * 768 * 2 + 128 * 8 + 128 * 768 * 2
    # BERT's token types: 128 of a 512-long buffer gathered
    gather = _op("aten::gather", [[1, 512], [], [1, 128], []], [I64, "", I64, ""])
    assert profiling.launcher_bytes(gather, 8) == 3 * 128 * 8


def test_an_eager_cache_write_counts_the_slots_it_writes():
    """A static KV cache's index_copy_ writes one token's keys into [1, 32, 2048, 128]: the
    slots it writes, not the cache (no output: it writes in place)."""
    token = 32 * 128
    write = _op(
        "aten::index_copy_", [[1, 32, 2048, 128], [], [1], [1, 32, 1, 128]], [BF16, "", I64, BF16]
    )
    assert profiling.launcher_bytes(write, 2) == token * 2 + 8 + token * 2
    assert partial.eager_touched("aten::add", [[4], [4]], []) is None


# a post-grad graph in the form Inductor prints it: an embedding, a slice, two cache writes (one
# read again by the kernel that writes it), and an input both sliced and read whole
GRAPH = """
def forward(self, arg0_1: "i64[1, 128][128, 1]cuda:0", arg1_1: "bf16[30522, 768][768, 1]cuda:0", arg2_1: "bf16[512, 768][768, 1]cuda:0", arg3_1: "bf16[1, 2, 64, 16][2048, 1024, 16, 1]cuda:0", arg4_1: "bf16[1, 2, 64, 16][2048, 1024, 16, 1]cuda:0", arg5_1: "bf16[1, 2, 1, 16][32, 16, 16, 1]cuda:0", arg6_1: "bf16[64, 8][8, 1]cuda:0"):
    embedding: "bf16[1, 128, 768][98304, 768, 1]cuda:0" = torch.ops.aten.embedding.default(arg1_1, arg0_1);  arg1_1 = None
    slice_1: "bf16[128, 768][768, 1]cuda:0" = torch.ops.aten.slice.Tensor(arg2_1, 0, 0, 128);  arg2_1 = None
    add: "bf16[1, 128, 768][98304, 768, 1]cuda:0" = torch.ops.aten.add.Tensor(embedding, slice_1)
    index_put: "bf16[1, 2, 64, 16][2048, 1024, 16, 1]cuda:0" = torch.ops.aten.index_put_.default(arg3_1, [None, None, arg0_1], arg5_1);  arg3_1 = None
    index_put_1: "bf16[1, 2, 64, 16][2048, 1024, 16, 1]cuda:0" = torch.ops.aten.index_put_.default(arg4_1, [None, None, arg0_1], arg5_1);  arg4_1 = None
    mul: "bf16[1, 2, 64, 16][2048, 1024, 16, 1]cuda:0" = torch.ops.aten.mul.Tensor(index_put_1, 2)
    slice_2: "bf16[8, 8][8, 1]cuda:0" = torch.ops.aten.slice.Tensor(arg6_1, 0, 0, 8)
    sum_1: "bf16[8][1]cuda:0" = torch.ops.aten.sum.dim_IntList(arg6_1, [1])
    cat: "bf16[72, 8][8, 1]cuda:0" = torch.ops.aten.cat.default([slice_2, arg6_1])
"""


def test_a_compiled_kernel_is_counted_less_what_its_gathers_slices_and_writes_leave():
    args = ["buf0", "arg0_1", "arg1_1", "arg2_1"]
    table, rows = 30522 * 768 * 2, 128 * 768 * 2
    positions, positions_read = 512 * 768 * 2, 128 * 768 * 2
    untouched = partial.untouched_bytes(GRAPH, ["embedding", "slice_1", "add"], args)
    assert untouched == (table - rows) + (positions - positions_read)
    # the same inputs in a kernel whose nodes do not show the gather: nothing taken off
    assert partial.untouched_bytes(GRAPH, ["add"], args) == 0
    # a cache write: the 2 x 16 values it writes of 2 x 64 x 16 slots...
    cache, written = 2 * 64 * 16 * 2, 2 * 16 * 2
    assert partial.untouched_bytes(GRAPH, ["index_put"], ["arg3_1", "arg5_1"]) == cache - written
    # ...unless the kernel reads the whole cache again after writing it
    assert partial.untouched_bytes(GRAPH, ["index_put_1", "mul"], ["arg4_1", "arg5_1"]) == 0
    # an input sliced and also read whole by the kernel, first or later: all of it is read
    assert partial.untouched_bytes(GRAPH, ["slice_2", "sum_1"], ["arg6_1"]) == 0
    assert partial.untouched_bytes(GRAPH, ["slice_2", "cat"], ["arg6_1"]) == 0
    assert partial.untouched_bytes(GRAPH, ["slice_2"], ["arg6_1"]) == (64 - 8) * 8 * 2


def test_the_kernel_map_takes_the_untouched_part_off_the_profilers_figure_and_says_so():
    """BERT's embedding kernel under default on the H200: its Triton launch recorded the whole
    word table (47.9 MB); it reads 128 rows of it."""
    graph = {
        "post_grad_graph": GRAPH,
        "node_mappings": {"cppCodeToPost": {"triton_per_fused_embedding_0:1": ["embedding"]}},
        "output_code": (
            "def call(args):\n"
            "    # [Provenance debug handles] triton_per_fused_embedding_0:1\n"
            "    triton_per_fused_embedding_0.run(buf0, arg0_1, arg1_1, 98304, stream=stream0)\n"
        ),
    }
    recorded = 30522 * 768 * 2 + 128 * 8 + 128 * 768 * 2
    kernel = {
        "name": "triton_per_fused_embedding_0",
        "launcher": "triton_per_fused_embedding_0",
        "calls_per_forward": 1,
        "device_ms": 0.01,
        "bytes": recorded,
    }
    forward = {"forward_device_ms": 0.01, "kernels": [kernel]}
    (record,) = kernelmap.build_map(forward, {"0/0": graph}, {}, "", True)
    assert record["bytes"] == 128 * 8 + 2 * 128 * 768 * 2
    assert record["bytes_from"] == f"{kernelmap.PROFILER_BYTES_FROM}, {partial.UNTOUCHED_FROM}"
