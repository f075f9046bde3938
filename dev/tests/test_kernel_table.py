"""dev/kernel_table.py: the judged shapes' table reads each cell's result, cuDNN's time over the
path's, compiled over eager (with the static config's cells), and takes reduce-overhead apart
from the kernel maps' figures. Not part of `make test`
(dev/ is the lab): `python -m pytest dev/tests`."""

import gzip
import json
import os

import kernel_table


def _cell(folder, variant, mode, shape, ms, config="", **more):
    cfg = f"__cfg-{config}" if config else ""
    cell = os.path.join(folder, f"{variant}__{mode}__{shape}__bfloat16__cuda{cfg}")
    os.makedirs(cell)
    record = {"status": "ok", "compiled_ms": ms, **more}
    with gzip.open(os.path.join(cell, "result.json.gz"), "wt") as f:
        json.dump(record, f)


def test_ratios_to_cudnn_and_the_graph_taken_apart(tmp_path, capsys):
    shape = kernel_table.JUDGED[0]
    _cell(tmp_path, "sdpa-cudnn", "eager", shape, 0.1, tflops=250.4)
    _cell(
        tmp_path, "triton-flash", "eager", shape, 0.05, tflops=500.6,
        profiled_forward_device_ms=0.04,
    )  # fmt: skip
    _cell(
        tmp_path, "triton-flash", "reduce-overhead", shape, 0.2,
        replay={"graph_gpu_ms": 0.05, "input_copy_ms": 0.03},
    )  # fmt: skip
    _cell(tmp_path, "triton-flash", "reduce-overhead", shape, 0.055, config="static")
    _cell(tmp_path, "gluon-flash", "eager", shape, 0.1)
    (tmp_path / f"gluon-flash__default__{shape}__bfloat16__cuda").mkdir()  # no result: "-"
    kernel_table.main(str(tmp_path))
    first, compiled, second = capsys.readouterr().out.strip().split("\n\n")
    header, _, row = first.splitlines()[:3]
    cells = dict(zip(header.split(" | "), row.split(" | ")))
    assert cells["cuDNN ms (TFLOP/s)"] == "0.1000 (250)"
    assert cells["triton-flash eager"] == "2.00 (501)"
    assert cells["triton-flash reduce-overhead"] == "0.50"
    assert cells["gluon-flash eager"] == "1.00"
    assert cells["gluon-flash default"] == "-"
    # compiled over eager: default missing, reduce-overhead with its copies, and inputs static
    assert compiled.splitlines()[2:] == [
        f"| {shape} | triton-flash | 0.0500 | - | 4.00 | 1.10 |",
        f"| {shape} | gluon-flash | 0.1000 | - | - | - |",
    ]
    rows = second.splitlines()[2:]
    assert rows == [f"| {shape} | triton-flash | 0.0400 | 0.0500 | 1.25 | 0.0300 |"]


def test_the_gqa_rows_say_how_their_kv_heads_were_made_and_unmeasured_rows_are_left_out(
    tmp_path, capsys
):
    for shape in kernel_table.GQA:
        _cell(tmp_path, "sdpa-gqa", "eager", shape, 0.3)
        _cell(tmp_path, "gluon-flash-gqa", "eager", shape, 0.25)
    kernel_table.main(str(tmp_path))
    first = capsys.readouterr().out.strip().split("\n\n")[0].splitlines()[2:]
    assert [row.split(" | ")[0] for row in first] == [
        "| 1x32g8x4096x128 GQA 32/8",
        "| 1x32x4096x128 GQA 32/8, K/V sliced per call",
    ]
    assert all(" | 1.20 | " in row for row in first)
