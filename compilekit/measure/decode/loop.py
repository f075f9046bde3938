"""compilekit's own decode loop: the prompt's forward, then one step per token, each step's
greedy token fed to the next on the device. No host sync per token: the loop only queues work,
and reads the clock's marks once the last token is queued."""

from __future__ import annotations

import dataclasses
import time

import torch

from compilekit.measure.decode.clock import Clock


@dataclasses.dataclass
class Run:
    """One generation: tokens [B, N]; ttft_ms (the prompt's forward to the first token);
    token_ms: each later token's time; host_ms: the host's time to queue each step; wall_s
    (the whole run, synchronised); logits: the kept tokens' [B, V] logits (float32)."""

    tokens: torch.Tensor
    ttft_ms: float
    token_ms: list
    host_ms: list
    wall_s: float
    logits: list = dataclasses.field(default_factory=list)


def run_loop(
    session, prefill, step, forced: torch.Tensor | None = None, keep=(), new: int | None = None
) -> Run:
    """Generate `new` tokens (default shape.new) with these prefill and step callables (eager
    or compiled). forced: feed these tokens [B, N] instead of the model's own (teacher forcing,
    so that two runs' logits stay comparable past a first difference); a forced run is read
    for its kept logits only, so it stops at the last kept token. keep: the token indices
    whose logits to keep, in Run.logits in that order (cloned: a CUDA graph overwrites its
    output on the next replay)."""
    keep = set(keep)
    shape = session.shape
    count = new or shape.new
    if forced is not None and keep:  # a 7B model's 200 eager steps cost seconds each run
        count = min(count, max(keep) + 1)
    # [N, B, 1]: each token a contiguous [B, 1] slice (as the model's own output is, so one
    # compiled step serves both). The next step reads the token from here, not from the
    # step's output: under CUDA graphs that output is the graph's own memory, which the next
    # replay overwrites while reading it (torch refuses that).
    tokens = torch.empty(count, shape.batch, 1, dtype=torch.long, device=session.device)
    clock, host_ms, logits = Clock(session.device), [], []
    if forced is not None:
        forced = forced.to(session.device).t().unsqueeze(-1).contiguous()
    start = time.perf_counter()
    clock.mark()
    token, last = prefill(session.prompt, session.zero)
    clock.mark()
    for i in range(count):
        tokens[i] = token
        if i in keep:
            logits.append(last.float().clone())
        if i == count - 1:
            break
        fed = tokens[i] if forced is None else forced[i]
        queued = time.perf_counter()
        token, last = step(fed, session.positions[i])
        host_ms.append((time.perf_counter() - queued) * 1e3)
        clock.mark()
    times = clock.times_ms()
    wall_s = time.perf_counter() - start
    return Run(
        tokens=tokens.squeeze(-1).t(),
        ttft_ms=times[0],
        token_ms=[b - a for a, b in zip(times, times[1:])],
        host_ms=host_ms,
        wall_s=wall_s,
        logits=logits,
    )
