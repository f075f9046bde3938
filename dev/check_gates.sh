#!/usr/bin/env bash
# `compilekit check` of experiments/cpu_small.toml against its committed baseline
# (experiments/results/cpu/cpu_small), every gate on, run two ways (issue 78):
#   repeats N   N checks of the code as it is, each into a fresh folder: how often a gate
#               fails unchanged code (the false-positive rate; the target is 0)
#   injected    three regressions planted in variants/naive.py, one at a time, each undone
#               after its check: a graph break, a slower computation (the scores computed
#               twice), a 5 ms sleep in the forward; each check must exit 1
# A line per check (rc, the comparison's verdict counts, the gates' failures) goes to stdout.
# Usage: bash dev/check_gates.sh repeats 10 | injected   [OUT=/tmp/check-gates]
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/check-gates}
GATES="--max-slowdown 5% --max-graph-breaks 0 --max-recompiles 0 --no-new-kernels --max-peak-memory-growth 10%"
check() {  # check NAME: one check into $OUT/NAME, its summary line
  rm -rf "${OUT:?}/$1"; mkdir -p "$OUT"
  python3 -m compilekit check experiments/cpu_small.toml \
    --baseline experiments/results/cpu/cpu_small --out "$OUT/$1" $GATES > "$OUT/$1.txt" 2>&1
  local rc=$?
  echo "$1 rc=$rc $(grep -m1 'cells on both sides' "$OUT/$1.txt") | $(grep -m1 '^gates:' "$OUT/$1.txt")"
  grep '^- ' "$OUT/$1.txt" | head -5
}
case ${1:-} in
  repeats)
    for i in $(seq 1 "${2:-10}"); do check "repeat-$i"; done ;;
  injected)
    cp variants/naive.py /tmp/naive.py.orig
    trap 'cp /tmp/naive.py.orig variants/naive.py' EXIT
    inject() {  # inject NAME PYTHON: a rewrite of naive.py's forward, then its check
      cp /tmp/naive.py.orig variants/naive.py
      python3 -c "$2" variants/naive.py || exit 1
      check "$1"
    }
    inject graph-break 'import sys; p=sys.argv[1]; s=open(p).read()
s=s.replace("    scores = scores * (", "    torch._dynamo.graph_break()\n    scores = scores * (", 1)
assert "graph_break" in s; open(p, "w").write(s)'
    inject slower 'import sys; p=sys.argv[1]; s=open(p).read()
s=s.replace("    scores = scores * (", "    scores = (scores + torch.matmul(q * 1.0000001, k.transpose(-2, -1))) / 2\n    scores = scores * (", 1)
assert "1.0000001" in s; open(p, "w").write(s)'
    inject sleep 'import sys; p=sys.argv[1]; s=open(p).read()
s=s.replace("    scores = scores * (", "    __import__(\"time\").sleep(0.005)\n    scores = scores * (", 1)
assert "sleep" in s; open(p, "w").write(s)' ;;
  *) echo "usage: bash dev/check_gates.sh repeats N | injected" >&2; exit 2 ;;
esac
