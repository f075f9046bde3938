"""One typed record per cell: what was measured, by which process, and one verdict.

The verdict (`status`) is decided here and nowhere else:
- `ok`: eager and compiled outputs within the dtype's bound of a float64 reference;
- `self-consistent`: a user variant without a `reference`: compiled checked against the same
  function run eagerly on float64 inputs (it says nothing about whether the function is right);
- `wrong`: over the bound, NaN, or the wrong output shape;
- `unsupported`: an explicit refusal (compilekit.model.errors.Unsupported, torch's "No available
  kernel", a device or dtype torch does not implement), or a failure under a mode the variant
  declares a known limitation (KNOWN_LIMITS; compilekit.measure.failures.failure_in_mode);
- `failed`: anything else: the reason here, the traceback in log.txt.
Quantities that do not exist for a cell (compile times of an eager cell, TFLOP/s of a variant
that declares no FLOPs) are None, written as null.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time

from compilekit.model.spec import MODEL_SHAPE_RE, SHAPE_RE
from compilekit.model.store import CorruptFile, json_fits, kept, read_json, write_json
from compilekit.model.varlen import VARLEN_RE

SCHEMA_VERSION = 2
STATUSES = ("ok", "self-consistent", "wrong", "unsupported", "failed")
# Statuses whose cell was measured end to end (timed, profiled, mapped).
MEASURED = ("ok", "self-consistent", "wrong")


@dataclasses.dataclass
class CellResult:
    """A cell's result.json. Units are in the names (`_ms`, `_s`, `_mb`, `_tflops`)."""

    variant: str
    mode: str
    shape: str
    dtype: str
    device: str
    seed: int = 0
    config: dict = dataclasses.field(default_factory=dict)  # the cell's own Inductor options
    config_name: str = ""
    passes: list = dataclasses.field(default_factory=list)  # custom graph passes (path.py:factory)
    grad: str = "off"  # what the calls ran inside: off, no-grad or inference (spec.GRAD_MODES)
    alloc: str = ""  # the CUDA allocator settings the cell's processes ran with (spec.ALLOC_KEYS)
    weights: str = "auto"  # an hf: checkpoint's: its own where it has them, or random
    workload_note: str | None = None  # a workload's own line: where its weights came from
    # a model's device time by part: attention, matmuls, norms_activations, other (shares that
    # sum to 1) and device_ms, from the kernel map (compilekit/evidence/shares.py)
    time_shares: dict | None = None
    pass_stats: dict | None = None  # per pass: invocations, graphs_changed, matches (capture)
    label: str = ""
    schema_version: int = SCHEMA_VERSION
    status: str = "failed"
    reason: str | None = None  # one line: why unsupported, failed or wrong
    # a failed cell's kind of end: "timeout", "out_of_memory" (a sweep runs it again alone),
    # "crash" (a signal or an exit code without a word), "error" (an exception), "bad_input"
    # (a model workload's factory refused the cell's shape or returned what cannot be timed)
    failure: str | None = None
    torch_version: str | None = None
    env: dict | None = None  # where it was measured: host, compilekit/torch/triton, GPU name
    # check (step 3)
    reference: str | None = None  # what the outputs were checked against
    output_dtype: str | None = None  # of the checked output; another than `dtype` is wrong
    max_rel_err: float | None = None
    eager_max_rel_err: float | None = None  # None: eager did not run (eager_note says why)
    eager_note: str | None = None  # why a compiled cell has no eager figures
    error_bound: float | None = None
    # steady state (step 5), measured before any profiler or capture hook in a clean process
    eager_ms: float | None = None
    compiled_ms: float | None = None
    speedup: float | None = None
    eager_timing: dict | None = None
    compiled_timing: dict | None = None
    # GPU: a user's loop (back-to-back calls, no L2 flush): max(host, device) per call, which
    # do_bench's figures above hide for a host-bound call (timing.loop_timing)
    eager_loop_ms: float | None = None
    compiled_loop_ms: float | None = None
    # {"eager": summary, "compiled": summary, "host": the launch-only loops (timing.host_loops)}
    loop_timing: dict | None = None
    host_ms_per_call: float | None = None  # launch-only loop: what the CPU spends per call
    gpu_busy_share: float | None = None  # device time per forward / compiled_loop_ms
    host_bound: bool | None = None
    noisy: bool | None = None  # the timing spread or the machine's load says it was disturbed
    noise_note: str | None = None
    # each attempt's medians, in records whose measure process re-timed a disturbed timing
    # (published results keep them; a timing is now taken once)
    timing_attempts: list | None = None
    flops: float | None = None  # as the variant declares them; None: it declares none
    tflops: float | None = None
    eager_tflops: float | None = None
    peak_memory_mb: float | None = None
    # the CUDA caching allocator in one forward per side: peak allocated and reserved,
    # fragmentation, CUDA-graph pools (evidence/allocator.py); on the CPU, a note
    memory: dict | None = None
    # why the op cost matrix has no memory column (its profile_memory session failed)
    memory_note: str | None = None
    # compile (step 4)
    compile_cold_s: float | None = None
    compile_warm_s: float | None = None
    compile_cold_measured_at: str | None = None
    compile_notes: dict | None = None
    # evidence (steps 6-9), taken after the timed calls
    kernels_per_forward: float | None = None
    profiled_forward_device_ms: float | None = None
    # of that, time kernels ran at once (programmatic dependent launch): busy is the difference
    profiled_forward_overlap_ms: float | None = None
    profiled_forward_host_ms: float | None = None
    cudagraphs: dict | None = None
    dynamo: dict | None = None
    sdpa_backend: str | None = None
    attention_rewrite: str | None = None
    # why it was slow: CUDA-graph replay costs, the roofline classes of the kernels'
    # time, max-autotune's choices (from the cold compile, the one that really tuned), and a
    # hand-written kernel's autotuner's
    replay: dict | None = None
    roofline: str | None = None
    autotune: list | None = None
    # the config each Triton autotuner of the variant's code chose, per key (evidence/autotuned)
    triton_autotuned: list | None = None
    # a decode cell's figures per path (loop, generate) and kind (eager, compiled): per-token
    # times, time to first token, bytes per token and GB/s against the copy ceiling, tokens
    # against eager's (compilekit/launch/decodephase.py)
    decode: dict | None = None
    # a ragged batch: its lengths (or distribution and seed), setup time and padding waste
    varlen: dict | None = None
    # bookkeeping
    processes: dict = dataclasses.field(default_factory=dict)  # process -> what it measured
    settings: dict = dataclasses.field(default_factory=dict)  # what the toolkit set in torch
    steps_s: dict = dataclasses.field(default_factory=dict)  # incl. lock waits, process walls
    wall_s: float | None = None
    exit_code: int | str | None = None
    # the code it was measured with: hashes of the variant's import closure and of each pass's
    # (launch.cache.code_sources); a sweep's --retry-changed runs the cell again when they move
    code_sources: dict | None = None
    # other runs kept in attempts/: failed reruns, noisy timings (runner.place)
    attempts: list = dataclasses.field(default_factory=list)
    run_dir: str | None = None  # where it was read from or written to (not stored)

    @property
    def ok(self) -> bool:
        """Measured and within the bound (of a reference, or of itself)."""
        return self.status in ("ok", "self-consistent")

    @property
    def paced_by_loop(self) -> bool:
        """Host-bound, with a user's loop timed: its loop figures, not do_bench's, say what a
        call costs (do_bench's L2 flush hides host time; timing.loop_timing)."""
        return bool(self.host_bound and self.loop_timing)

    @property
    def measured(self) -> bool:
        """Timed end to end. A `wrong` cell whose output had the wrong shape stopped before
        its timed calls: its figures are null, and every view shows its status instead."""
        return self.status in MEASURED and self.compiled_ms is not None

    @contextlib.contextmanager
    def step(self, name: str):
        """Record how long one step of a cell process took, in steps_s[name]."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.steps_s[name] = round(time.perf_counter() - start, 3)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data.pop("run_dir")
        return data

    def save(self, run_dir: str) -> None:
        """Write run_dir/result.json atomically."""
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        write_json(os.path.join(run_dir, "result.json"), self.to_dict())


def verdict(
    max_rel_err: float,
    eager_max_rel_err: float | None,
    bound: float,
    has_reference: bool,
    model: bool = False,
):
    """The status of a measured cell, from its errors and what they were measured against
    (eager's None where eager could not run). A model (`model`: a whole network, many layers
    deep in a 16-bit dtype) is judged beside eager, as a decode is (verdict_beside_eager)."""
    if max(max_rel_err, eager_max_rel_err or 0.0) <= bound:
        return "ok" if has_reference else "self-consistent"
    if model and eager_max_rel_err is not None and has_reference:
        return verdict_beside_eager(max_rel_err, eager_max_rel_err, bound)
    return "wrong"


# torch's own accuracy rule for a compiled model against a float64 reference
# (torch._dynamo.utils.same with fp64_ref): compiled may be up to twice as far from the
# reference as eager in the same dtype is, plus a tenth of the tolerance
EAGER_MULTIPLIER = 2.0


# Eager this many times its dtype's bound from the float reference is no rounding drift (a
# 32-layer bf16 Llama's is 0.07-0.08 against the bound 0.03): the model and its reference
# compute different things, and a compiled run that agrees with eager proves nothing.
EAGER_ADRIFT = 10.0


def is_adrift(eager_max_rel_err: float | None, bound: float) -> bool:
    """Whether eager itself is over EAGER_ADRIFT times the bound from the reference."""
    return eager_max_rel_err is not None and eager_max_rel_err > EAGER_ADRIFT * bound


def eager_adrift(eager_max_rel_err: float | None, bound: float, dtype: str) -> str | None:
    """Why a model's cell is wrong whatever its compile did (is_adrift), or None."""
    if not is_adrift(eager_max_rel_err, bound):
        return None
    return (
        f"eager in {dtype} is itself {eager_max_rel_err:.3g} from the reference, over "
        f"{EAGER_ADRIFT:g}x the bound {bound}: the model does not compute what its reference does"
    )


