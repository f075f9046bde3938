"""The CUDA caching allocator's settings as a cell option (`--alloc`, an experiment's
`allocs` axis): recorded in the cell, its run directory's name and its cache key, set in the
environment of every process the cell starts, and refused where there is no CUDA allocator."""

import json

from compilekit.launch import cache, runner
from compilekit.model.spec import Cell, parse_shape

ALLOC = "expandable_segments:True"


def _cell(alloc=""):
    return Cell("bert-base", "default", parse_shape("8x128"), "bfloat16", "cuda", alloc=alloc)


def test_the_option_is_in_the_cell_its_name_and_its_cache_key_and_absent_leaves_them():
    plain, expandable = _cell(), _cell(ALLOC)
    assert expandable.label().endswith("__alloc-expandable_segments_True")
    assert Cell.from_dict(json.loads(json.dumps(expandable.to_dict()))) == expandable
    assert cache.key_of(plain) != cache.key_of(expandable)
    # cells without it keep the keys (and compiled caches) they had before it existed
    assert "alloc" not in plain.to_dict() and "alloc" not in plain.label()


def test_every_process_of_the_cell_starts_with_it_in_its_environment(monkeypatch, tmp_path):
    seen = []

    class Recorded:
        pid = 0

        def __init__(self, cmd, env, **kwargs):
            seen.append(env)

    monkeypatch.setattr(runner.subprocess, "Popen", Recorded)
    monkeypatch.setattr(runner.locks, "keep_off_quiet_cores", lambda *a: None)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64")
    for cell in (_cell(ALLOC), _cell()):
        runner._start("measure", cell, str(tmp_path), str(tmp_path), 60, None, None)
    assert seen[0]["PYTORCH_CUDA_ALLOC_CONF"] == ALLOC
    assert seen[1]["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:64"  # the user's own


def test_allocs_is_an_axis_and_a_cpu_cell_with_one_is_unsupported(tmp_path):
    from compilekit.compile import modes
    from compilekit.userexperiment import load_experiment

    toml = tmp_path / "m.toml"
    toml.write_text(
        'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x16x8"]\n'
        f'allocs = ["", "{ALLOC}"]\n'
    )
    cells = load_experiment(str(toml), device_resolver=lambda d: "cpu").cells
    assert [c.alloc for c in cells] == ["", ALLOC]
    assert "a cpu cell has none" in modes.unsupported_reason("eager", "cpu", ALLOC)
    assert modes.unsupported_reason("eager", "cuda", ALLOC) is None
