"""`compilekit publish SWEEP DEST`: a sweep measured elsewhere (the H200), made small enough to
commit and share, with every figure still checkable.

Per cell it keeps result.json, kernels.json, ops.json (the op cost matrix) and a CUDA cell's
memory_timeline.json, each gzipped (kernels.json.gz, ...: every reader takes them as it takes
the plain ones), and the records of the runs kept in attempts/; then it
renders REPORT.md, the plots and the sweep page with this checkout's code. Run pages come only
for the cells named with --page, and generated code only for those named with --code: traces,
depyf dumps, TORCH_TRACE logs, logs and kernel sources stay behind (a reader regenerates every
run page with `compilekit html DEST`). The figures derived from a cell's stored kernel map
(each kernel's roofline place against the sweep's measured ceilings, the roofline split, the
CUDA-graph replay breakdown, whether Inductor's attention rewrite left the pattern) and the
host-bound judgement are derived again from the same measured inputs, so a fix to how they are
read reaches published results without a re-run; each changed cell is named.

It never deletes what it did not write. DEST must be new, empty, or an earlier publication
(marked by MARK, which lists the files that publication wrote); never the sweep itself, inside
it, or holding it. Every argument is checked before anything is written; the publication is
built in a staging folder beside DEST and swapped in at the end, so a failure leaves the old
one whole. From an earlier publication the new one keeps README.md (prose about the results)
and every file that publication did not write, and gives again the run pages (and code) it
had.
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import tempfile

from compilekit.evidence import diagnose, kernelmap, roofline
from compilekit.model import result as results_mod
from compilekit.model.errors import UserError
from compilekit.model.spec import MODEL_SHAPE_RE
from compilekit.model.store import (
    CorruptFile,
    check_writable,
    kept,
    read_json,
    write_json,
    write_json_gz,
)
from compilekit.report import pages, sweeppage, sweepreport

CELL_FILES = (
    "result.json", "result.json.gz", "kernels.json", "kernels.json.gz", "ops.json", "ops.json.gz",
    # a CUDA cell's forward over time (its snapshot pickle stays behind)
    "memory_timeline.json", "memory_timeline.json.gz",
    # the other runs a result lists (a failed rerun, a noisy timing): their records only
    "attempts/*/result.json", "attempts/*/attempts/*/result.json",
)  # fmt: skip
CODE_FILES = ("output_code*.py", "kernels/*")
TOP_FILES = ("env.json", "sweep.json")
# A publication's mark: {"files": [every path it wrote, relative to it]}
MARK = ".compilekit-publication.json"


def copy_matching(src: str, dst: str, patterns) -> None:
    for pattern in patterns:
        for path in glob.glob(os.path.join(src, pattern)):
            target = os.path.join(dst, os.path.relpath(path, src))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(path, target)


def drop_side_memsets(records: list[dict]) -> None:
    """Kernel maps measured before the longest-kernel rule (profiling.forward_kernels) gave
    every kernel of an op the op's bytes and FLOPs: a cuBLAS or cuDNN workspace memset read as
    moving the whole op's tensors. Such a memset carries neither now; a fill's own memset keeps
    its bytes."""
    for record in records:
        if record["name"].startswith("Memset") and not record["launcher"].endswith(
            ("fill_", "zero_")
        ):
            record["bytes"] = record["flops"] = None


def rederive(run_dir: str, ceilings: dict | None) -> bool:
    """Derive the roofline (per kernel, against the sweep's measured ceilings), its summary line,
    the replay breakdown and the host-bound judgement again from run_dir's kernel map and
    record; True when any changed."""
    result = results_mod.load(run_dir)
    kmap_path = os.path.join(run_dir, "kernels.json")  # written plain; publish gzips it
    if not result.measured or not os.path.isfile(kept(kmap_path)):
        return False
    kmap = read_json(kmap_path)
    records = kmap["kernels"]

    def derived():  # what this function may change, as a copy
        judged = [result.gpu_busy_share, result.host_bound, result.attention_rewrite]
        return json.loads(json.dumps([result.replay, result.roofline, judged, records]))

    before = derived()
    drop_side_memsets(records)
    # maps measured before launches of one kernel and site were merged: the same rows, smaller
    records[:] = kernelmap.merge_repeats(records)
    kmap["by_source_line"] = kernelmap.by_source_line(records)
    if ceilings:
        # a model's declared FLOPs are its whole forward's, no one kernel's (evidence/gather.py)
        flops = None if MODEL_SHAPE_RE.match(result.shape) else result.flops
        roofline.annotate(records, ceilings, flops, kmap.get("io_bytes"))
    write_json(kmap_path, kmap)
    result.roofline = roofline.summary(records)
    diagnose.judge_host_bound(result)
    diagnose.judge_attention_rewrite(result, records)
    if result.replay:
        old = result.replay
        tree = {k: old[k] for k in ("recordings", "rerecords") if k in old}
        result.replay = diagnose.replay_breakdown(
            records, old["host_ms_per_call"], tree or None, old["inputs_recorded_non_static"]
        )
        result.replay["bytes_dtypes"] = old.get("bytes_dtypes")
    if _close(derived(), before):
        return False
    result.save(run_dir)
    return True


def _close(a, b) -> bool:
    """a == b, a float within a relative 1e-9 of the other (a sum taken in another order)."""
    if isinstance(a, float) or isinstance(b, float):
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
        return numbers and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_close, a, b))
    return a == b


def publish(
    sweep_dir: str, dest: str, page_cells=(), code_cells=(), extras=(), log=print
) -> list[str]:
    """Publish sweep_dir into dest (see the module's docstring); returns the cells whose
    derived figures changed. page_cells and code_cells: labels of cells that keep a run page,
    and their generated code too. UserError, before anything is written, for a destination it
    may not replace and for any argument that names nothing."""
    cells = _cells(sweep_dir, page_cells, code_cells)
    for extra in extras:
        if not os.path.isfile(extra):
            raise UserError(f"--extra {extra!r} is not a file: name a file to copy beside")
    kept_files, mark = _kept_from_earlier(sweep_dir, dest)
    page_cells, code_cells = _with_earlier_pages(mark, cells, page_cells, code_cells, log)
    # an earlier publication's --extra files go on beside the new one, unless given again
    given = {os.path.basename(e) for e in extras}
    earlier = [os.path.join(dest, n) for n in mark.get("extras") or [] if n not in given]
    extras = list(extras) + [path for path in earlier if os.path.isfile(path)]
    dest = os.path.abspath(dest)
    check_writable(os.path.dirname(dest), "the folder of DEST", "publish somewhere else")
    # the staged folder carries DEST's own name: REPORT.md and the page are titled by it
    staging = tempfile.mkdtemp(prefix=".publishing-", dir=os.path.dirname(dest))
    try:
        staged = os.path.join(staging, os.path.basename(dest))
        # what it writes is said where it will be, not where it is staged
        said = lambda text: log(text.replace(staged, dest))  # noqa: E731
        changed = _write(sweep_dir, staged, cells, page_cells, code_cells, extras, said)
        written = _files(staged)
        clash = sorted(set(written) & set(kept_files))
        if clash:
            raise UserError(
                f"{os.path.join(dest, clash[0])!r} is not the earlier publication's, and this one "
                "writes a file by that name: move it out of DEST, then publish again"
            )
        for rel in kept_files:
            target = os.path.join(staged, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.join(dest, rel), target)
        names = sorted(os.path.basename(e) for e in extras)
        write_json(os.path.join(staged, MARK), {"files": sorted(written), "extras": names})
        _swap(staged, dest, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"page: {os.path.join(dest, 'index.html')}")
    return changed


def _cells(sweep_dir: str, page_cells, code_cells) -> list[str]:
    """The sweep's cells (run directories holding a result), each named cell among them."""
    found = os.listdir(sweep_dir) if os.path.isdir(sweep_dir) else []
    cells = sorted(
        d for d in found if os.path.isfile(kept(os.path.join(sweep_dir, d, "result.json")))
    )
    if not cells:
        raise UserError(f"no cell results under {sweep_dir!r}: give the OUT of a sweep")
    unknown = sorted((set(page_cells) | set(code_cells)) - set(cells))
    if unknown:
        raise UserError(f"no cell {unknown[0]!r} in {sweep_dir}: name a run directory there")
    return cells


def _kept_from_earlier(sweep_dir: str, dest: str) -> tuple[list[str], dict]:
    """The files of an earlier publication at dest that the new one keeps (README.md and what
    that publication did not write), and its mark ({} where there is none); UserError where
    dest may not be replaced."""
    source, target = (os.path.realpath(p) for p in (sweep_dir, dest))
    if source == target or target.startswith(source + os.sep):
        raise UserError(
            f"{dest!r} is the sweep or inside it, and publishing replaces it: "
            "publish into a new folder beside the sweep"
        )
    if source.startswith(target + os.sep):
        raise UserError(
            f"{dest!r} holds the sweep {sweep_dir!r}, and publishing replaces it: "
            "publish into a new folder"
        )
    if not os.path.exists(dest):
        return [], {}
    if not os.path.isdir(dest):
        raise UserError(f"{dest!r} is a file: publish into a new folder")
    found = _files(dest)
    if found in ([], ["README.md"]):  # prose written before the first publication
        return found, {}
    try:
        mark = read_json(os.path.join(dest, MARK))
        wrote = set(mark["files"])
    except (CorruptFile, KeyError, TypeError):
        raise UserError(
            f"{dest!r} holds files and no earlier publication: publish into a new or empty "
            "folder (publishing replaces the folder's contents)"
        ) from None
    return sorted(rel for rel in found if rel not in wrote and rel != MARK), mark


def _with_earlier_pages(mark: dict, cells, page_cells, code_cells, log) -> tuple[set, set]:
    """The cells to give a run page, and generated code: those asked, and those the earlier
    publication whose mark this is gave them (publishing a sweep again keeps its pages without
    naming them again), where the sweep still has the cell."""
    pages_, code = set(page_cells), set(code_cells)
    wrote = set(mark.get("files", []))
    for cell in sorted(set(cells) - pages_ - code):
        if any(rel.startswith(f"{cell}{os.sep}output_code") for rel in wrote):
            code.add(cell)
        elif f"{cell}{os.sep}index.html" in wrote:
            pages_.add(cell)
        else:
            continue
        log(f"kept from the earlier publication: {cell}'s run page")
    return pages_, code


def _files(folder: str) -> list[str]:
    """Every file under folder, relative to it."""
    return [
        os.path.relpath(os.path.join(root, name), folder)
        for root, _, names in os.walk(folder)
        for name in names
    ]


def _swap(staged: str, dest: str, staging: str) -> None:
    """Put the staged publication at dest; the earlier one goes only once the new one is there."""
    old = os.path.join(staging, ".earlier")
    if os.path.isdir(dest):
        os.rename(dest, old)
    try:
        os.rename(staged, dest)
    except OSError:
        if os.path.isdir(old):
            os.rename(old, dest)
        raise


def _write(sweep_dir, dest, cells, page_cells, code_cells, extras, log) -> list[str]:
    """The publication's files, written into dest (a new folder); the cells re-derived."""
    os.makedirs(dest)
    copy_matching(sweep_dir, dest, TOP_FILES)
    for extra in extras:
        shutil.copy2(extra, dest)
    ceilings = sweepreport.load_env(dest).get("ceilings")
    changed = []
    for cell in cells:
        os.makedirs(os.path.join(dest, cell))
        wanted = CELL_FILES + (CODE_FILES if cell in code_cells else ())
        copy_matching(os.path.join(sweep_dir, cell), os.path.join(dest, cell), wanted)
        if rederive(os.path.join(dest, cell), ceilings):
            changed.append(cell)
        # a model's kernel map holds every kernel's source stack, its op table every op; and a
        # cell's record, indented, is most of what a sweep of small kernel maps publishes
        for name in ("kernels.json", "ops.json", "result.json", "memory_timeline.json"):
            path = os.path.join(dest, cell, name)
            if os.path.isfile(path):
                write_json_gz(path, read_json(path))
    for cell in changed:
        log(f"re-derived from its kernel map: {cell}")
    log(sweepreport.report(dest))
    for cell in sorted(set(page_cells) | set(code_cells)):
        pages.run_page(os.path.join(dest, cell))
    sweeppage.sweep_page(dest, run_pages=False)
    return changed
