"""Custom graph passes per cell: loaded from the user's file, installed at joint_custom_pre_pass
on the running torch, counted in a compile that really ran, refused with one line when broken."""

import pytest

COUNT_BMM = '''
import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files


class CountBmm(CustomGraphPass):
    """Counts the batched matmuls it sees; changes nothing."""

    def __init__(self):
        self.matches = 0

    def __call__(self, graph):
        self.matches += sum(1 for n in graph.nodes if n.target == torch.ops.aten.bmm.default)

    def uuid(self):
        return get_hash_for_files((__file__,))


def count_bmm():
    return CountBmm()


class Broken(CountBmm):
    def __call__(self, graph):
        raise ValueError("my pass cannot handle this graph")


def broken():
    return Broken()


def not_a_pass():
    return 42
'''


@pytest.fixture(scope="module")
def pass_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("passes") / "mypasses.py"
    path.write_text(COUNT_BMM)
    return str(path)


def _run_with(cli, tmp_path, spec: str, shape: str):
    return cli(
        "run", "--variant", "naive", "--mode", "default", "--device", "cpu",
        "--shape", shape, "--pass", spec, "--out", str(tmp_path),
    )  # fmt: skip


def test_passes_run_in_a_real_compile_in_order_and_are_counted(pass_file, cli, tmp_path):
    """A user's pass, then the shipped naive-to-sdpa, on naive-inline in one real compile."""
    import json

    import compilekit

    proc = cli(
        "run", "--variant", "naive-inline", "--mode", "default", "--device", "cpu",
        "--shape", "1x4x128x32", "--pass", f"{pass_file}:count_bmm", "--pass", "naive-to-sdpa",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = [str(p) for p in tmp_path.iterdir() if "__pass-mypasses.count_bmm-" in p.name]
    assert run_dir.endswith("+naive-to-sdpa")
    result = compilekit.load(run_dir)
    assert result.status == "ok", result.reason  # within fp32's bound of float64
    counted = result.pass_stats[f"{pass_file}:count_bmm"]
    # the two matmuls reach the joint graph as two bmm; the counting pass changed nothing
    assert counted["invocations"] >= 1 and counted["matches"] == 2
    assert counted["graphs_changed"] == 0
    rewrote = result.pass_stats["naive-to-sdpa"]
    assert rewrote["matches"] == 1 and rewrote["graphs_changed"] >= 1
    assert "pass mypasses.py:count_bmm: ran" in proc.stdout
    assert "pass naive-to-sdpa: ran" in proc.stdout
    with open(f"{run_dir}/kernels.json") as f:
        names = [k["name"] for k in json.load(f)["kernels"]]
    assert any("scaled_dot_product" in n for n in names) and "aten::bmm" not in names, names


def test_a_pass_that_raises_fails_the_cell_with_its_words(pass_file, cli, tmp_path):
    proc = _run_with(cli, tmp_path, f"{pass_file}:broken", "1x2x64x16")
    assert proc.returncode == 1
    assert "failed: torch.compile failed" in proc.stdout
    assert "my pass cannot handle this graph" in proc.stdout


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("{f}:nope", "no factory 'nope'"),
        ("{f}:not_a_pass", "returned int, not a CustomGraphPass"),
        ("/no/such/file.py:f", "not found"),
        ("naive-to-nothing", "give one of naive-to-sdpa, or path/to/file.py:factory"),
        ("naive-to-sdpa --mode eager", "graph passes (--pass) do nothing under mode 'eager'"),
    ],
)
def test_bad_passes_are_one_line(spec, needle, pass_file, cli, tmp_path):
    spec, *mode = spec.split(" --mode ")
    proc = cli(
        "run",
        "--mode",
        *(mode or ["default"]),
        "--device",
        "cpu",
        "--pass",
        spec.format(f=pass_file),
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
