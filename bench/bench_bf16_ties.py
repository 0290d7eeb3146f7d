"""How often do two logits tie exactly at the top in bf16? Prefill logits of a few prompts per set.

A tie at the top is where the token a readout reports as the argmax depends on how it breaks ties;
greedy decoding (``torch.argmax``) takes the smaller token id. Before 3 Dec the torch readout
(CUDA, bf16, vocabularies not in 64-column blocks) broke ties with ``torch.topk``, which left the
order open and broke them differently at k = 1 (``ar``) and k = 10 (a tree), so every tie could
send a tree method off ``ar``'s path. This counts the positions where that could happen.

    .venv/bin/python bench/bench_bf16_ties.py [--sets humaneval,mtbench,stdlib] [--limit 3] [--dtype bfloat16]
"""
from __future__ import annotations

import argparse

import torch

from goose_runtime.model import load_model
from goose_runtime.prompts import load_prompts
from goose_runtime.runner import encode_prompt

MAX_TOKENS = 400  # positions per prompt (the prefill's logits)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="humaneval,mtbench,stdlib")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    args = ap.parse_args(argv)
    bundle = load_model(dtype=args.dtype)
    for bench in args.sets.split(","):
        ties = positions = 0
        for prompt in load_prompts(bench, limit=args.limit):
            ids = torch.tensor([encode_prompt(bundle, prompt)[:MAX_TOKENS]], device=bundle.device)
            with torch.inference_mode():
                top = torch.topk(bundle.model(input_ids=ids).logits[0].float(), 2, dim=-1).values
            ties += int((top[:, 0] == top[:, 1]).sum())
            positions += top.shape[0]
        print(f"{bench}, {args.dtype}: {ties} of {positions} positions have two equal top logits "
              f"({100.0 * ties / positions:.2f}%)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
