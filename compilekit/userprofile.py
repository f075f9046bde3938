"""`with compilekit.profile() as p:` around any forward pass, as written (eager, or already
compiled): the op cost matrix by time and memory and the kernel table of that code, without
the cell machinery (no fresh process, no compile of ours, no timing).

    import compilekit
    with compilekit.profile("runs/my-bert") as p:
        model(**inputs)
    print(p.table(by="memory"))
    p.ops, p.kernels          # rows, as in a run's ops.json and kernels.json
    p.lines                   # with profile(lines=True), eager code: time per source line
                              # and runs/my-bert/index.html: both tables, in a browser

The block runs under torch.profiler (CPU, and CUDA where the block used it) with shapes,
FLOPs and memory recorded; its figures are the profiler's for that one pass, hooks included:
for a latency without them, time the code with `compilekit run` or do_bench. On a CPU,
Inductor's C++ kernels show as kernels only in code compiled with
`torch._inductor.config.cpp.enable_kernel_profile = True` (otherwise one compiled region).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings

LABEL = "compilekit.profile"


@dataclasses.dataclass
class Profile:
    """What compilekit.profile() found, filled when the block ends."""

    device: str = "cpu"
    ops: list = dataclasses.field(default_factory=list)  # op cost matrix rows (ops.json)
    kernels: list = dataclasses.field(default_factory=list)  # kernels of the block, in order
    forward_device_ms: float = 0.0  # device busy time of the block (CPU time on a CPU)
    peak_memory_mb: float | None = None  # CUDA only: the allocator's peak during the block
    # the CUDA caching allocator over the block: peak allocated and reserved, fragmentation,
    # CUDA-graph pools (evidence/allocator.py); on the CPU, a note of what is not measured
    memory: dict | None = None
    # with lines=True: per source line of the block, its kernels and the time charged to it
    lines: list = dataclasses.field(default_factory=list)
    out_dir: str | None = None  # where trace.json, ops.json, kernels.json, index.html went
    # the block's device time by part: attention, matmuls, norms_activations, other (shares),
    # from its kernels (and with lines=True, the code around each line: evidence/shares.py)
    shares: dict | None = None
    # what a reader must not miss: with lines=True, the recorder's own host time left out,
    # and compiled code that ran uncompiled under it
    notes: list = dataclasses.field(default_factory=list)
    done: bool = False  # the block has ended and every field is filled

    def __repr__(self) -> str:
        """One line a reader can take in: the fields' sizes and the block's headline figures
        (`print(p.table())` for the table, the fields themselves for the rows)."""
        if not self.done:
            return "Profile(not filled yet: the block has not ended)"
        parts = [f"device={self.device!r}", f"forward_device_ms={self.forward_device_ms:.4g}"]
        parts += [f"{name}=[{len(getattr(self, name))} rows]" for name in ("ops", "kernels")]
        if self.lines:
            parts.append(f"lines=[{len(self.lines)} rows]")
        if self.shares:
            from compilekit.evidence.shares import PARTS

            shares = {k: round(v, 3) for k, v in self.shares.items() if k in PARTS}
            parts.append(f"shares={shares}")
        if self.peak_memory_mb is not None:
            parts.append(f"peak_memory_mb={self.peak_memory_mb:.1f}")
        if self.out_dir:
            parts.append(f"out_dir={self.out_dir!r}")
        return f"Profile({', '.join(parts)})"

    def table(self, by: str = "time", top: int = 20) -> str:
        """The cost matrix as text, ranked by time or memory (compilekit ops's columns)."""
        from compilekit.model.errors import UserError
        from compilekit.report import memoryview, opsview

        if not self.done:
            raise UserError(
                "table() inside the `with compilekit.profile()` block: the profile is filled "
                "when the block ends; call it after the block"
            )
        opsview.check_top(top)
        from compilekit.evidence.shares import shares_line

        rows = opsview.rank(self.ops, by, self.device == "cuda")
        text = opsview.table(rows[:top], self.device == "cuda", self.peak_memory_mb)
        text += memoryview.under_ops(self.memory, by)
        text += f"\n{shares_line(self.shares)}" if self.shares else ""
        return text + "".join(f"\n{note}" for note in self.notes)


def line_notes(recorded, prof, forwards: int) -> list[str]:
    """What lines=True changed in the block's figures, in a line each: compiled code that ran
    uncompiled under the recorder, and the recorder's own host time (left out of the figures)."""
    from compilekit.evidence.profiling import recorder_us

    notes = []
    if recorded.ran_compiled:
        notes.append(
            "lines=True: torch.compile'd code in the block ran uncompiled (Dynamo runs no "
            "compiled code under the line recorder's dispatch mode): these are eager code's "
            "figures; profile without lines=True for the compiled code's"
        )
    recorder_ms = recorder_us(prof.events())
    if recorder_ms:
        notes.append(
            f"lines=True: the line recorder's own host time, {recorder_ms / 1e3 / forwards:.1f} "
            "ms per pass, is left out of the ops and kernels"
        )
    return notes


def checked_device(out_dir: str | None, device: str | None, forwards, grad: str = "off") -> str:
    """The device to profile, every argument checked before the block runs: UserError, one line
    each, for another profiler session already running (torch runs one at a time: the outer
    one would come back empty), a count of passes below one, a device other than cpu or cuda
    (or cuda without a GPU), and an out_dir that cannot take the files."""
    import torch

    from compilekit.model.errors import UserError
    from compilekit.model.spec import parse_grad
    from compilekit.model.store import check_writable

    running = getattr(torch.autograd.profiler, "_is_profiler_enabled", False)
    if running or torch._C._autograd._profiler_enabled():
        raise UserError(
            "compilekit.profile() inside another profiler session (compilekit.profile() or "
            "torch.profiler): torch runs one at a time; profile the inner block alone"
        )
    parse_grad(grad)
    if isinstance(forwards, bool) or not isinstance(forwards, int) or forwards < 1:
        raise UserError(f"forwards={forwards!r}: give how many passes the block runs (1 or more)")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda"):
        raise UserError(f"device={device!r}: give 'cpu' or 'cuda'")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("device='cuda', but torch sees no CUDA GPU here: give device='cpu'")
    if out_dir is not None and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"out_dir={out_dir!r} is a file: give a folder (made if missing)")
    if out_dir is not None:
        check_writable(out_dir, "out_dir", "give another folder")
    return device


