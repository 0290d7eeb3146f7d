#!/bin/sh
# Issue 4's loop at a scale where prompt sampling no longer swamps a 5% error (docs/two-regime.md,
# section 10): record goose@B and iso:2@B traces (B = FIT_BUDGET, default 8, as
# traces/record-small.sh does) on the first N_FIT prompts of a set, then run `goose loop` on them,
# which fits, exports the cost-aware topologies and validates them against goose and ar on the
# next N_HOLD prompts. Record at the budget the loop will export (15 with the 2-thread profile
# below): the adjacency table is richer under larger trees, so rates fitted at 8 underrate
# transitions at 15 (docs/two-regime.md, section 14). PRIOR = "prior" records goose+prior and
# iso:2+prior and runs the loop with --prior, so fit and validation both draft with the model's
# successor prior (goose_runtime/prior.py).
# Usage (from the repository root):
#   sh bench/holdout_large.sh SET N_FIT N_HOLD OUT_DIR [LATENCY_JSON] [THREADS] [FIT_BUDGET] [PRIOR]
# e.g. sh bench/holdout_large.sh stdlib-wide 200 197 runs/wide bench/results/latency_cpu2t_2026-11-30.json 2
# SET may be a built-in set (humaneval-shuffled, ...) or a JSONL file (docs/two-regime.md section 12).
# Writes OUT_DIR/traces/NAME-bB.parquet (NAME: the set, or the file's stem) and OUT_DIR/loop/
# (validation.json, topologies, report).
set -e
SET=$1
N_FIT=$2
N_HOLD=$3
OUT=$4
LATENCY=${5:-}
T=${6:-1}
FB=${7:-8}
case "${8:-}" in
  "") SUFFIX=""; LOOP_PRIOR="" ;;
  prior) SUFFIX="+prior"; LOOP_PRIOR="--prior" ;;
  *) echo "PRIOR (8th argument) must be 'prior' or empty, not '$8'" >&2; exit 2 ;;
esac
NAME=$(basename "$SET" .jsonl)  # a JSONL set is labelled by its file stem
if [ -z "$OUT" ]; then
  echo "usage: sh bench/holdout_large.sh SET N_FIT N_HOLD OUT_DIR [LATENCY_JSON] [THREADS] [FIT_BUDGET] [PRIOR]" >&2
  exit 2
fi
mkdir -p "$OUT/traces"
OMP_NUM_THREADS=$T .venv/bin/goose decode --method "goose$SUFFIX@$FB" --compare "iso:2$SUFFIX@$FB" --bench "$SET" --limit "$N_FIT" \
  --max-new-tokens 128 --threads "$T" --json --trace-out "$OUT/traces/$NAME-b$FB.parquet" > "$OUT/traces/$NAME-b$FB.json"
OMP_NUM_THREADS=$T .venv/bin/goose loop --traces "$OUT/traces" --bench "$SET" --limit "$N_HOLD" \
  ${LATENCY:+--latency "$LATENCY"} --threads "$T" --out-dir "$OUT/loop" $LOOP_PRIOR
