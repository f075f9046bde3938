"""Two processes timing the same callable by turns, loop after loop: `compilekit verify
--paired`'s way to compare the toolkit's measure process with a bare one on a host whose speed
drifts.

On the H200's VM hosts a host-bound call costs 1.3-2x more in one second than in the next, and
no probe of the CPU's speed follows it (2026-12-01: at the same probe reading, a toolkit
process and the bare process after it read 0.134 and 0.064 ms per call). Loops taken tens of
seconds apart, in processes one after the other, therefore compare two moments of the host,
not two ways of timing. Taken by turns, the toolkit's loop and the bare loop right after it
share the host's moment: their ratio is the toolkit's way of timing against a user's.

The toolkit's process leads (timing.loop_timing with a Leader): after each of its loops it
hands the turn over with its own figure and waits. The bare process follows (verify's child
with a Follower): on each turn it times one loop of as many calls and hands the turn back. The
two never run a loop at once; each waits in a blocking read, off the CPU.

The channel is two named pipes in a directory given by COMPILEKIT_TURNS. The follower holds
both open from the start; a leader that finds no follower (or one that stops answering) times
alone, as it would without this module, and says so.
"""

from __future__ import annotations

import os
import select
import statistics

ENV = "COMPILEKIT_TURNS"
LEAD_ENV = "COMPILEKIT_TURNS_LEAD"  # a bare process in the lead (experiments/turns_spread.py)
TO_FOLLOWER, TO_LEADER, READY = "to_follower", "to_leader", "ready"
OVER = "over"  # the leader's last word; the parent's is "end" (after the leader's process)
# How long a leader waits for the follower's loop before it times on alone: a loop is a few
# ms; a follower this late has died or hangs.
ANSWER_S = 30.0


def make_channel(directory: str) -> str:
    """Create the two named pipes in `directory` (made if missing); the directory for ENV."""
    os.makedirs(directory, exist_ok=True)
    for name in (TO_FOLLOWER, TO_LEADER):
        os.mkfifo(os.path.join(directory, name))
    return directory


class _Lines:
    """Lines over one pipe end, each read with a timeout."""

    def __init__(self, fd: int):
        self.fd, self.buffer = fd, b""

    def read(self, timeout_s: float) -> str | None:
        """The next line, or None at end of file or after timeout_s."""
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], timeout_s)
            chunk = os.read(self.fd, 4096) if ready else b""
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


class Leader:
    """The toolkit's side. attach() once per process: the first series of loops takes turns."""

    def __init__(self, directory: str, answer_s: float = ANSWER_S):
        # no follower holding the pipe open: ENXIO here, and the loops run alone
        self.out = os.open(os.path.join(directory, TO_FOLLOWER), os.O_WRONLY | os.O_NONBLOCK)
        os.set_blocking(self.out, True)
        self.answers = _Lines(
            os.open(os.path.join(directory, TO_LEADER), os.O_RDONLY | os.O_NONBLOCK)
        )
        self.answer_s, self.turns = answer_s, 0

    @classmethod
    def attach(cls) -> Leader | None:
        """The leader for the channel named in ENV, or None (no channel, no follower). The
        variable is taken out of the environment: later loops in this process, and the
        processes it starts, time alone."""
        directory = os.environ.pop(ENV, None)
        if not directory:
            return None
        try:
            return cls(directory)
        except OSError:
            return None

    def hand_over(self, calls: int, ms: float, ns: float) -> bool:
        """After one of our loops (ms per call, the probe's ns): the follower times one loop of
        `calls` calls; back when it has. False, and alone from here on, if it does not answer."""
        try:
            os.write(self.out, f"turn {calls} {ms!r} {ns!r}\n".encode())
        except OSError:
            return False
        if self.answers.read(self.answer_s) != "done":
            return False
        self.turns += 1
        return True

    def end(self) -> None:
        """No more turns. The follower then waits for its parent's "end" (sent once this
        leader's process is over) before it goes on: on one CPU, its own host loop would
        otherwise share the CPU with the rest of this process's timed calls."""
        try:
            os.write(self.out, f"{OVER}\n".encode())
        except OSError:
            pass
        os.close(self.out)
        os.close(self.answers.fd)


class Follower:
    """The bare side: holds both pipes open (so a leader finds it), then takes turns."""

    def __init__(self, directory: str):
        # O_RDWR: a FIFO opened so never blocks, and never reads end of file while we hold it
        self.turns_in = _Lines(os.open(os.path.join(directory, TO_FOLLOWER), os.O_RDWR))
        self.out = os.open(os.path.join(directory, TO_LEADER), os.O_RDWR)
        with open(os.path.join(directory, READY), "w") as f:  # what the parent waits for
            f.write(str(os.getpid()))

    def follow(self, one_loop, wait_s: float, end_wait_s: float = 0.0) -> list[list[float]]:
        """Until the leader ends: one_loop(calls) -> (ms per call, probe ns) on each turn.
        [[leader ms, leader ns, our ms, our ns], ...]. wait_s: how long to wait for a turn
        (the leader's process starts, compiles and times do_bench first). After the leader's
        last turn, wait up to end_wait_s for the next line (the parent's "end", sent once the
        leader's process is over)."""
        rows = []
        while True:
            line = self.turns_in.read(wait_s)
            if line is None or not line.startswith("turn "):
                break
            _, calls, ms, ns = line.split()
            ours = one_loop(int(calls))
            rows.append([float(ms), float(ns), *ours])
            os.write(self.out, b"done\n")
            wait_s = ANSWER_S  # between turns, the leader is a loop away
        if line == OVER:  # the rest of the leader's process: stay off the CPU
            self.turns_in.read(end_wait_s)
        os.close(self.out)
        os.close(self.turns_in.fd)
        return rows


def ratios(rows: list[list[float]]) -> list[float]:
    """Each turn's leader ms over the follower's ms right after it."""
    return [lead / follow for lead, _, follow, _ in rows if follow > 0]


def median_ratio(rows: list[list[float]], min_turns: int = 5) -> float | None:
    """The median of the turns' ratios; None with fewer than min_turns turns."""
    each = ratios(rows)
    return statistics.median(each) if len(each) >= min_turns else None
