#!/bin/sh
# Issue 4's loop at a scale where prompt sampling no longer swamps a 5% error (docs/two-regime.md,
# section 10): record goose@8 and iso:2@8 traces (as traces/record-small.sh does) on the first
# N_FIT prompts of a set, then run `goose loop` on them, which fits, exports the cost-aware
# topologies and validates them against goose and ar on the next N_HOLD prompts.
# Usage (from the repository root):
#   sh bench/holdout_large.sh SET N_FIT N_HOLD OUT_DIR [LATENCY_JSON] [THREADS]
# e.g. sh bench/holdout_large.sh stdlib-wide 200 197 runs/wide bench/results/latency_cpu2t_2026-11-30.json 2
# SET may be a JSONL file (e.g. a shuffled copy of a set; docs/two-regime.md section 12).
# Writes OUT_DIR/traces/NAME-b8.parquet (NAME: the set, or the file's stem) and OUT_DIR/loop/
# (validation.json, topologies, report).
set -e
SET=$1
N_FIT=$2
N_HOLD=$3
OUT=$4
LATENCY=${5:-}
T=${6:-1}
NAME=$(basename "$SET" .jsonl)  # a JSONL set is labelled by its file stem
if [ -z "$OUT" ]; then
  echo "usage: sh bench/holdout_large.sh SET N_FIT N_HOLD OUT_DIR [LATENCY_JSON] [THREADS]" >&2
  exit 2
fi
mkdir -p "$OUT/traces"
OMP_NUM_THREADS=$T .venv/bin/goose decode --method goose@8 --compare iso:2@8 --bench "$SET" --limit "$N_FIT" \
  --max-new-tokens 128 --threads "$T" --json --trace-out "$OUT/traces/$NAME-b8.parquet" > "$OUT/traces/$NAME-b8.json"
OMP_NUM_THREADS=$T .venv/bin/goose loop --traces "$OUT/traces" --bench "$SET" --limit "$N_HOLD" \
  ${LATENCY:+--latency "$LATENCY"} --threads "$T" --out-dir "$OUT/loop"
