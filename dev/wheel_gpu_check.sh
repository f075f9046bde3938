#!/usr/bin/env bash
# compilekit installed as users install it, on a GPU: one device call (the `device` tool,
# carry [".whl"]) with .whl/*.whl (../shared/wheels), .whl/models/*.whl (transformers) and
# .whl/ck/compilekit-*.whl (`pip wheel --no-deps . -w .whl/ck` here). Installs the wheel apart
# from the checkout, then from a folder outside it:
#   list; triton-flash under default at the blog shape (its kernel lines in the installed
#   variant file, its autotuner's choice), and `compilekit verify` of it against a bare
#   do_bench; sdpa-efficient refused at a GQA decode shape (one sentence);
#   compilekit.profile(lines=True) around tiny BERT and Qwen2 on CUDA with a range of the
#   user's inside, and a nested profile() refused.
# Then, from the checkout, the GPU-marked tests (GPU_TESTS, a pytest -k expression) within
# G_S seconds. Everything lands in $OUT.
#   bash dev/wheel_gpu_check.sh
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site2 .whl/models/*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/ck .whl/ck/*.whl || exit 1
checkout=$PWD
export PYTHONUNBUFFERED=1 COMPILEKIT_CACHE=/tmp/ck-cache
nvidia-smi -L | tee "$OUT/gpu.txt"
mkdir -p /tmp/elsewhere && cd /tmp/elsewhere || exit 1
(
  export PYTHONPATH=/tmp/ck:/tmp/site:/tmp/site2
  python3 -c "import compilekit, compilekit.variants as v; print(compilekit.__file__, v.__path__)"
  python3 -c "import variants" 2>&1 | tail -1
  python3 -m compilekit list | head -3
  python3 -m compilekit run --variant triton-flash --mode default --out runs
  python3 -c "
import json
k = json.load(open('runs/triton-flash__default__8x16x1024x64__bfloat16__cuda/kernels.json'))
for r in k['kernels']:
    print(r['name'][:40], r['device_ms'], [(l['file'], l['line']) for l in r['source_lines']][:2])
r = json.load(open('runs/triton-flash__default__8x16x1024x64__bfloat16__cuda/result.json'))
print('autotuned', json.dumps(r.get('autotuned'))[:300])"
  python3 -m compilekit verify runs/triton-flash__default__8x16x1024x64__bfloat16__cuda
  python3 -m compilekit run --variant sdpa-efficient --mode eager --shape 1x32g8x1x8192x128 \
    --out runs
  python3 - <<'EOF'
import torch, transformers as tf, compilekit
from compilekit.model.errors import UserError
for name, model in {
    "bert": tf.BertModel(tf.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=128, vocab_size=1000)),
    "qwen2": tf.Qwen2Model(tf.Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)),
}.items():
    model = model.eval().cuda().to(torch.bfloat16)
    ids = torch.randint(0, 1000, (4, 64), device="cuda")
    with torch.no_grad(), compilekit.profile(f"prof-{name}", lines=True) as p:
        with torch.profiler.record_function("my forward"):
            model(ids)
    top = sorted(p.lines, key=lambda r: -r["attributed_ms"])[:3]
    print(name, "kernels", len(p.kernels), "device ms", round(p.forward_device_ms, 4),
          "top lines", [(r["file"].split("/")[-1], r["line"], round(r["attributed_ms"], 4)) for r in top])
with compilekit.profile():
    try:
        with compilekit.profile():
            pass
    except UserError as exc:
        print("nested:", exc)
EOF
) > "$OUT/wheel.txt" 2>&1
cd "$checkout" || exit 1
export PYTHONPATH=/tmp/site:/tmp/site2:$PWD
left=$(( ${G_S:-420} - ($(date +%s) - T0) ))
timeout "$(( left > 30 ? left : 30 ))" python3 -m pytest -q -rA -m gpu tests -p no:cacheprovider \
  -k "${GPU_TESTS:-not awkward}" > "$OUT/G_tests.txt" 2>&1
tail -5 "$OUT/G_tests.txt"
