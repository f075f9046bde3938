"""The sweep page: per shape (and config) a variants x modes matrix colored by speedup and
status, the cells not measured or not correct, the plots and the full table; and `compilekit
html PATH`, which draws a run's page or a sweep's. A sweep page links to run pages instead of
inlining kernels, so it stays small for hundreds of cells."""

from __future__ import annotations

import glob
import os
import sys
from collections import defaultdict

from compilekit.model import result as results_mod
from compilekit.model.errors import UserError
from compilekit.model.spec import parse_shape
from compilekit.model.store import kept, write_text
from compilekit.report import baselines, cellview, decodeview, pages, sweepreport


def speed_class(r) -> str:
    if r.status in ("failed", "wrong"):
        return "bad"
    if r.status == "unsupported":
        return "unsupported"
    speedup = cellview.paced_speedup(r)  # a host-bound cell's: a user's loop
    if speedup is None or r.mode == "eager":
        return "neutral"
    if speedup >= 1.5:
        return "fast2"
    if speedup >= 1.05:
        return "fast1"
    if speedup <= 1 / 1.5:
        return "slow2"
    if speedup <= 1 / 1.05:
        return "slow1"
    return "neutral"


def sweep_groups(results: list, out_dir: str) -> list[dict]:
    """One matrix per (shape, dtype, device, config, passes): variants down, modes across (a
    cell that differs from another only in its pass gets its own matrix, not the other's
    place)."""
    from compilekit.compile.modes import MODES

    groups = defaultdict(list)
    for r in results:
        passes = cellview.passes_name(r) if r.passes else ""
        groups[(r.shape, r.dtype, r.device, r.config_name, passes)].append(r)
    out = []

    def order(key):  # shapes by size (S, then D, B, H), not as strings
        shape = parse_shape(key[0])
        return (shape.seq, shape.head_dim, shape.batch, shape.heads, *key[1:])

    for (shape, dtype, device, config, passes), cells in sorted(
        groups.items(), key=lambda kv: order(kv[0])
    ):
        modes = sorted({r.mode for r in cells}, key=lambda m: list(MODES).index(m))
        variants = list(dict.fromkeys(cellview.variant_name(r) for r in cells))
        grid = {(cellview.variant_name(r), r.mode): r for r in cells}
        rows = []
        for v in variants:
            row = []
            for m in modes:
                r = grid.get((v, m))
                if r is None:
                    row.append(None)
                    continue
                row.append(
                    {
                        "r": r,
                        "speedup": cellview.paced_speedup(r),
                        "css": speed_class(r),
                        "href": run_href(out_dir, r.label),
                    }
                )
            rows.append((v, row))
        title = (
            f"{shape} {dtype} {device}"
            + (f", config {config}" if config else "")
            + (f", pass {passes}" if passes else "")
        )
        out.append({"title": title, "modes": modes, "rows": rows, "count": len(cells)})
    return out


def images_beside(out_dir: str) -> list[str]:
    """The plots beside the page (speedup.png, ...), by file name: the page shows them from
    its own folder (embedded, they would weigh a third more than the files, and a published
    sweep would carry each twice)."""
    return [os.path.basename(p) for p in sorted(glob.glob(os.path.join(out_dir, "*.png")))]


def run_href(out_dir: str, label: str) -> str:
    """A cell's link from its sweep's page: its run page, or its result.json (gzipped in a
    published sweep) where it has none (a published sweep keeps a few run pages)."""
    page = os.path.join(label, pages.PAGE)
    if os.path.isfile(os.path.join(out_dir, page)):
        return page
    return os.path.relpath(kept(os.path.join(out_dir, label, "result.json")), out_dir)


def sweep_page(out_dir: str, log=None, refresh_runs: bool = False, run_pages: bool = True) -> str:
    """Render out_dir/index.html for a sweep (or any directory of run directories); each cell's
    page too where it is missing (every one with refresh_runs; none without run_pages), so the
    matrix links land."""
    log = log or sys.stderr  # the stderr of the call, not of the import
    results = sweepreport.load_results(out_dir, log=log)
    unwritten = []
    for r in results if run_pages else []:
        # a published cell (publish gzips its result) gets a page from `compilekit html` only:
        # `compilekit report` on a published folder refreshes REPORT.md and this page
        published = not os.path.isfile(os.path.join(r.run_dir, "result.json"))
        if refresh_runs or not (published or os.path.isfile(os.path.join(r.run_dir, pages.PAGE))):
            if pages.write_quietly(pages.run_page, r.run_dir, log=None) is None:
                unwritten.append(r.label)
    if unwritten:
        print(
            f"compilekit: no run page for {len(unwritten)} cell(s) (the first: {unwritten[0]}); "
            f"`compilekit html {os.path.join(out_dir, unwritten[0])}` says why",
            file=log,
        )
    env = sweepreport.load_env(out_dir, log)
    problems = [
        r for r in results if r.status in ("wrong", "unsupported", "failed") or r.eager_note
    ]
    html = pages.render(
        "sweep.html.j2",
        title=f"sweep {os.path.basename(os.path.abspath(out_dir))}",
        env=env,
        groups=sweep_groups(results, out_dir),
        headers=cellview.headers(results),
        table=cellview.rows(results, env.get("ceilings", {}).get("matmul_tflops")),
        labels=[r.label for r in results],
        problems=problems,
        mix=sweepreport.machine_mix(results),
        counts=[
            (s, n) for s in results_mod.STATUSES if (n := sum(r.status == s for r in results))
        ],
        images=images_beside(out_dir),
        name=cellview.variant_name,
        against=baselines.comparisons(results, baselines.load(out_dir, log)),
        against_intro=baselines.INTRO,
        decode=decodeview.cells(results),
        decode_headers=decodeview.HEADERS,
        decode_intro=decodeview.SECTION_INTRO,
        setting=cellview.setting_name,
        href=lambda label: run_href(out_dir, label),
    )
    path = os.path.join(out_dir, pages.PAGE)
    write_text(path, html)
    return path


def page_for(path: str) -> str:
    """`compilekit html PATH`: a run directory's page, or a sweep directory's."""
    if os.path.isfile(kept(os.path.join(path, "result.json"))):
        return pages.run_page(path)
    if os.path.isdir(path):
        return sweep_page(path, refresh_runs=True)
    raise UserError(f"{path!r} is not a directory: give a run or sweep directory")
