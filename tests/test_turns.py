"""Two processes timing by turns (compilekit/turns.py): `compilekit verify --paired`'s pairs for
a host-bound run, where the host's speed drifts between seconds."""

import json
import os
import subprocess
import sys
import time

import pytest

from compilekit import turns

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A follower in its own process whose "loop" sleeps 20 ms and reports when it ran
FOLLOWER = """
import json, sys, time
from compilekit import turns
def loop(calls):
    start = time.monotonic(); time.sleep(0.02); return [time.monotonic(), start]
rows = turns.Follower(sys.argv[1]).follow(loop, wait_s=float(sys.argv[2]))
print(json.dumps(rows))
"""


def _follower(channel, wait_s=30.0):
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen(
        [sys.executable, "-c", FOLLOWER, channel, str(wait_s)],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(channel, turns.READY)):
        assert proc.poll() is None and time.monotonic() < deadline, "the follower never got ready"
        time.sleep(0.05)
    return proc


def test_two_processes_take_turns_loop_by_loop(tmp_path, monkeypatch):
    """The leader's loop, then the follower's, then the leader's: never both at once, and the
    follower keeps each leader loop's figure beside its own loop right after it."""
    channel = turns.make_channel(str(tmp_path / "channel"))
    proc = _follower(channel)
    monkeypatch.setenv(turns.ENV, channel)
    leader = turns.Leader.attach()
    assert leader is not None and turns.ENV not in os.environ  # later loops time alone
    spans = []
    for _ in range(6):
        start = time.monotonic()
        time.sleep(0.02)
        spans.append((start, time.monotonic()))
        assert leader.hand_over(7, spans[-1][1], spans[-1][0])
    leader.end()
    rows = json.loads(proc.communicate(timeout=60)[0])
    assert leader.turns == 6 and len(rows) == 6, rows
    for i, (lead_end, lead_start, own_end, own_start) in enumerate(rows):
        assert (lead_start, lead_end) == spans[i]  # the figure the leader handed over
        assert lead_end <= own_start  # the follower's loop after the leader's
        if i + 1 < len(spans):
            assert own_end <= spans[i + 1][0]  # and done before the leader's next


def test_a_leader_without_a_follower_times_alone(tmp_path, monkeypatch):
    """No follower holding the channel: no leader (the loops run as without verify); a
    follower that stops answering: the leader says so at its next turn and goes on alone."""
    channel = turns.make_channel(str(tmp_path / "channel"))
    monkeypatch.setenv(turns.ENV, channel)
    assert turns.Leader.attach() is None

    proc = _follower(channel, wait_s=30.0)
    leader = turns.Leader(channel, answer_s=5.0)
    assert leader.hand_over(3, 1.0, 50.0)
    proc.kill()
    proc.wait()
    start = time.monotonic()
    assert not leader.hand_over(3, 1.0, 50.0)
    assert time.monotonic() - start < 5.0  # the follower's end of the pipe closed: no wait
    leader.end()


def test_each_pair_by_turns_is_the_median_of_its_turns_ratios():
    """A turn's ratio is the leader's loop over the follower's loop right after it, where the
    host's speed of the moment is the same: a host that doubles its cost every other turn
    reads 1.0; a pair with too few turns reads nothing."""
    drifting = [[lvl * 1.1, 45.0, lvl, 45.0] for lvl in [0.05, 0.10] * 6]
    assert turns.median_ratio(drifting) == pytest.approx(1.1)
    assert turns.median_ratio(drifting[:4]) is None


