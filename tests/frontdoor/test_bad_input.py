"""Values a user can type that must be refused up front, in one line, exit 2, before any
process starts or any directory is written."""

import pytest

from tests.report.test_null_figures import _cli

CPU_TOML = 'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x16x8"]\ndevice = "cpu"\n'


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--seed", "99999999999999999999999"], "from 0 to 2**63-1"),
        (["run", "--seed", "-1"], "from 0 to 2**63-1"),
        (["run", "--shape", ""], "malformed shape ''"),
        (["run", "--dtype", ""], "unknown dtype ''"),
        (["sweep", "{toml}", "--gpus", "abc"], "give CUDA device indices"),
        (["sweep", "{toml}", "--gpus", "0"], "has no CUDA cells"),
        (["sweep", "{big_seed}"], "from 0 to 2**63-1"),
        (["run", "--alloc", "expandable_segments:True"], "a cpu cell has none: drop --alloc"),
        (["run", "--alloc", "expandable"], "give key:value pairs of PYTORCH_CUDA_ALLOC_CONF"),
        (["sweep", "{bad_alloc}"], "allocator setting 'max_split:64'"),
    ],
)
def test_bad_values_are_refused_in_one_line(args, needle, tmp_path):
    files = {"toml": CPU_TOML, "big_seed": CPU_TOML + "seed = 99999999999999999999999\n",
             "bad_alloc": CPU_TOML + 'allocs = ["max_split:64"]\n'}  # fmt: skip
    for name, text in files.items():
        (tmp_path / f"{name}.toml").write_text(text)
    args = [a.format(**{n: str(tmp_path / f"{n}.toml") for n in files}) for a in args]
    out = tmp_path / "out"
    code, err = _cli(*args, "--out", str(out), *(["--device", "cpu"] if args[0] == "run" else []))
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_cuda_experiment_without_a_gpu_names_the_files_key(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    (tmp_path / "gpu.toml").write_text(CPU_TOML.replace('"cpu"', '"cuda"'))
    code, err = _cli("sweep", str(tmp_path / "gpu.toml"), "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert 'gpu.toml: device = "cuda" but torch sees no CUDA GPU' in err
    assert 'copy it with device = "cpu"' in err and "DEVICE=" not in err


@pytest.mark.parametrize("target, needle", [("kernels", "RUN=runs/<cell>"), ("html-diff", "A=")])
def test_a_make_target_without_its_path_names_the_variable(target, needle):
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run(
        ["make", "-s", target, "RUN=", "A=", "B=", f"PYTHON={sys.executable}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and f"make {target}: give {needle}" in proc.stderr, proc.stderr
    assert "compilekit: error" not in proc.stderr  # compilekit never ran on an empty path


def test_a_variant_that_hangs_at_import_is_bounded_by_the_cells_timeout(tmp_path):
    import time

    (tmp_path / "slow.py").write_text(
        "import time\ntime.sleep(30)\n\ndef attention(q, k, v):\n    return q\n"
    )
    start = time.perf_counter()
    code, err = _cli("run", "--variant", f"{tmp_path / 'slow.py'}:attention", "--mode", "eager",
                     "--device", "cpu", "--timeout", "1", "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 2 and "still importing after 1 s" in err, err
    assert time.perf_counter() - start < 10
    assert not (tmp_path / "out").exists()


def test_an_experiment_over_the_cell_cap_is_refused_in_one_line(tmp_path):
    from compilekit.userexperiment import MAX_CELLS, load_experiment

    def experiment(n_shapes):
        shapes = ", ".join(f'"1x2x{s}x8"' for s in range(16, 16 + n_shapes))
        path = tmp_path / f"e{n_shapes}.toml"
        path.write_text(
            f'variants = ["naive", "sdpa"]\nmodes = ["eager", "default"]\n'
            f'shapes = [{shapes}]\ndevice = "cpu"\n'
        )
        return str(path)

    assert len(load_experiment(experiment(MAX_CELLS // 4)).cells) == MAX_CELLS
    code, err = _cli("sweep", experiment(9000), "--out", str(tmp_path / "out"))
    assert code == 2 and "over 10,000 cells" in err and "split it" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