def verdict_beside_eager(max_rel_err: float, eager_max_rel_err: float, bound: float) -> str:
    """The status of a deep model's cell (a decode's 32 layers), whose eager run in a 16-bit
    dtype may itself be further than the dtype's bound from the float reference: `ok` when
    both are within the bound, or when compiled is within torch's rule beside eager, unless
    eager is adrift (EAGER_ADRIFT)."""
    if max(max_rel_err, eager_max_rel_err) <= bound:
        return "ok"
    if is_adrift(eager_max_rel_err, bound):
        return "wrong"
    if max_rel_err <= EAGER_MULTIPLIER * eager_max_rel_err + bound / 10:
        return "ok"
    return "wrong"


FIELDS = {f.name for f in dataclasses.fields(CellResult)}
# The JSON types each field may hold, from its annotation ("float | None" -> int, float, None).
_JSON_TYPES = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
    "None": (type(None),),
}
FIELD_TYPES = {
    f.name: tuple(t for part in f.type.split("|") for t in _JSON_TYPES[part.strip()])
    for f in dataclasses.fields(CellResult)
}


# List fields whose entries the views format: each entry a dict with these keys and types.
NESTED = {
    "attempts": {"dir": (str,), "status": (str,)},
    "timing_attempts": {"compiled_ms": (int, float)},
}


