"""What experiments/ publishes stands: every experiment loads, and each published REPORT.md is
what this checkout's code makes of the result files beside it (re-run `compilekit publish`
when the report's code changes)."""

import glob
import os
import shutil

import pytest

from tests.conftest import ROOT

PUBLISHED = sorted(glob.glob(os.path.join(ROOT, "experiments", "results", "*", "*", "REPORT.md")))


def test_every_published_sweep_is_under_the_size_a_clone_carries():
    total = sum(
        os.path.getsize(os.path.join(folder, name))
        for folder, _, names in os.walk(os.path.join(ROOT, "experiments", "results"))
        for name in names
    )
    # Eight GPU sweeps and the CPU baseline `make check` gates against take about 3.5 MiB, and
    # memory.toml's 48 cells, gzipped as publish writes them, about 0.9 more; the room above
    # that is for a sweep more, not for raw traces (one trace.json is tens of MiB).
    assert PUBLISHED and total <= 5 * 2**20, total


@pytest.mark.parametrize("report", PUBLISHED, ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_a_published_report_regenerates_from_its_result_files(report, tmp_path):
    from compilekit.report import sweepreport

    source = os.path.dirname(report)
    copy = tmp_path / os.path.basename(source)  # the report is titled by its folder's name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("REPORT.md", "*.png"))
    sweepreport.report(str(copy))
    with open(report) as f:
        assert (copy / "REPORT.md").read_text() == f.read()
