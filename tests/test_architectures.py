"""Other model families than the default's Llama: every method stays lossless through ``load_model``.

``--model`` takes any HF causal LM, and loading one rewires it (oneDNN linears, the measured linear
plan, packed grouped-query attention), so each family the runtime may meet is loaded here the way a
user's folder is: a tiny randomly initialised model saved with the default model's tokenizer. The
families differ where tree verification could go wrong: learned absolute positions (GPT-2, OPT with
its position offset), GPT-2's Conv1D instead of Linear, q/k norms and a sliding-window layer
(Qwen3), logit soft-capping and alternating sliding-window layers (Gemma 2), a fused qkv projection
(Phi-3), one KV head and a window on every layer (Mistral). ``ar`` itself is checked against
transformers' own greedy ``generate`` on the stock model, so a mask that all methods get wrong alike
(a sliding window ignored) cannot hide behind their agreement. Random weights fall into loops
quickly, so context matching and deep trees get accepted on most of them.
"""
from __future__ import annotations

import pytest

from goose_runtime.model import cache_label
from tests.families import default_tokenizer, family_prompt, save_family, stock_greedy, tiny_sizes
from tests.test_lossless import CPU_PROFILE  # auto's latency profile there: one measured on the 2-core CPU

METHODS = ["pld", "tr", "iso:3", "mixed-iso:3", "goose", "goose@8", "auto", "goose+store"]
NEW_TOKENS = 48


def _configs(tokenizer) -> dict:
    import transformers as tf
    small, layers = tiny_sizes(tokenizer)
    return {
        # the window (16) is far shorter than the prompt, so it decides what the sliding layers see
        "qwen3": lambda: tf.Qwen3Config(**layers, num_key_value_heads=2, head_dim=16, use_sliding_window=True,
                                        sliding_window=16, max_window_layers=1, **small),  # layer 1 slides
        "gpt2": lambda: tf.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=512, **small),
        "opt": lambda: tf.OPTConfig(hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4,
                                    word_embed_proj_dim=64, max_position_embeddings=512, **small),
        "gemma2": lambda: tf.Gemma2Config(**layers, num_key_value_heads=2, head_dim=16, sliding_window=16, **small),
        "phi3": lambda: tf.Phi3Config(**layers, num_key_value_heads=4, pad_token_id=0, **small),
        "mistral": lambda: tf.MistralConfig(**layers, num_key_value_heads=1, sliding_window=16, **small),  # every layer
    }


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One saved model folder per family, each named ``model`` (under its family's folder)."""
    tokenizer = default_tokenizer()
    root = tmp_path_factory.mktemp("families")
    return {family: save_family(root / family / "model", config, tokenizer)
            for family, config in _configs(tokenizer).items()}


@pytest.mark.slow
@pytest.mark.parametrize("family", ["qwen3", "gpt2", "opt", "gemma2", "phi3", "mistral"])
def test_every_method_matches_ar_on_another_family(folders, family, tmp_path, monkeypatch):
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.model import load_model
    from goose_runtime.runner import parse_labeled
    from goose_theory.latency import LatencyProfile

    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))  # the linear plan is measured afresh, here
    bundle = load_model(str(folders[family]), device="cpu", dtype="float32")
    ids = list(bundle.tokenizer(family_prompt())["input_ids"])
    reference = Decoder(bundle, parse_labeled("ar"), DecodeConfig(max_new_tokens=NEW_TOKENS)).decode(ids).token_ids
    assert len(reference) == NEW_TOKENS
    assert reference == stock_greedy(folders[family], ids, NEW_TOKENS)  # ar is the model's own greedy decoding
    drafted = 0
    for method in METHODS:
        config = DecodeConfig(max_new_tokens=NEW_TOKENS, latency=LatencyProfile(**CPU_PROFILE))
        result = Decoder(bundle, parse_labeled(method), config).decode(ids, prompt_id=family)
        assert result.token_ids == reference, f"{method} diverged from ar on {family}"
        assert sum(c.tau for c in result.cycles) == NEW_TOKENS
        drafted += sum(len(c.parent) - 1 for c in result.cycles)
    assert drafted > 0  # trees were really verified, not plain steps


def test_models_whose_folders_share_a_name_keep_apart_caches(tmp_path, monkeypatch):
    # runs/a/final and runs/b/final are two models: one shared latency profile or linear plan
    # would price the second with the first's speeds
    for run in ("a", "b"):
        (tmp_path / run / "final").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a")
    a, a_again = cache_label(str(tmp_path / "a" / "final")), cache_label("final")
    b = cache_label(str(tmp_path / "b" / "final") + "/")
    assert a == a_again and a != b and a.startswith("final-") and b.startswith("final-")
    assert cache_label("SmolLM2-135M-Instruct") == "SmolLM2-135M-Instruct"  # the default's files keep their names
    assert cache_label("Qwen/Qwen3-8B") != cache_label("someone/Qwen3-8B")  # HF ids: the org counts


def test_the_profile_cache_follows_the_label(tmp_path, monkeypatch):
    from goose_runtime import profile as profile_mod
    from goose_runtime.model import tiny_random_bundle
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    bundles = [tiny_random_bundle(0), tiny_random_bundle(0)]
    for run, bundle in zip("ab", bundles):
        (tmp_path / run / "final").mkdir(parents=True)
        bundle.name = str(tmp_path / run / "final")
    paths = [profile_mod.cached_profile_path(b, dtype="float32") for b in bundles]
    assert paths[0] != paths[1] and all(f"latency-{cache_label(b.name)}-" in p for b, p in zip(bundles, paths))
