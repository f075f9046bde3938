"""Marks on the device's timeline without a host sync: CUDA events on a GPU (read once, after
the run), perf_counter on a CPU (whose calls return when their work is done)."""

from __future__ import annotations

import time

import torch


class Clock:
    """mark() after each token; times_ms() once the run is over (it synchronises)."""

    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def times_ms(self) -> list[float]:
        """Milliseconds from the first mark to each later one."""
        if not self.marks:
            return []
        if self.cuda:
            self.marks[-1].synchronize()
            return [self.marks[0].elapsed_time(m) for m in self.marks[1:]]
        return [(m - self.marks[0]) * 1e3 for m in self.marks[1:]]
