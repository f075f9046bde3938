"""Every setting compilekit changes inside torch, in one place, restored on exit.

A cell's processes compile with the same settings (they are part of Inductor's cache key, so
the timed process reuses exactly what the first compile built):
- CPU: `cpp.enable_kernel_profile`: Inductor wraps each C++ kernel in RECORD_FUNCTION so the
  profiler can see it. Without an active profiler that is one flag check per kernel call.
- the capture recompile only: `trace.provenance_tracking_level = 1` (torch >= 2.9), the kernel ->
  FX node -> source line mapping that the kernel map reads.
- the cell's own Inductor options (`--set`, `[configs]`), also given to torch.compile: set here
  too for the knobs Inductor reads at run time rather than at compile time; and the cell's
  custom graph passes (`--pass`), as one composite object at `joint_custom_pre_pass`.
Environment variables the parent sets for each process (cache directories, TORCH_TRACE, compile
threads) are listed in runner.PHASE_ENV.
"""

from __future__ import annotations

import contextlib


def toolkit_changes(device: str, capture: bool) -> dict:
    """{Inductor config key: value} that compilekit sets for this device and process."""
    from torch._inductor import config

    changes = {}
    if device == "cpu":
        changes["cpp.enable_kernel_profile"] = True
    if capture and hasattr(config.trace, "provenance_tracking_level"):
        changes["trace.provenance_tracking_level"] = 1
    return changes


@contextlib.contextmanager
def toolkit_settings(
    device: str, capture: bool = False, cell_config: dict | None = None, graph_pass=None
):
    """Set toolkit_changes(), the cell's own options and its custom pass (at
    joint_custom_pre_pass) for the block, restore every one of them after; yields
    toolkit_changes() (what compilekit itself set)."""
    from torch._inductor import config

    changes = toolkit_changes(device, capture)
    cell_changes = dict(cell_config or {})
    if graph_pass is not None:
        cell_changes["joint_custom_pre_pass"] = graph_pass
    with config.patch({**cell_changes, **changes}):
        yield changes
