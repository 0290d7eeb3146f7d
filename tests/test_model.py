"""Model loading: the tiny test model, the cached default checkpoint, one-line load errors."""
from __future__ import annotations

import functools
import time

import pytest
import torch

from goose_runtime.model import DEFAULT_CACHE_NAME, ModelLoadError, default_model_dir, load_model, tiny_random_bundle


def test_tiny_bundle_is_deterministic_per_seed():
    a, b, c = tiny_random_bundle(0), tiny_random_bundle(0), tiny_random_bundle(1)
    ids = torch.tensor([[5, 6, 7]])
    with torch.inference_mode():
        la, lb, lc = (x.model(input_ids=ids).logits for x in (a, b, c))
    assert torch.equal(la, lb) and not torch.equal(la, lc)
    assert a.eos_token_ids == (2,) and not a.is_chat and a.dtype == torch.float32
    assert a.tokenizer.decode(a.tokenizer.encode("héllo")) == "héllo"


@pytest.mark.parametrize("kwargs, needle", [
    (dict(name="/no/such/model/dir"), "does not exist"),
    (dict(name="./missing-model"), "does not exist"),
    (dict(name="README.md"), "'README.md' is a file, not a model folder"),
    (dict(name="default", device="tpu"), "unknown device"),
    (dict(name="default", dtype="int8"), "unknown dtype"),
])
def test_bad_input_is_one_line(kwargs, needle):
    with pytest.raises(ModelLoadError, match=needle) as info:
        load_model(**kwargs)
    assert "\n" not in str(info.value)


def test_a_folder_without_a_model_says_so_alone(tmp_path):
    # transformers' own text there lists tokenizer backends it tried, which says nothing of the cause
    (tmp_path / "readme.txt").write_text("no model here")
    with pytest.raises(ModelLoadError) as info:
        load_model(str(tmp_path), device="cpu")
    assert str(info.value) == f"cannot load model {str(tmp_path)!r}: {tmp_path} holds no config.json, so it is not a model folder"


def test_uncached_hub_id_fails_without_download(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelLoadError, match="cannot load model") as info:
        load_model("nobody-here/no-such-model", device="cpu")
    assert "\n" not in str(info.value)


def test_default_dir_reuses_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    target = tmp_path / DEFAULT_CACHE_NAME
    target.mkdir()
    (target / "config.json").write_text("{}")
    assert default_model_dir() == target  # present: no conversion


@pytest.mark.slow
def test_first_conversion_draws_no_progress_bar(tmp_path, monkeypatch, capfd):
    # transformers' GGUF de-quantiser has its own tqdm bar, which its progress-bar switch misses: 1.2 KB
    # of "Converting and de-quantizing GGUF tensors...: 0%|" on stderr under --json (walkthrough, 5 Dec)
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    assert default_model_dir() == tmp_path / DEFAULT_CACHE_NAME and (tmp_path / DEFAULT_CACHE_NAME / "config.json").is_file()
    assert "GGUF tensors" not in capfd.readouterr().err
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    assert not isinstance(gguf_utils.tqdm, functools.partial)  # put back as found


@pytest.mark.slow
def test_default_model_loads_fast_from_cache():
    default_model_dir()  # converts once if needed
    load_model("default", device="cpu")  # ... and measures the host's linear plan once if needed
    t0 = time.perf_counter()
    bundle = load_model("default", device="cpu")
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0
    assert bundle.is_chat and bundle.eos_token_ids and bundle.dtype == torch.float32
    assert type(bundle.model).__name__ == "LlamaForCausalLM"
    ids = bundle.tokenizer.encode("def add(a, b):")
    assert bundle.tokenizer.decode(ids) == "def add(a, b):"


@pytest.mark.slow
def test_default_model_records_its_linear_plan_and_refuses_a_bad_pin(monkeypatch):
    bundle = load_model("default", device="cpu")
    assert bundle.linears["source"] in ("measured", "cached", "env") and bundle.linears["stock_rows"] >= 0
    monkeypatch.setenv("GOOSE_STOCK_ROWS", "many")
    with pytest.raises(ModelLoadError, match="GOOSE_STOCK_ROWS must be an integer >= 0, got 'many'") as info:
        load_model("default", device="cpu")
    assert "\n" not in str(info.value)


def test_model_path_wants_config_json_in_a_local_folder(tmp_path):
    """Checked before any long work (commands call model_path up front), not only at the load."""
    from goose_runtime.model import model_path

    with pytest.raises(ModelLoadError, match=r"holds no config\.json, so it is not a model folder$"):
        model_path(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert model_path(str(tmp_path)) == str(tmp_path)
    assert model_path("org/not-here") == "org/not-here"  # an HF id that is no local folder: the load's to find
    with pytest.raises(ModelLoadError, match="^model path is empty$"):
        model_path("")