def _holds(entry, needs: dict) -> bool:
    return isinstance(entry, dict) and all(json_fits(entry.get(k), t) for k, t in needs.items())


def _wrong_types(data: dict) -> list[str]:
    """The fields of a parsed result.json whose JSON type the record does not allow (a bool is
    not a number here, though Python says it is an int)."""
    return [
        f"{key}={value!r:.40}"
        for key, value in data.items()
        if key in FIELD_TYPES and key != "run_dir" and not json_fits(value, FIELD_TYPES[key])
    ]


def from_dict(data: dict, where: str = "result") -> CellResult:
    """A CellResult from parsed JSON; CorruptFile when it is not one of this format."""
    if not isinstance(data, dict):
        raise CorruptFile(
            f"{where} is corrupt (it holds {type(data).__name__}, not a cell result)"
        )
    version = data.get("schema_version", data.get("format_version"))
    if version != SCHEMA_VERSION:
        raise CorruptFile(
            f"{where} was written by another compilekit format ({version!r}; this one reads "
            f"{SCHEMA_VERSION}): run the cell again"
        )
    missing = [k for k in ("variant", "mode", "shape", "dtype", "device") if k not in data]
    if missing or data.get("status") not in STATUSES:
        raise CorruptFile(
            f"{where} is corrupt (not a cell result: missing "
            f"{', '.join(missing) or 'a valid status'})"
        )
    wrong = _wrong_types(data)
    for key, needs in NESTED.items():
        entries = data.get(key) or []
        if isinstance(entries, list):
            wrong += [f"{key}[{i}]" for i, e in enumerate(entries) if not _holds(e, needs)]
    if wrong:
        raise CorruptFile(f"{where} is corrupt (fields of the wrong type: {', '.join(wrong)})")
    if data["status"] in ("ok", "self-consistent") and data.get("compiled_ms") is None:
        raise CorruptFile(f"{where} is corrupt (status {data['status']} without compiled_ms)")
    if not any(r.match(data["shape"]) for r in (SHAPE_RE, MODEL_SHAPE_RE, VARLEN_RE)):
        raise CorruptFile(
            f"{where} is corrupt (shape {data['shape']!r:.40} is not a shape compilekit writes)"
        )
    return CellResult(**{k: v for k, v in data.items() if k in FIELDS and k != "run_dir"})


