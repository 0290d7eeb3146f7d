"""Would a prediction that knows the held-out prompts' lengths miss MT-Bench's halves by less?

The loop predicts a held-out half's tau from the fitted half as a whole, and MT-Bench's 40-question
halves differ by about 8% (``docs/two-regime.md`` section 15; ``bench_split_strata.py``: an exact
model of the fitted half misses a random 40 / 40 split by sd 6.2%). Much of the spread is a few
long questions (extraction: a text to copy from, tau 3-8 against 2) landing on one side. The
prompt is known before decoding, so a prediction may use it. This takes one method's per-question
tokens and cycles (traces covering all 80 questions), splits them 40 / 40 many times (seeded) and
compares two predictions of the held-out half's pooled tau (tokens / cycles):

- ``whole``: the fitted half's pooled tau (what an exact model of the fitted half predicts);
- ``by length``: cycles per token regressed on log(question characters) over the fitted half
  (weighted by tokens), averaged over the held-out questions' lengths (each weighted alike: their
  token counts are not known before decoding).

Printed per prediction: mean error (bias), sd, the share of splits within 5%.

    .venv/bin/python bench/bench_prompt_length.py TRACES.parquet... [--method goose+prior@15] [--draws 4000]
"""
from __future__ import annotations

import numpy as np

import bench_split_strata as strata  # run as a script from the repo root: bench/ is on sys.path


def per_question(paths: list[str], method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens, cycles, log characters of the question's first turn) per question, over the
    traces (a question once; it must be in them all alike: greedy, table reset per prompt)."""
    tokens, cycles, chars = strata.per_question(paths, method, key=lambda q: len(q["turns"][0]))
    return tokens, cycles, np.log(chars)


def by_length(tokens, cycles, x, fit, held) -> float:
    """The held-out half's pooled tau predicted from the fitted half's cycles per token on x."""
    slope, intercept = np.polyfit(x[fit], cycles[fit] / tokens[fit], 1, w=np.sqrt(tokens[fit]))
    per_token = np.clip(slope * x[held] + intercept, 1.0 / 64, 1.0)  # a cycle emits 1..64 tokens
    return 1.0 / per_token.mean()


def errors(tokens, cycles, x, *, draws: int, seed: int) -> dict[str, np.ndarray]:
    """(prediction / held-out pooled tau - 1) of both predictions over ``draws`` seeded splits."""
    rng = np.random.default_rng(seed)
    out = {"whole": np.empty(draws), "by length": np.empty(draws)}
    for d in range(draws):
        fit = rng.permutation(tokens.size)[: tokens.size // 2]
        held = np.setdiff1d(np.arange(tokens.size), fit)
        measured = tokens[held].sum() / cycles[held].sum()
        out["whole"][d] = tokens[fit].sum() / cycles[fit].sum() / measured - 1
        out["by length"][d] = by_length(tokens, cycles, x, fit, held) / measured - 1
    return out


def main(argv=None) -> int:
    args = strata.split_args(argv, __doc__.splitlines()[0])
    tokens, cycles, x = per_question(args.traces, args.method)
    tau = tokens / cycles
    print(f"{args.method}: {tokens.size} questions, pooled tau {tokens.sum() / cycles.sum():.3f}, "
          f"corr(tau, log chars) {np.corrcoef(tau, x)[0, 1]:.2f}; {args.draws} random splits "
          f"{tokens.size // 2} / {tokens.size - tokens.size // 2}")
    for name, e in errors(tokens, cycles, x, draws=args.draws, seed=args.seed).items():
        print(f"  {name:9s}  bias {100 * e.mean():+5.1f}%  sd {100 * e.std():4.1f}%  "
              f"within 5%: {100 * np.mean(np.abs(e) <= 0.05):3.0f}% of splits")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
