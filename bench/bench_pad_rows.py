"""Does running a few-row linear as more rows (zero rows below) speed up the decode loop?

On the Zen 4 EPYC of 4 Dec (family 25 model 17) oneDNN took 35.0 ms over the model's linears for
1 row and 29.0 for 3 (the linear plan's table), so padding the decode step to 3 rows looked like a
free 10%. This bench answers it where it counts: in goose's decode loop, paired in one process
(the model loaded once; padding switched on and off between runs of the same prompts; the order
alternates by round), for ``ar`` and one tree method. Every run must reproduce the first run's
tokens. The padding is patched in here (it is not part of the runtime: it did not pay).

Example:
    .venv/bin/python bench/bench_pad_rows.py --rounds 4 --pad 3
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from goose_runtime import model as model_mod
from goose_runtime.cpu_speed import OneDnnLinear
from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.methods import parse_method
from goose_runtime.prompts import encode_prompt, load_prompts

PAD = {"rows": 0}  # pad inputs of fewer rows than this (0: off)
_BUFFERS: dict[tuple[int, int], torch.Tensor] = {}
_plain_forward = OneDnnLinear.forward


def _padded_forward(self, x):
    rows, pad = x.numel() // self.in_features, PAD["rows"]
    if not pad or rows >= pad or torch.is_grad_enabled() or x.dtype != torch.float32 or rows <= self._stock_rows:
        return _plain_forward(self, x)
    buf = _BUFFERS.setdefault((pad, self.in_features), torch.zeros(pad, self.in_features))
    buf[:rows].copy_(x.reshape(rows, self.in_features))
    bias = None if self.bias is None else self.bias.detach()
    out = torch.ops.mkldnn._linear_pointwise(buf, self._pack(), bias, "none", [], "")
    return out[:rows].reshape(*x.shape[:-1], self.out_features)


def _tokens_per_s(bundle, method: str, prompts) -> tuple[float, list]:
    name, _, budget = method.partition("@")
    decoder = Decoder(bundle, parse_method(name, budget=budget or None),
                      DecodeConfig(max_new_tokens=128, reset_adjacency=False))
    start, tokens = time.perf_counter(), []
    for i, ids in enumerate(prompts):
        tokens.append(list(decoder.decode(ids, prompt_id=str(i), benchmark="humaneval").token_ids))
    return sum(map(len, tokens)) / (time.perf_counter() - start), tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pad", type=int, default=3, help="inputs of fewer rows run as this many")
    ap.add_argument("--methods", default="ar,goose@8")
    ap.add_argument("--limit", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(2)
    bundle = model_mod.load_model("default", device="cpu", dtype="float32")
    OneDnnLinear.forward = _padded_forward
    prompts = [encode_prompt(bundle.tokenizer, p) for p in load_prompts("humaneval", limit=args.limit)]
    methods, speeds, reference = args.methods.split(","), {}, None
    print(f"linears: {bundle.linears}; humaneval first {args.limit}, 128 tokens, table kept, 2 threads")
    for rnd in range(args.rounds):
        for pad in ((args.pad, 0) if rnd % 2 == 0 else (0, args.pad)):
            PAD["rows"] = pad
            for method in methods:
                tps, tokens = _tokens_per_s(bundle, method, prompts)
                reference = reference or tokens
                speeds.setdefault((method, pad), []).append(tps)
                print(f"round {rnd} {method:10s} pad {pad}: {tps:6.2f} tok/s {'= ar' if tokens == reference else 'DIFF'}",
                      flush=True)
    for method in methods:
        on, off = speeds[method, args.pad], speeds[method, 0]
        print(f"{method}: padded median {statistics.median(on):.2f}, plain {statistics.median(off):.2f} tok/s; "
              f"per round {', '.join(f'{a / b:.3f}' for a, b in zip(on, off))}")


if __name__ == "__main__":
    main()
