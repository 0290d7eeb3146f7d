#!/bin/sh
# Small-budget traces: the cost-aware budgets on this CPU are 4-19, and the adjacency table a small
# tree harvests is sparser than a B = 60 tree's, so transition acceptance and slot fill must be
# fitted from trees of about that size (see goose_theory/regimefit.py: the fit takes the methods
# whose budget is nearest to the one it optimises for).
# Usage: sh traces/record-small.sh [prompts per set] [threads] [budget]   (from the repository root)
# writes traces/<set>-b<budget>.parquet: goose@<budget> and iso:2@<budget> on the first N prompts
set -e
N=${1:-16}
T=${2:-1}
B=${3:-8}
for b in humaneval mtbench stdlib; do
  OMP_NUM_THREADS=$T .venv/bin/goose decode --method goose@$B --compare iso:2@$B --bench $b --limit $N \
    --max-new-tokens 128 --threads $T --trace-out traces/$b-b$B.parquet
done
