#!/usr/bin/env bash
# One device call on an H200 (the `device` tool, carry [".whl"]): the wheels torch does not
# bring, then the phases asked, in order; what they write comes back in $OUT/results.tgz.
#   C  a bare user's process compiling naive cold, warm and FX-cache-off (dev/cold_breakdown.py),
#      within C_S seconds (default 120)
#   S  the single cell cold (fresh cache) and warm, naive default at the blog shape: wall times
#      and the measure process's steps_s
#   V  sdpa eager and triton-flash eager at the blog shape, then `compilekit verify` of those
#      and of naive default
#   G  the GPU-marked tests (GPU_TESTS: a pytest -k expression), within G_S seconds, in
#      G_SHARDS processes at once (default 1)
#   B  the blog matrix, cold (experiments/blog_part3.toml), within B_S seconds; each cell's
#      wall, lock waits and steps (dev/sweep_steps.py); PER_GPU cells at once (default 4),
#      B_THREADS compile workers in each (default: Inductor's, one per core)
#   N  the models sweep (MODELS_TOML, default experiments/models.toml, or any experiment:
#      experiments/decode.toml, experiments/varlen.toml; needs .whl/models/: ../shared/wheels/models/
#      *.whl) into MODELS (default /tmp/models; a published copy carried in resumes it), within
#      N_S seconds (PER_GPU cells at once; SWEEP_ARGS, e.g. --retry-failed), then published to
#      $OUT/<MODELS's folder name> (a report is titled by its folder's name; result, kernels and
#      ops files per cell); N_DROP="variant ..." first removes those variants' cells from MODELS, so
#      a carried-in sweep measures them again with the current code (results measured before
#      cells recorded their code_sources, which --retry-changed would all run again); an item
#      may glob ("gluon-flash*__*x128" drops those variants' D = 128 cells); N_ONLY_ON=H200
#      skips the phase on any other GPU (a table of one machine kind)
#   N2 after N, a second sweep as N runs it: MODELS_TOML2 into MODELS2 (published to $OUT/<its
#      folder name>) within N2_S seconds, so one call can finish one experiment and start another
#   R  cells into MODELS, one `compilekit run` each (R_CELLS: "variant/mode/shape ...", bf16;
#      a cell already there is measured again; R_VERIFY=1 verifies each against a bare
#      do_bench), then MODELS published as in N (the
#      N phase runs a whole experiment, max-autotune cells first)
#   M  after N, from MODELS: bert-base 8x128 eager, default and reduce-overhead verified, its
#      top ops by time and memory, its kernel map's files; `make experiment
#      VARIANT=llama-block MODE=default` (M_LLAMA=0 leaves that out)
#   L  the lock tests (tests/measure/test_locks.py) on this torch
#   D  decode: llama2-7b (DECODE_VARIANT, e.g. llama2-7b@flex_attention or llama2-7b@triton-flash)
#      1x32+200 (DECODE_SHAPE)
#      under DECODE_MODE (default reduce-overhead),
#      with DECODE_SET (Inductor options, e.g. "coordinate_descent_tuning=true"), within D_S
#      seconds: the cell's summary, result.json and its ops; its kernel map's inputs
#      (provenance.json, the output code) as D_map.tgz
#   J  the decode loop's lab: each one-row matmul of Llama-2-7B alone, tuned and in the form
#      the loop fuses, with each kernel's tuned config (dev/gemv_read.py, within J_GEMV_S), then
#      the loop's base options and each of J_TRIES (NAME:OPTION=VALUE,... each; default PDL)
#      in one process: tokens/s, each kernel's time and config (dev/decode_pdl.py, within J_S)
#   T  dev/decode_split_tune.py: triton-flash's split policies at decode shapes against the best
#      SDPA backend, within T_S seconds; compiled against eager at batch 1 (dev/decode_compiled_look.py)
#   H  compiled against eager at decode shapes (LOOK_SHAPES), triton-flash beside sdpa
#      (LOOK_VARIANTS): host per call, Dynamo's counters, the host functions that cost the time
#      (dev/decode_compiled_look.py)
#   X  dev/triton_flash_bench.py: triton-flash and gluon-flash, eager and compiled, against cuDNN
#      and flex at the judged shapes of the kernel table (X_SHAPES), within X_S seconds; X_ARGS passes more
#      (--gluon-baseline FILE, --gluon-tiles ...)
#   P  Nsight Compute's counters (speed of light, occupancy, warp stalls, issue slots) for the
#      last of five calls of each P_CELLS "variant/shape ..." (dev/attention_calls.py; every
#      kernel in that call: cuDNN's too), where the machine's runtime gives counters; a Triton
#      autotuner's config chosen in a run without the profiler first, and pinned under it;
#      P_NCU_ARGS adds to ncu's; with "--section SourceCounters" (PC sampling) also each
#      kernel's stalls by SASS opcode and instruction (dev/ncu_stalls.py, P_*_stalls.txt)
#   A  dev/decode_attention_parts.py at A_SHAPES (default its own: batch 1 and 16, 8k and 32k
#      keys): each decode path's call, its CUDA-graph replay, and its kernels, gaps and span from
#      a profile taken after the timing, within A_S seconds (default 150); A_PATHS picks the paths
#   F  dev/triton_flash_configs.py at F_SHAPES: every triton-flash config's autotuner timing,
#      its own and F_EXTRA's, beside cuDNN, within F_S seconds
#   W  dev/gluon_power.py at W_SHAPES: gluon-flash and cuDNN in loops of W_SECONDS (default 2)
#      with nvidia-smi's clock and power, and in bursts after an idle second (FA3's benchmark
#      method), within W_S seconds; W_ARGS passes more (--gluon-tiles ..., --rounds N)
#   K  dev/decode_varlen_bench.py: triton-flash at decode shapes and triton-flash-varlen on
#      ragged batches against the other paths, checked, within K_S seconds; then
#      dev/ragged_decode_bench.py: decode over rows of different cache lengths, triton-flash's
#      per-row lengths beside the padded paths, checked, within Y_S seconds (Y_ARGS passes more)
#   Q  after B: the blog matrix again as `compilekit check` against B's sweep, every gate on (the
#      GPU runner's workflow in docs/ci.md), within Q_S seconds; then `compilekit compare` of the
#      two runs (table, markdown, json) and of each against the published H200 folder; both
#      sweeps published to $OUT/blog and $OUT/blog2
# Every phase's limit is cut to what is left before DEADLINE seconds from the start (default
# 540, at most 580), less 45 s to pack and publish: a call's limit can be less than its
# timeout_s (a fresh machine's start counts against the session's device time), and a phase
# killed with the call brings nothing back.
# PHASES="S V G" bash dev/h200_check.sh
set -u
T0=$(date +%s)
# a device call is killed at 600 s, before it packs anything: a later deadline would lose it all
if [ "${DEADLINE:-540}" -gt 580 ]; then
  echo "DEADLINE=$DEADLINE is past a device call's 600 s: using 580" >&2
  DEADLINE=580
