"""Tiny random models of other families, saved as a user's folder would be (shared by
``tests/test_architectures.py`` and ``bench/check_families.py``; not a test module).

Each model is randomly initialised from a family's config, with the default model's tokenizer so a
real prompt encodes, and saved with ``save_pretrained``: ``load_model`` then meets it exactly as it
meets a user's checkpoint. ``stock_greedy`` is transformers' own greedy ``generate`` on the saved
model, without any of ``load_model``'s rewiring: the reference ``ar`` must equal.
"""
from __future__ import annotations

import pathlib
import sysconfig
from typing import Any, Callable

import torch


def default_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from goose_runtime.model import default_model_dir
    return AutoTokenizer.from_pretrained(str(default_model_dir()), local_files_only=True)


def tiny_sizes(tokenizer: Any) -> tuple[dict, dict]:
    """(the tokenizer's ids, two small layers): the keyword arguments most configs take."""
    ids = dict(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    layers = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
    return ids, layers


def save_family(folder: pathlib.Path | str, config: Callable[[], Any], tokenizer: Any) -> pathlib.Path:
    """A model of ``config()`` with seed-0 random weights, saved with ``tokenizer`` under ``folder``."""
    from transformers import AutoModelForCausalLM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return pathlib.Path(folder)


def family_prompt() -> str:
    """A stdlib passage, then its start again: where the model copies it, matching fires."""
    src = (pathlib.Path(sysconfig.get_paths()["stdlib"]) / "heapq.py").read_text(encoding="utf-8")
    passage = src[src.index('"""') + 3:][:400]
    return passage + "\n\n" + passage[:80]


def stock_greedy(folder, ids: list[int], new_tokens: int) -> list[int]:
    """Greedy decoding by transformers itself, on the model as saved (none of load_model's rewiring)."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True).eval()
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False)
    return out[0, len(ids):].tolist()