def load(run_dir: str) -> CellResult:
    """Read run_dir/result.json back; CorruptFile names the file when it cannot."""
    path = os.path.join(run_dir, "result.json")
    result = from_dict(read_json(path), path)
    result.run_dir = run_dir
    return result


def for_cell(cell, **fields) -> CellResult:
    """A record for `cell` (a spec.Cell) with its identity filled in."""
    return CellResult(**cell.to_dict(), label=cell.label(), **fields)


def read_run(run_dir: str) -> CellResult:
    """A run directory's CellResult for a command: a missing, old or corrupt result.json is a
    UserError naming the file and the fix (the one loader of a run's record)."""
    from compilekit.model.errors import UserError

    if not os.path.isfile(kept(os.path.join(run_dir, "result.json"))):
        raise UserError(
            f"{run_dir!r} is not a run directory (no result.json): give a directory "
            "made by `compilekit run`"
        )
    try:
        return load(run_dir)
    except CorruptFile as exc:
        raise UserError(f"{exc}: run the cell again (FORCE=1 in a sweep)") from None


# a cell that ended with one of these stopped before its profile: no kernel map, no op costs
NOT_PROFILED = ("unsupported", "failed", "wrong")


def missing_figures(run_dir: str, result: CellResult, what: str, file: str):
    """The UserError for a run directory without `what` (a kernel map, op costs) in `file`: a
    cell that ended before its profile says so and why; a measured one without the file was
    made by an older compilekit, and running it again gives it."""
    from compilekit.model.errors import UserError

    if result.status in NOT_PROFILED:
        why = (result.reason or "no reason recorded").splitlines()[0]
        return UserError(
            f"{run_dir!r} was not measured, so it has no {what} ({result.status}: {why})"
        )
    return UserError(
        f"{run_dir!r} has no {what} ({file}): run the cell again with this compilekit"
    )