@contextlib.contextmanager
def profile(
    out_dir: str | None = None,
    device: str | None = None,
    forwards: int = 1,
    lines: bool = False,
    grad: str = "off",
):
    """Profile the block; yields a Profile filled on exit. forwards: how many passes the block
    runs (a loop of the user's), every figure is per pass. out_dir (made if missing) gets
    trace.json (Perfetto), ops.json, kernels.json and index.html (both, ranked). device: "cuda"
    or "cpu", by default cuda where torch sees a GPU. lines: map each kernel to the line of
    the block's code that launched it (Profile.lines, the page's source table), by recording
    every op's call stack as it runs: eager code only (an already compiled model runs
    uncompiled under the recorder: Profile.notes says so), and host times grow by it (its own
    time is left out of the figures). grad:
    "no-grad" or "inference" runs the block inside torch.no_grad() or torch.inference_mode().
    Arguments are checked before the block runs (checked_device)."""
    import torch
    from torch.profiler import record_function

    from compilekit.compile.modes import grad_context
    from compilekit.evidence import allocator, eagerlines, kernelmap, opcost, profiling, shares
    from compilekit.model.store import write_json

    found = Profile(device=checked_device(out_dir, device, forwards, grad))
    cuda = found.device == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        retries = torch.cuda.memory_stats().get("num_alloc_retries", 0)
    with torch.profiler.profile(
        activities=profiling.activities(found.device),
        record_shapes=True,
        with_flops=True,
        profile_memory=True,
    ) as prof:
        with record_function(LABEL), contextlib.ExitStack() as stack:
            stack.enter_context(grad_context(grad))
            recorded = stack.enter_context(eagerlines.recording()) if lines else None
            yield found
        if cuda:
            torch.cuda.synchronize()
    found.memory = {"note": allocator.CPU_NOTE}
    if cuda:  # the user's allocator as the block found it: no cache emptied before it
        pools = allocator.pool_figures(torch.cuda.memory_snapshot())
        figures = allocator.forward_figures(torch.cuda.memory_stats(), retries, pools)
        figures.update({"cudagraph_pools": pools} if pools else {})
        found.memory = {"what": f"the block ({forwards} pass(es), as it found the cache)",
                        "block": figures}  # fmt: skip
        found.peak_memory_mb = figures["peak_allocated_mb"]
    found.ops = opcost.op_table(prof, found.device, prof, steps=forwards, label=LABEL)
    forward = profiling.forward_kernels(prof, LABEL, found.device)
    for k in forward["kernels"]:  # one LABEL range held every pass
        k["calls_per_forward"] /= forwards
    forward["kernels_per_forward"] /= forwards
    forward["forward_device_ms"] /= forwards
    found.kernels, found.forward_device_ms = forward["kernels"], forward["forward_device_ms"]
    records = kernelmap.build_map(forward, {}, {}, "", False, recorded)
    found.shares = shares.shares(records)
    if recorded is not None:
        for k in found.kernels:  # each launch's own lines; the map merges a layer's repeats
            k["source_lines"] = kernelmap.eager_site(k, recorded, {})[0]["source_lines"]
        found.lines = forward["by_source_line"] = kernelmap.by_source_line(records)
        found.notes = line_notes(recorded, prof, forwards)
        if recorded.ran_compiled:
            warnings.warn(found.notes[0], stacklevel=3)
    if out_dir:
        prof.export_chrome_trace(os.path.join(out_dir, "trace.json"))
        write_json(os.path.join(out_dir, "ops.json"), found.ops)
        write_json(os.path.join(out_dir, "kernels.json"), forward)
        found.out_dir = out_dir
        from compilekit.report import pages

        pages.profile_page(found, out_dir)
    found.done = True
