"""dev/decode_attention_parts.py: a profiled run's kernels split into calls at the L2 flushes,
and each call's kernels, gaps and span as medians over the calls of the common sequence. Not
part of `make test`: `python -m pytest dev/tests`."""

import decode_attention_parts as parts

FLUSH = "vectorized_elementwise_kernel<FillFunctor<int>>"


def _kernel(name, ts, dur):
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur}


def test_a_call_is_what_runs_between_two_flushes():
    trace = {
        "traceEvents": [
            _kernel("split", 5, 1.0),  # before any flush: warm-up, not a call
            {"cat": "cpu_op", "name": "aten::zero_", "ts": 9, "dur": 3},
            _kernel(FLUSH, 10, 50.0),
            _kernel("split", 100, 20.0),
            _kernel("combine", 123, 2.0),  # 3 us after split ends
            _kernel(FLUSH, 200, 50.0),
            _kernel("combine", 307, 3.0),  # out of order in the file: sorted by start
            _kernel("split", 300, 4.0),
            _kernel(FLUSH, 400, 50.0),
            _kernel("split", 500, 22.0),
            _kernel("combine", 524, 4.0),
            _kernel(FLUSH, 600, 50.0),
            _kernel("cudnn", 700, 30.0),  # another sequence: left out, and counted
        ]
    }
    calls = parts.calls_between_flushes(parts.kernel_events(trace), {FLUSH})
    assert [[k["name"] for k in c] for c in calls] == [
        ["split", "combine"], ["split", "combine"], ["split", "combine"], ["cudnn"]
    ]  # fmt: skip
    summary = parts.call_parts(calls)
    assert summary["calls"] == 3 and summary["others"] == 1
    assert summary["kernels"] == [{"name": "split", "us": 20.0}, {"name": "combine", "us": 3.0}]
    assert summary["gaps_us"] == [3.0]  # gaps 3, 3, 2
    assert summary["span_us"] == 25.0  # spans 25, 10, 28


def test_no_call_profiled_says_so():
    assert parts.call_parts([]) == {
        "calls": 0, "others": 0, "kernels": [], "gaps_us": [], "span_us": None
    }  # fmt: skip
