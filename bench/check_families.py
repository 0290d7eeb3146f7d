"""Which model families decode correctly through goose: a sweep of tiny random models.

For each family a tiny randomly initialised model (2 layers, hidden 64, the default model's
tokenizer; :mod:`tests.families`) is saved under /tmp/goose-families/<name>, greedy-decoded 40
tokens by transformers' own ``generate`` on the stock model, then loaded through
``goose_runtime.model.load_model`` and decoded with ``ar`` (must equal ``generate``) and ``pld``,
``tr``, ``goose@8`` (must equal ``ar``; beside each, the tokens per verification call). A family
goose refuses (ALiBi, recurrent or chunked layers) prints its one-line error. Six of these
families are kept as a test (``tests/test_architectures.py``); this is the wider check the README
quotes (6 Dec 2026). Run from the repository root (~2 min):

    .venv/bin/python bench/check_families.py [NAME ...] | grep RESULT
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.families, from a checkout

import transformers as tf  # noqa: E402

from goose_runtime.config import DecodeConfig  # noqa: E402
from goose_runtime.decoder import Decoder  # noqa: E402
from goose_runtime.model import load_model  # noqa: E402
from goose_runtime.runner import parse_labeled  # noqa: E402
from tests.families import default_tokenizer, family_prompt, save_family, stock_greedy, tiny_sizes  # noqa: E402

ROOT = "/tmp/goose-families"
NEW_TOKENS = 40
METHODS = ("pld", "tr", "goose@8")


def family_configs(tokenizer) -> dict:
    """name -> config factory for every family the sweep tries (refused ones included)."""
    ids, layers = tiny_sizes(tokenizer)
    kv2 = dict(layers, num_key_value_heads=2)
    gpt_sizes = dict(n_embd=64, n_layer=2, n_head=4)
    return {
        "llama_rope": lambda: tf.LlamaConfig(**kv2, rope_scaling={"rope_type": "linear", "factor": 2.0}, **ids),
        "qwen2": lambda: tf.Qwen2Config(**kv2, **ids),
        "gemma": lambda: tf.GemmaConfig(**kv2, head_dim=16, **ids),
        "gemma3": lambda: tf.Gemma3TextConfig(**kv2, head_dim=16, sliding_window=16, **ids),
        "cohere2": lambda: tf.Cohere2Config(**kv2, sliding_window=16, **ids),
        "olmo2": lambda: tf.Olmo2Config(**kv2, **ids),
        "granite": lambda: tf.GraniteConfig(**kv2, **ids),
        "stablelm": lambda: tf.StableLmConfig(**kv2, **ids),
        "falcon": lambda: tf.FalconConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          new_decoder_architecture=True, num_kv_heads=2, **ids),
        "gpt_neox": lambda: tf.GPTNeoXConfig(**layers, **ids),
        "gptj": lambda: tf.GPTJConfig(**gpt_sizes, rotary_dim=8, **ids),
        "bloom": lambda: tf.BloomConfig(hidden_size=64, n_layer=2, n_head=4, **ids),
        "starcoder2": lambda: tf.Starcoder2Config(**kv2, sliding_window=16, **ids),
        "phi": lambda: tf.PhiConfig(**layers, **ids),
        "codegen": lambda: tf.CodeGenConfig(**gpt_sizes, rotary_dim=8, **ids),
        "smollm3": lambda: tf.SmolLM3Config(**kv2, pad_token_id=0, **ids),
        "gpt_bigcode": lambda: tf.GPTBigCodeConfig(**gpt_sizes, **ids),
        "mpt": lambda: tf.MptConfig(d_model=64, n_layers=2, n_heads=4, **ids),
        "gpt_oss": lambda: tf.GptOssConfig(**kv2, head_dim=16, sliding_window=16, num_local_experts=4,
                                           num_experts_per_tok=2, **ids),
        "qwen3_moe": lambda: tf.Qwen3MoeConfig(**kv2, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                               moe_intermediate_size=32, **ids),
        "falcon_alibi": lambda: tf.FalconConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                alibi=True, **ids),
        "llama4": lambda: tf.Llama4TextConfig(**kv2, head_dim=16, **ids),
    }


def check(name: str, config, tokenizer, ids: list[int]) -> str:
    """One family's RESULT line: ar against generate, each method against ar (and its tokens per call)."""
    folder = save_family(os.path.join(ROOT, name), config, tokenizer)
    reference = stock_greedy(folder, ids, NEW_TOKENS)
    bundle = load_model(str(folder), device="cpu")
    decode = DecodeConfig(max_new_tokens=NEW_TOKENS)
    ar = Decoder(bundle, parse_labeled("ar"), decode).decode(ids).token_ids
    methods = {}
    for method in METHODS:
        result = Decoder(bundle, parse_labeled(method), decode).decode(ids)
        methods[method] = (result.token_ids == ar, round(NEW_TOKENS / len(result.cycles), 2))
    return f"ar==generate {ar == reference} ({bundle.model.config._attn_implementation}) {methods}"


def main(names: list[str]) -> None:
    tokenizer = default_tokenizer()
    configs = family_configs(tokenizer)
    ids = tokenizer(family_prompt())["input_ids"]
    for name in names or configs:
        try:
            line = check(name, configs[name], tokenizer, ids)
        except Exception as exc:  # a refused family is a result here, not a crash of the sweep
            line = f"ERROR {type(exc).__name__}: {str(exc)[:200]}"
        print(f"RESULT {name}: {line}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
