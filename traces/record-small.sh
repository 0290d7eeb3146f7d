#!/bin/sh
# Small-budget traces (budget 8): the cost-aware budgets on this CPU are 4-17, and the adjacency
# table a small tree harvests is sparser than a B = 60 tree's, so transition acceptance and slot
# fill must be fitted from trees of that size (see goose_theory/regimefit.py).
# Usage: sh traces/record-small.sh [prompts per set] [threads]     (from the repository root)
set -e
N=${1:-16}
T=${2:-1}
for b in humaneval mtbench stdlib; do
  OMP_NUM_THREADS=$T .venv/bin/goose decode --method goose@8 --compare iso:2@8 --bench $b --limit $N \
    --max-new-tokens 128 --threads $T --trace-out traces/$b-b8.parquet
done