fi
within() {  # within SECONDS: the lesser of SECONDS and what DEADLINE leaves
  local rest=$(( ${DEADLINE:-540} - ($(date +%s) - T0) - 45 ))
  echo $(( $1 < rest ? $1 : (rest > 1 ? rest : 1) ))
}
compiled_look() {  # compiled_look "SHAPES": dev/decode_compiled_look.py at each (LOOK_VARIANTS)
  for shape in $1; do
    timeout "$(within 120)" python3 dev/decode_compiled_look.py --shape "$shape" \
      --variants "${LOOK_VARIANTS:-triton-flash,sdpa}" 2>&1 | grep -v "Warning\|^/"
  done
}
sweep_into() {  # sweep_into TOML DIR SECONDS TAG: the N phase's sweep, steps and publication
  local toml=$1 dir=$2 seconds=$3 tag=$4 gpu start pages
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  if [ -n "${N_ONLY_ON:-}" ] && [[ "$gpu" != *"$N_ONLY_ON"* ]]; then
    echo "$tag skipped: this GPU is $gpu, not N_ONLY_ON=$N_ONLY_ON" | tee "$OUT/${tag}_sweep.txt"
    return
  fi
  [ "$tag" = N ] && for v in ${N_DROP:-}; do rm -rf "${dir:?}"/${v}__*; done  # unquoted: v may glob
  start=$(date +%s)
  timeout "$(within "$seconds")" python3 -m compilekit sweep "$toml" --out "$dir" \
    --per-gpu "${PER_GPU:-4}" ${SWEEP_ARGS:-} > "$OUT/${tag}_sweep.txt" 2>&1
  echo "$tag sweep rc=$? wall_s $(( $(date +%s) - start ))" | tee -a "$OUT/${tag}_sweep.txt"
  python3 dev/sweep_steps.py "$dir" > "$OUT/${tag}_steps.txt" 2>&1
  pages=$(for c in $bert_default ${bert//MODE/reduce-overhead} \
    llama-block@triton-flash__default__1x2048__bfloat16__cuda; do
    [ -f "$dir/$c/result.json" ] && echo "--page $c"; done)
  python3 -m compilekit publish "$dir" "$OUT/$(basename "$dir")" $pages > "$OUT/${tag}_publish.txt" 2>&1
  tail -3 "$OUT/${tag}_sweep.txt"
}
# once per machine: a second instance started beside the first (a phase run in the
# background) must not reinstall under the first one's imports
if [ ! -f /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
  if ls .whl/models/*.whl > /dev/null 2>&1; then  # after the first target: torch's own deps win
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site2 .whl/models/*.whl
  fi
  touch /tmp/site/.installed
fi
export PYTHONPATH=/tmp/site:/tmp/site2:$PWD PYTHONUNBUFFERED=1 COMPILEKIT_CACHE=/tmp/ck-cache
# everything goes under one folder, packed into $OUT/results.tgz at the end: a device call
# brings back at most 8 files
BACK=${OUT:-/tmp/back}
OUT=/tmp/ck-out
rm -rf "$OUT"  # a machine may be lent again with an earlier call's files still there
mkdir -p "$OUT" "$BACK"
trap 'tar czf "$BACK/results.tgz" -C "$OUT" .' EXIT
nvidia-smi -L | tee "$OUT/gpu.txt"
runs=/tmp/runs
blog=8x16x1024x64
MODELS=${MODELS:-/tmp/models}
bert=bert-base__MODE__8x128__bfloat16__cuda
bert_default=${bert//MODE/default}
cell() { python3 -m compilekit run --variant "$1" --mode "$2" --out $runs "${@:3}"; }
steps() { python3 -c "import json,sys; r=json.load(open(sys.argv[1]+'/result.json')); print(r['status'], r['compiled_ms'], r['wall_s'], json.dumps(r['steps_s']))" "$1"; }
for phase in ${PHASES:-S V G}; do
  echo "=== phase $phase $(date +%T)" | tee -a "$OUT/phases.txt"
  case $phase in
    C)
      timeout "$(within "${C_S:-120}")" python3 dev/cold_breakdown.py cuda > "$OUT/C_bare.txt" 2>&1 ;;
    S)
      for run in cold warm warm2; do
        start=$(date +%s.%N)
        cell naive default > "$OUT/S_$run.txt" 2>&1
        end=$(date +%s.%N)
        echo "$run wall_s $(python3 -c "print(round($end-$start,1))")" | tee -a "$OUT/S_walls.txt"
        steps $runs/naive__default__${blog}__bfloat16__cuda >> "$OUT/S_walls.txt"
      done ;;
    V)
      cell sdpa eager > "$OUT/V_sdpa.txt" 2>&1
      cell triton-flash eager > "$OUT/V_triton.txt" 2>&1
      python3 -m compilekit verify $runs/naive__default__${blog}__bfloat16__cuda \
        $runs/sdpa__eager__${blog}__bfloat16__cuda \
        $runs/triton-flash__eager__${blog}__bfloat16__cuda 2>&1 | tee "$OUT/V_verify.txt" ;;
    G)
      # G_SHARDS pytest processes at once, the tests dealt round-robin: most of a GPU test's
      # time is compiling on the CPU, which one process leaves mostly idle (xargs -r: a shard
      # dealt no test runs nothing, not the whole suite)
      python3 -m pytest -q --collect-only -m gpu tests -p no:cacheprovider \
        -k "${GPU_TESTS:-not awkward}" 2>/dev/null | grep "::" > "$OUT/G_ids.txt"
      limit=$(within "${G_S:-400}")
      for i in $(seq 1 "${G_SHARDS:-1}"); do
        awk -v n="${G_SHARDS:-1}" -v i="$i" 'NR % n == i % n' "$OUT/G_ids.txt" > "$OUT/G_ids_$i.txt"
        timeout "$limit" xargs -r -a "$OUT/G_ids_$i.txt" python3 -m pytest -q -rA \
          -p no:cacheprovider > "$OUT/G_tests_$i.txt" 2>&1 &
      done
      wait
      tail -n 4 "$OUT"/G_tests_*.txt ;;
    A)
      timeout "$(within "${A_S:-150}")" python3 dev/decode_attention_parts.py \
        ${A_SHAPES:+--shapes "$A_SHAPES"} ${A_PATHS:+--paths "$A_PATHS"} \
        --json "$OUT/A_parts.json" > "$OUT/A_parts.txt" 2>&1
      tail -40 "$OUT/A_parts.txt" ;;
    N)
      sweep_into "${MODELS_TOML:-experiments/models.toml}" "$MODELS" "${N_S:-480}" N ;;
    N2)
      sweep_into "${MODELS_TOML2:?N2 needs MODELS_TOML2}" "${MODELS2:?N2 needs MODELS2}" "${N2_S:-480}" N2 ;;
    R)
      for spec in ${R_CELLS:-bert-base/default/8x128}; do
        shape=${spec##*/}; rest=${spec%/*}; mode=${rest##*/}; variant=${rest%/*}
        log="$OUT/R_$(echo "$variant-$mode-$shape" | tr -c 'A-Za-z0-9.-' _).txt"
        cell "$variant" "$mode" --shape "$shape" --dtype bfloat16 --out "$MODELS" > "$log" 2>&1
        head -3 "$log"
        # R_VERIFY=1: the cell re-timed with a bare do_bench in fresh processes (compilekit verify)
        if [ "${R_VERIFY:-0}" = 1 ]; then
          timeout "$(within 120)" python3 -m compilekit verify \
            "$MODELS/${variant}__${mode}__${shape}__bfloat16__cuda" >> "${log%.txt}_verify.txt" 2>&1
          tail -4 "${log%.txt}_verify.txt"
        fi
      done
      python3 -m compilekit publish "$MODELS" "$OUT/$(basename "$MODELS")" > "$OUT/R_publish.txt" 2>&1 ;;
    M)
      python3 -m compilekit verify "$MODELS/${bert//MODE/eager}" "$MODELS/$bert_default" \
        "$MODELS/${bert//MODE/reduce-overhead}" > "$OUT/M_verify.txt" 2>&1
      for by in time memory; do
        for mode in eager default; do
          python3 -m compilekit ops "$MODELS/${bert//MODE/$mode}" --by $by --top 5 \
            > "$OUT/M_ops_${mode}_$by.txt" 2>&1
        done
      done
      python3 -c "import json,collections,sys; k=json.load(open(sys.argv[1]+'/kernels.json')); c=collections.Counter()
for r in k['by_source_line']: c[r['file'].rsplit('/',1)[-1]]+=r['attributed_ms']
t=sum(c.values()); print({f: round(v/t,3) for f,v in c.most_common()})" "$MODELS/$bert_default" > "$OUT/M_files.txt" 2>&1
      if [ "${M_LLAMA:-1}" = 0 ]; then
        :  # the llama-block front door already shown
      elif command -v make > /dev/null; then
        make experiment VARIANT=llama-block MODE=default OUT=$runs > "$OUT/M_llama_default.txt" 2>&1
      else
        echo "(no make here: the command it runs)" > "$OUT/M_llama_default.txt"
        cell llama-block default >> "$OUT/M_llama_default.txt" 2>&1
      fi
      cat "$OUT/M_verify.txt" "$OUT/M_files.txt" ;;
    D)
      timeout "$(within "${D_S:-300}")" python3 -m compilekit run --variant "${DECODE_VARIANT:-llama2-7b}" \
        --mode "${DECODE_MODE:-reduce-overhead}" --shape "${DECODE_SHAPE:-1x32+200}" --out $runs \
        $(for o in ${DECODE_SET:-}; do printf -- "--set %s " "$o"; done) > "$OUT/D_run.txt" 2>&1
      echo "decode rc=$?" >> "$OUT/D_run.txt"
      decode=$(ls -td "$runs/${DECODE_VARIANT:-llama2-7b}"__* | head -1)  # with its --set options
      cp $decode/result.json "$OUT/D_result.json"
      python3 -m compilekit ops $decode --top 12 > "$OUT/D_ops.txt" 2>&1
      python3 -m compilekit kernels $decode > "$OUT/D_kernels.txt" 2>&1
      cp $decode/log.txt "$OUT/D_log.txt" 2> /dev/null
      (cd "$decode" && tar czf "$OUT/D_map.tgz" provenance.json forward.json output_code_graph*.py 2> /dev/null)
      tail -12 "$OUT/D_run.txt" ;;
    J)
      timeout "$(within "${J_GEMV_S:-100}")" python3 dev/gemv_read.py --json "$OUT/J_gemv.json" \
        > "$OUT/J_gemv.txt" 2>&1
      grep -v "Warning\|^/\|^         " "$OUT/J_gemv.txt"
      timeout "$(within "${J_S:-420}")" python3 dev/decode_pdl.py --json "$OUT/J_loop.json" \
        $(for t in ${J_TRIES:-pdl:triton.enable_pdl=true}; do printf -- "--try %s " "$t"; done) \
        > "$OUT/J_loop.txt" 2>&1
      grep -v "Warning\|^/" "$OUT/J_loop.txt" | tail -60 ;;
    K)
      timeout "$(within "${K_S:-240}")" python3 dev/decode_varlen_bench.py --check --json "$OUT/K_bench.json" ${K_ARGS:-} \
        > "$OUT/K_bench.txt" 2>&1
      cat "$OUT/K_bench.txt" | grep -v "^ "
      timeout "$(within "${Y_S:-200}")" python3 dev/ragged_decode_bench.py --check \
        --json "$OUT/Y_ragged.json" ${Y_ARGS:-} > "$OUT/Y_ragged.txt" 2>&1
      grep -v "Warning\|^/\|^ " "$OUT/Y_ragged.txt" ;;
    T)
      timeout "$(within "${T_S:-240}")" python3 dev/decode_split_tune.py --json "$OUT/T_tune.json" \
        > "$OUT/T_tune.txt" 2>&1
      grep -v "Warning\|^/" "$OUT/T_tune.txt"
      compiled_look "${LOOK_SHAPES:-1x32g8x1x32768x128}" | tee "$OUT/T_compiled.txt" ;;
    H)
      compiled_look "${LOOK_SHAPES:-1x32g8x1x1024x128 1x32g8x1x32768x128}" \
        | tee "$OUT/H_compiled.txt" ;;
    X)
      # our kernels against cuDNN at the kernel table's judged shapes, in one process; X_ARGS, e.g.
      # "--gluon-baseline .whl/gluon_flash_before.py" (a file carried in .whl) for a before/after
      timeout "$(within "${X_S:-300}")" python3 dev/triton_flash_bench.py --json "$OUT/X_bench.json" \
        --shapes "${X_SHAPES:-8x16x1024x64,16x16x512x64,2x32x4096x128,1x32x8192x128,3x24x3072x128,2x8x6000x64}" \
        ${X_ARGS:-} > "$OUT/X_bench.txt" 2>&1
      grep -v "Warning\|^/" "$OUT/X_bench.txt" | tail -60 ;;
    W)
      timeout "$(within "${W_S:-300}")" python3 dev/gluon_power.py --gluon-tiles "" \
        --shapes "${W_SHAPES:-4x16x4096x128,2x16x8192x128,1x16x16384x128,2x32x4096x128,1x32x8192x128,3x24x3072x128}" \
        --seconds "${W_SECONDS:-2}" --csv "$OUT/W_samples.csv" ${W_ARGS:-} > "$OUT/W_power.txt" 2>&1
      grep -v "Warning\|^/" "$OUT/W_power.txt" | tail -30 ;;
    P)
      for spec in ${P_CELLS:-gluon-flash/1x32x8192x128 sdpa-cudnn/1x32x8192x128 triton-flash/16x16x512x64 sdpa-cudnn/16x16x512x64}; do
        variant=${spec%%/*}; shape=${spec#*/}
        log="$OUT/P_$(echo "$variant-$shape" | tr -c 'A-Za-z0-9.-' _).txt"
        # the configs its autotuners choose without the profiler, pinned under it (ncu's
        # instrumentation distorts an autotuner's timings: dev/attention_calls.py)
        timeout "$(within 60)" python3 dev/attention_calls.py "$variant" "$shape" \
          --tuned-json /tmp/P_tuned.json > "$log" 2>&1
        # PC sampling (SourceCounters): the report kept, for its source page's stalls per
        # SASS instruction (dev/ncu_stalls.py); its details printed as without a report
        rep=(); [[ "${P_NCU_ARGS:-}" == *SourceCounters* ]] && rep=(-f -o "/tmp/$(basename "$log" .txt)")
        # the clocks as they are (the device's METHOD.md): counters, not a timing
        timeout "$(within 150)" ncu --clock-control none --nvtx --nvtx-include "timed/" \
          --section SpeedOfLight --section Occupancy --section LaunchStats \
          --section MemoryWorkloadAnalysis --section WarpStateStats \
          --section ComputeWorkloadAnalysis --section SchedulerStats ${P_NCU_ARGS:-} ${rep[@]+"${rep[@]}"} \
          python3 dev/attention_calls.py "$variant" "$shape" --pin /tmp/P_tuned.json >> "$log" 2>&1
        echo "$spec rc=$?"
        if [ ${#rep[@]} -gt 0 ]; then
          ncu --import "${rep[2]}.ncu-rep" >> "$log" 2>&1
          ncu --import "${rep[2]}.ncu-rep" --page source --csv --print-source sass > "${log%.txt}_sass.csv" 2>&1
          python3 dev/ncu_stalls.py "${log%.txt}_sass.csv" > "${log%.txt}_stalls.txt" 2>&1
          head -30 "${log%.txt}_stalls.txt"
        fi
        grep -E "^ +(Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Issue Slots Busy)" "$log" | head -14
      done ;;
    F)
      timeout "$(within "${F_S:-200}")" python3 dev/triton_flash_configs.py \
        --shapes "${F_SHAPES:-16x16x512x64}" ${F_EXTRA:+--extra "$F_EXTRA"} > "$OUT/F_configs.txt" 2>&1
      head -40 "$OUT/F_configs.txt" ;;
    L)
      python3 -m pytest -q -p no:cacheprovider tests/measure/test_locks.py > "$OUT/L_locks.txt" 2>&1
      tail -3 "$OUT/L_locks.txt" ;;
    Q)
      timeout "$(within "${Q_S:-300}")" python3 -m compilekit check experiments/blog_part3.toml \
        --baseline /tmp/blog --out /tmp/blog2 --per-gpu "${PER_GPU:-4}" --max-slowdown 5% \
        --max-graph-breaks 0 --max-recompiles 0 --no-new-kernels --max-peak-memory-growth 10% \
        > "$OUT/Q_check.txt" 2>&1
      echo "check rc=$?" | tee -a "$OUT/Q_check.txt"
      for f in table markdown json; do
        python3 -m compilekit compare /tmp/blog /tmp/blog2 --format $f > "$OUT/Q_compare.$f" 2>&1
      done
      for run in blog blog2; do
        python3 -m compilekit compare experiments/results/h200/blog_part3 /tmp/$run \
          > "$OUT/Q_published_$run.txt" 2>&1
        python3 -m compilekit publish /tmp/$run "$OUT/$run" > /dev/null 2>&1
      done
      for m in eager default reduce-overhead; do  # the memory timeline of naive's cells
        python3 -m compilekit memory "/tmp/blog/naive__${m}__${blog}__bfloat16__cuda" \
          > "$OUT/Q_memory_$m.txt" 2>&1
      done
      tail -20 "$OUT/Q_check.txt"; head -60 "$OUT/Q_compare.table"; cat "$OUT"/Q_memory_*.txt ;;
    B)
      start=$(date +%s)
      # B_THREADS: Inductor's compile workers per cell process (its default: one per core, in
      # each of PER_GPU processes at once)
      ${B_THREADS:+env TORCHINDUCTOR_COMPILE_THREADS=$B_THREADS} \
      timeout "$(within "${B_S:-480}")" python3 -m compilekit sweep experiments/blog_part3.toml --out /tmp/blog \
        --per-gpu "${PER_GPU:-4}" \
        > "$OUT/B_sweep.txt" 2>&1
      echo "blog sweep rc=$? wall_s $(( $(date +%s) - start ))" | tee -a "$OUT/B_sweep.txt"
      python3 dev/sweep_steps.py /tmp/blog > "$OUT/B_steps.txt" 2>&1 ;;
  esac
done
