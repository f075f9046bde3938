#!/usr/bin/env bash
# The H200 verification, in phases that survive several device calls: each long phase runs in
# its own session (setsid) and leaves a marker when done; a call waits up to WAIT_S seconds, then
# copies what exists to $OUT. Run it again (within the machine's warm window) to go on.
# Usage: bash experiments/h200_verify.sh   (needs the wheels in .whl/, see the README)
set -u
WAIT_S=${WAIT_S:-540}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPILEKIT_CACHE=/tmp/ckcache
R=/tmp/res; mkdir -p $R
NGPU=$(nvidia-smi -L | wc -l); GPUS=$(seq -s, 0 $((NGPU - 1)))
start=$(date +%s)

phases() {
  local t
  if [ ! -e $R/blog_cold.done ]; then
    python3 -m compilekit sweep experiments/blog_part3.toml --out /tmp/blog --gpus $GPUS > $R/blog_cold.log 2>&1
    touch $R/blog_cold.done
  fi
  if [ ! -e $R/blog_warm.done ]; then
    t=$(date +%s); python3 -m compilekit sweep experiments/blog_part3.toml --out /tmp/blog_warm_all --gpus $GPUS --force > $R/blog_warm_all.log 2>&1
    echo "blog matrix warm on GPUs $GPUS: $(( $(date +%s) - t )) s" >> $R/figures.txt
    if [ "$NGPU" -gt 1 ]; then
      t=$(date +%s); python3 -m compilekit sweep experiments/blog_part3.toml --out /tmp/blog_warm_1 --gpus 0 --force > $R/blog_warm_1.log 2>&1
      echo "blog matrix warm on GPU 0 alone: $(( $(date +%s) - t )) s" >> $R/figures.txt
    fi
    touch $R/blog_warm.done
  fi
  if [ ! -e $R/cell.done ]; then
    for i in 1 2; do
      s=$(date +%s%N)
      if command -v make >/dev/null; then make -s experiment VARIANT=naive MODE=default PYTHON=python3 OUT=/tmp/single
      else python3 -m compilekit run --variant naive --mode default --out /tmp/single; fi > $R/single_$i.log 2>&1
      echo "make experiment naive default, run $i: $(( ($(date +%s%N) - s) / 1000000 )) ms wall" >> $R/figures.txt
    done
    python3 -m compilekit run --variant naive --mode max-autotune --out /tmp/single > $R/single_ma.log 2>&1
    { for c in naive__default naive__reduce-overhead naive__cudagraphs flex__default sdpa-cudnn__eager sdpa__eager sdpa-math__eager; do
        python3 -m compilekit kernels /tmp/blog/${c}__8x16x1024x64__bfloat16__cuda; echo; done
      python3 -m compilekit diff /tmp/blog/naive__default__8x16x1024x64__bfloat16__cuda /tmp/blog/naive__max-autotune__8x16x1024x64__bfloat16__cuda
    } > $R/kernels.txt 2>&1
    python3 -m pytest -q -m gpu tests/test_gpu.py > $R/pytest_gpu.log 2>&1
    touch $R/cell.done
  fi
  if [ ! -e $R/seqlen.done ]; then
    python3 -m compilekit sweep experiments/seqlen.toml --out /tmp/seqlen --gpus $GPUS > $R/seqlen.log 2>&1
    touch $R/seqlen.done
  fi
  touch $R/all.done
}

if [ ! -e $R/running ]; then touch $R/running; setsid bash -c "$(declare -f phases); R=$R GPUS=$GPUS NGPU=$NGPU; phases" > $R/phases.log 2>&1 & fi
while [ ! -e $R/all.done ] && [ $(( $(date +%s) - start )) -lt $WAIT_S ]; do sleep 10; done
cat $R/figures.txt 2>/dev/null; ls $R; tail -n 3 $R/*.log
for d in blog seqlen blog_warm_all blog_warm_1; do [ -d /tmp/$d ] && python3 -m compilekit report /tmp/$d > $R/report_$d.txt 2>&1; done
tar czf $OUT/results.tgz -C /tmp res $(cd /tmp && ls -d blog/REPORT.md blog/*.png blog/env.json seqlen/REPORT.md seqlen/*.png seqlen/env.json blog_warm_all/REPORT.md blog_warm_1/REPORT.md 2>/dev/null)
tar czf $OUT/blog_runs.tgz --exclude=trace.json --exclude=torch_trace --exclude=depyf -C /tmp blog 2>/dev/null
