#!/bin/sh
# Small-budget traces: the cost-aware budgets on this CPU are 4-19, and the adjacency table a small
# tree harvests is sparser than a B = 60 tree's, so transition acceptance and slot fill must be
# fitted from trees of about that size (see goose_theory/regimefit.py: the fit takes the methods
# whose budget is nearest to the one it optimises for).
# Usage: sh traces/record-small.sh [prompts per set] [threads] [budget] [prior]   (from the repository root)
# writes traces/<set>-b<budget>.parquet: goose@<budget> and iso:2@<budget> on the first N prompts;
# with "prior" as the 4th argument, goose+prior@<budget> and iso:2+prior@<budget> into
# traces/prior/<set>-b<budget>.parquet (what `make run`'s `goose loop --prior` fits)
set -e
N=${1:-16}
T=${2:-1}
B=${3:-8}
case "${4:-}" in
  "") SUFFIX=""; DIR=traces ;;
  prior) SUFFIX="+prior"; DIR=traces/prior ;;
  *) echo "the 4th argument must be 'prior' or empty, not '$4'" >&2; exit 2 ;;
esac
mkdir -p "$DIR"
for b in humaneval mtbench stdlib; do
  OMP_NUM_THREADS=$T .venv/bin/goose decode --method "goose$SUFFIX@$B" --compare "iso:2$SUFFIX@$B" --bench $b --limit $N \
    --max-new-tokens 128 --threads $T --trace-out "$DIR/$b-b$B.parquet"
done
