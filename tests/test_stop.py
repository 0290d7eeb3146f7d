"""Stop strings and stop token ids (DecodeConfig.stop_strings / stop_token_ids, ``goose decode
--stop-strings / --stop-token-ids``): ``ar`` stops where a plain scan of its unstopped output says, every
method stops at the same token, and on the real model ``ar`` = HF ``generate(stop_strings=...)``."""
from __future__ import annotations

import dataclasses

import pytest

from goose_runtime.config import ConfigError, DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.methods import parse_method
from goose_runtime.runner import parse_labeled
from test_sampling import TINY_METHODS

PROMPT = [5, 6, 7, 5, 6, 7, 5, 6, 9, 5, 6, 7]


def first_stop(tokenizer, out: list[int], strings=(), ids=()) -> list[int]:
    """``out`` up to the first token that is one of ``ids`` or after which the generated text holds one of
    ``strings`` (the reference: the whole text so far decoded at every token)."""
    for i in range(len(out)):
        if out[i] in ids or any(s in tokenizer.decode(out[: i + 1], skip_special_tokens=True) for s in strings):
            return out[: i + 1]
    return out


def pieces(text: str, n: int = 2) -> list[str]:
    """The text's n-character pieces free of U+FFFD (a byte of a split character)."""
    return [text[i: i + n] for i in range(1, len(text) - n + 1) if "\ufffd" not in text[i: i + n]]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_every_method_stops_where_the_unstopped_text_first_holds_the_stop(sharp, temperature):
    base = DecodeConfig(max_new_tokens=48, temperature=temperature, seed=2)
    full = Decoder(sharp, parse_method("ar"), base).decode(PROMPT).token_ids
    clean = pieces(sharp.tokenizer.decode(full))  # the tiny model's bytes decode to few whole characters
    settings = [{"stop_strings": (clean[len(clean) // 2],)}, {"stop_strings": ("never", clean[-1])},
                {"stop_token_ids": (full[25],)}, {"stop_strings": (clean[-2],), "stop_token_ids": (full[33],)}]
    for setting in settings:
        cfg = dataclasses.replace(base, **setting)
        want = first_stop(sharp.tokenizer, full, setting.get("stop_strings", ()), setting.get("stop_token_ids", ()))
        assert 0 < len(want) < len(full), setting  # the stop falls inside the output
        for method in ("ar", *TINY_METHODS):
            res = Decoder(sharp, parse_labeled(method), cfg).decode(PROMPT)
            assert res.token_ids == want, (method, setting)
            assert sum(c.tau for c in res.cycles) == len(want)


def test_stop_strings_are_looked_for_in_the_generated_text_only(sharp):
    # vLLM's rule: a string spanning the prompt's end and the first generated token does not stop there
    full = Decoder(sharp, parse_method("ar"), DecodeConfig(max_new_tokens=32)).decode(PROMPT).token_ids
    stops = (sharp.tokenizer.decode([PROMPT[-1], full[0]]),)
    want = first_stop(sharp.tokenizer, full, stops)
    assert len(want) > 1
    for method in ("ar", "goose", "pld"):
        cfg = DecodeConfig(max_new_tokens=32, stop_strings=stops)
        assert Decoder(sharp, parse_labeled(method), cfg).decode(PROMPT).token_ids == want, method


def test_stop_settings_are_checked():
    for field, bad in (("stop_strings", ("",)), ("stop_strings", "abc"), ("stop_strings", ("x" * 1001,)),
                       ("stop_token_ids", (-1,)), ("stop_token_ids", (True,)), ("stop_token_ids", 5)):
        with pytest.raises(ConfigError, match=field):
            DecodeConfig(**{field: bad})


@pytest.mark.slow
def test_ar_stops_as_hf_generate_and_every_method_as_ar_on_the_real_model():
    import torch

    from goose_runtime.model import load_model
    from test_lossless import code_prompt

    bundle = load_model("default", device="cpu", dtype="float32")
    tok, ids = bundle.tokenizer, bundle.tokenizer.encode(code_prompt())
    full = Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=64)).decode(ids).token_ids
    text = tok.decode(full, skip_special_tokens=True)
    pos = len(tok.decode(full[:40], skip_special_tokens=True))
    stops = (text[pos - 2: pos + 1],)  # the end of the 40th token and the start of the 41st, which may go on past it
    with torch.no_grad():
        hf = bundle.model.generate(torch.tensor([ids]), max_new_tokens=64, do_sample=False, stop_strings=list(stops),
                                   tokenizer=tok, pad_token_id=tok.eos_token_id)[0, len(ids):].tolist()
    assert 20 < len(hf) < len(full) and hf == first_stop(tok, full, stops)
    cfg = DecodeConfig(max_new_tokens=64, stop_strings=stops)
    for method in ("ar", "pld", "goose"):
        assert Decoder(bundle, parse_labeled(method), cfg).decode(ids).token_ids == hf, method


def test_goose_decode_stops_reports_the_stops_and_refuses_bad_ones(capsys, tiny):
    from tests.clirun import fails, run_json

    argv = ["decode", "--method", "goose", "--compare", "ar,pld", "--prompt", "abc abc abc abc", "--max-new-tokens",
            "40", "--json"]
    full = run_json(capsys, argv)["token_ids"]
    stop = pieces(tiny.tokenizer.decode(full))[-1]
    out = run_json(capsys, argv + ["--stop-strings", "never", stop, "--stop-token-ids", "511"])
    assert out["token_ids"] == first_stop(tiny.tokenizer, full, (stop,), (511,)) != full and out["all_match_ar"]
    assert (out["stop_strings"], out["stop_token_ids"]) == (["never", stop], [511])
    fails(capsys, argv + ["--stop-strings", ""], "--stop-strings must be non-empty strings of at most 1000 characters")
    fails(capsys, argv + ["--stop-token-ids", "-3"], "--stop-token-ids must be token ids (integers >= 0), got (-3,)")