def test_a_bare_process_follows_the_toolkits_loops_by_turns(run_cell, cache_root, monkeypatch):
    """verify's pair by turns with a real bare process: it starts first, waits until the
    toolkit's process hands it a turn, times one loop of that many calls per turn, then stays
    off the CPU until the toolkit's process has ended (here a stand-in that takes 8 turns and
    ends them, then goes on with its other timings: the parent ends the bare process). Both run
    on one CPU, which the parent gives back after."""
    from types import SimpleNamespace

    from compilekit import runner, verify
    from compilekit.spec import Cell

    result = run_cell("naive", "eager")
    cell = Cell.from_dict(result.to_dict())
    taken, waiting = [], []

    def toolkit_process(cell, out, root, env):  # the leader's side of runner.launch
        os.environ.update(env)
        leader = turns.Leader.attach()
        for i in range(8):
            taken.append(leader.hand_over(4, 0.5 + i, 45.0))
        leader.end()
        with open(os.path.join(env[turns.ENV], turns.READY)) as f:
            bare_stat = f"/proc/{f.read()}/stat"
        ticks = []
        for _ in range(2):  # the rest of the toolkit's process: the bare one waits, alive
            with open(bare_stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks.append((fields[0], int(fields[11]) + int(fields[12])))  # state, CPU ticks
            time.sleep(1.0)
        waiting.extend(ticks)
        return SimpleNamespace(measured=True, status="ok")

    monkeypatch.setattr(runner, "launch", toolkit_process)
    env = verify._bare_env(cell, cache_root)
    allowed = os.sched_getaffinity(0)
    cpu = verify.turns_cpu()
    again, bare = verify._pair_by_turns(cell, env, 4, "unused", cache_root, cpu)
    assert again.measured and taken == [True] * 8
    (_, before), (state, after) = waiting
    assert state == "S" and after - before <= 2, waiting  # asleep a second on, not done
    assert bare["cpus"] == [cpu] and os.sched_getaffinity(0) == allowed  # both on one, then back
    assert [row[0] for row in bare["turns"]] == [0.5 + i for i in range(8)]
    assert all(row[2] > 0 for row in bare["turns"]) and len(bare["loops"]) == 8


@pytest.mark.parametrize("child, words", [
    ("import time; time.sleep(60)", "did not get ready in time"),
    ("import sys; sys.exit('ImportError: no torch here')", "exit 1): ImportError: no torch here"),
])  # fmt: skip
def test_a_bare_process_that_never_gets_ready_is_one_line(tmp_path, monkeypatch, child, words):
    """A pair by turns whose bare process hangs before it is warm, or dies there, ends with one
    line that says so (exit 2), not a wait without end or a traceback; the hung one is killed."""
    from types import SimpleNamespace

    from compilekit import verify
    from compilekit.errors import UserError

    monkeypatch.setattr(verify, "BARE_READY_S", 2.0)
    monkeypatch.setattr(verify, "_bare_command", lambda cell, calls, repeats: [
        sys.executable, "-c", child])  # fmt: skip
    monkeypatch.setattr(
        "compilekit.runner.launch", lambda *a, **k: pytest.fail("no toolkit process unready")
    )
    start = time.monotonic()
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace(")", r"\)")):
        verify._pair_by_turns(SimpleNamespace(), dict(os.environ), 4, "", "", None)
    assert time.monotonic() - start < 30


def test_pre_steps_sets_leaders_with_each_step_against_a_bare_follower(run_cell, cache_root):
    """experiments/pre_steps.py (which of the measure process's steps before timing cost a
    host-bound call): each step set leads its own pair by turns against a bare process, and a
    step set it does not know is one line (exit 2)."""
    run_dir = run_cell("naive", "eager").run_dir
    script = os.path.join(ROOT, "experiments", "pre_steps.py")
    env = {**os.environ, "PYTHONPATH": ROOT, "COMPILEKIT_CACHE": cache_root}
    proc = subprocess.run(
        [sys.executable, script, run_dir, "--steps", "none", "reference,timer,skiplog,bench",
         "--pairs", "1", "--turns", "6"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    for steps in ("none", "reference,timer,skiplog,bench"):
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(f"{steps}: pair 1:"))
        assert "6 turns, steps' leader over bare follower" in line, proc.stdout
    bad = subprocess.run([sys.executable, script, run_dir, "--steps", "nothing"], env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "unknown steps ['nothing']" in bad.stderr
