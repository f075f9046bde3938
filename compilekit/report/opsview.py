"""The op cost matrix of a run (`compilekit ops RUN`): each op's device and CPU time per forward
and what it allocated, ranked by time or by memory, with the forward's peak memory."""

from __future__ import annotations

import os

from tabulate import tabulate

from compilekit.model import result as results
from compilekit.model.errors import UserError
from compilekit.model.store import CorruptFile, kept, read_json

RANKS = {"time": "self_time_ms", "memory": "allocated_mb"}
# under the per-cell lines of summary_line (REPORT.md)
READING = (
    'On a GPU, "kernels by time" names kernels only: an op\'s self time holds the kernels it '
    'launched, so naming both would count them twice. A line "by time" on a GPU is from a '
    "cell measured before ops.json marked each row's kind: ops and kernels together, and each "
    "Triton kernel Inductor launched outside a CUDA graph counted twice (with the launch of its "
    "name). `compilekit ops RUN --by time|memory [--kind op|kernel]` has the whole table."
)


def _check_by(by: str) -> None:
    if by not in RANKS:
        raise UserError(f"rank ops by {by!r}? choose one of {', '.join(RANKS)}")


def kind(row: dict, cuda: bool) -> str:
    """ "kernel" for a device-side row (a kernel or a copy: its time also counts in the self time
    of the op that launched it), "op" for the rest. ops.json files written before rows carried
    their kind: a CUDA row with device time and no CPU time is a kernel (in those files a
    kernel Inductor launched and the CPU range of its launch, which has the kernel's name, are
    one row, its calls and device time counted twice: an op here)."""
    if "kind" in row:
        return row["kind"]
    return "kernel" if cuda and row["self_device_ms"] > 0 and not row["self_cpu_ms"] else "op"


def rank(rows: list[dict], by: str, cuda: bool) -> list[dict]:
    """Rows of an op cost matrix with self_time_ms (device time on CUDA, CPU time on a CPU) and
    their kind, largest first by `by` (time or memory)."""
    _check_by(by)
    rows = [
        {
            **r,
            "self_time_ms": r["self_device_ms"] if cuda else r["self_cpu_ms"],
            "kind": kind(r, cuda),
        }
        for r in rows
    ]
    return sorted(rows, key=lambda r: -(r.get(RANKS[by]) or 0.0))


def ops_rows(run_dir: str, by: str = "time") -> list[dict]:
    """The run's ops.json rows, ranked (rank)."""
    _check_by(by)  # before the file: a typo is named whatever the run holds
    rows = _read_rows(run_dir)
    return rank(rows, by, any(r.get("self_device_ms") for r in rows))


def _read_rows(run_dir: str) -> list[dict]:
    path = kept(os.path.join(run_dir, "ops.json"))
    if not os.path.isfile(path):
        raise results.missing_figures(
            run_dir, results.read_run(run_dir), "op cost matrix", "ops.json"
        )
    try:
        return read_json(path)
    except CorruptFile as exc:
        raise UserError(str(exc)) from None


KINDS = ("op", "kernel")


def check_top(top) -> None:
    """UserError unless `top` is a count of rows to show (a negative one sliced all but some)."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise UserError(f"top {top!r}: give how many rows to show, 1 or more (--top N)")


def ops_view(run_dir: str, by: str = "time", top: int = 20, only: str | None = None) -> str:
    """The cost matrix of a run as a table: the `top` ops by time or memory (`only` one kind:
    op or kernel), and the peak."""
    check_top(top)
    if only is not None and only not in KINDS:
        raise UserError(f"show rows of kind {only!r}? choose one of {', '.join(KINDS)}")
    result = results.read_run(run_dir)
    rows = [r for r in ops_rows(run_dir, by) if only in (None, r["kind"])]
    what = f"{only}s" if only else "ops"
    title = (
        f"{result.variant} / {result.mode} / {result.shape}: {what} ranked by {by}, per forward"
    )
    cuda = result.device == "cuda"
    from compilekit.report.memoryview import under_ops

    table_text = table(rows[:top], cuda, result.peak_memory_mb)
    return title + "\n\n" + table_text + under_ops(result.memory, by)


def table(rows: list[dict], cuda: bool, peak_memory_mb: float | None) -> str:
    """Ranked rows as text, with the peak memory line. On the CPU an op's own time is its CPU
    time and there is no device time: one time column, not the same figure twice beside a
    column of dashes."""

    def line(r: dict) -> list:
        times = (
            [f"{r['self_time_ms']:.4f}", f"{r.get('device_ms', 0):.4f}", f"{r['self_cpu_ms']:.4f}"]
            if cuda
            else [f"{r['self_cpu_ms']:.4f}"]
        )
        memory = f"{r['allocated_mb']:.2f}" if r.get("allocated_mb") else "-"
        return [r["name"][:60], r["kind"], f"{r['calls_per_forward']:g}", *times,
                f"{r['share']:.0%}", memory]  # fmt: skip

    times = ["self device ms", "total device ms", "self CPU ms"] if cuda else ["self CPU ms"]
    head = ["op", "kind", "calls/fwd", *times, "share", "allocated MiB"]
    lines = [line(r) for r in rows]
    peak = (
        f"peak memory of a forward: {peak_memory_mb:.1f} MiB"
        if peak_memory_mb is not None
        else "peak memory: measured on CUDA only (torch keeps no peak for the CPU allocator)"
    )
    return tabulate(lines, headers=head) + "\n\n" + peak


def ranked_both(run_dir: str, cuda: bool, top: int) -> dict | None:
    """{"time": rows, "memory": rows}: the `top` ops by each, from run_dir/ops.json (memory:
    only ops that allocated); None where the run has no readable ops.json."""
    try:
        rows = ops_rows(run_dir)
    except UserError:
        return None
    return rank_both(rows, cuda, top)


def rank_both(rows: list[dict], cuda: bool, top: int) -> dict:
    """{"time": rows, "memory": rows}: the `top` ops of a cost matrix by each (memory: only
    ops that allocated)."""
    by_memory = [r for r in rank(rows, "memory", cuda) if r.get("allocated_mb")]
    return {"time": rank(rows, "time", cuda)[:top], "memory": by_memory[:top]}


def summary_line(run_dir: str, cuda: bool, top: int = 3) -> str | None:
    """The `top` ops by time and by memory in one line (REPORT.md), or None without ops.json.
    On CUDA its time is the kernels': each kernel's time is also its launching op's self time,
    so a list of both would name the same time twice (an op and its one kernel, or a CUDA
    graph's replay and every kernel in it). A file written before rows carried their kind gets
    the line it had: its kernels cannot all be told from their launches."""
    try:
        raw = _read_rows(run_dir)
    except UserError:
        return None
    rows = rank(raw, "time", cuda)
    kernels = cuda and all("kind" in r for r in raw)
    by_time = [r for r in rows if r["kind"] == "kernel"] if kernels else rows
    both = {**rank_both(rows, cuda, top), "time": by_time[:top]}
    text = ("kernels by time " if kernels else "by time ") + ", ".join(
        f"`{r['name'][:50]}` {r['self_time_ms']:.3g} ms" for r in both["time"]
    )
    if both["memory"]:
        text += "; by memory " + ", ".join(
            f"`{r['name'][:50]}` {r['allocated_mb']:.3g} MiB" for r in both["memory"]
        )
    return text
