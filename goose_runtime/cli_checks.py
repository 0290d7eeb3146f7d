"""Checks the runtime CLIs (``goose decode``, ``profile-latency``, ``record-traces``, ``validate``,
``loop``) share: counts and their ranges, output paths, the refresh flag, and DecodeConfig's
ranges named by flag. Each raises a one-line :class:`~goose_theory.cli_util.UsageError` before
the model loads, so bad input never costs a run. Also the notes they share: a run too short
for its speedups, a fixed tree with ranks the adjacency table never fills.
"""
from __future__ import annotations

from goose_theory.cli_util import UsageError, check_output_dir, check_output_file
from goose_theory.topology import TRANSITION

MAX_THREADS = 1024  # more only allocates thread pools (100000 ran out of memory)
MAX_REPEATS = 1000  # timed forwards per size: 1000 at 128 nodes already take minutes, 100000 hours


PATH_FLAGS = ("latency", "topology", "model", "traces", "bench")  # input paths/names: '' is no value
# goose_theory.regimeinterval.DRAWS, not imported: `goose --help` would load pandas and numba (a test checks)
REGIME_DRAWS = 100
MAX_REGIME_DRAWS = 10_000  # each draw refits the regime model (~0.14 s): 10,000 take 25 minutes a set


def add_regime_draws_option(p, *, what: str = "") -> None:
    """``--regime-draws`` of ``goose loop`` and ``fit-acceptance`` (``what``: when it applies)."""
    p.add_argument("--regime-draws", type=int, default=REGIME_DRAWS,
                   help=f"{what}bootstrap draws of the fitted prompts for each export's predicted-tau interval, each a "
                        f"whole two-regime refit, ~0.14 s (default {REGIME_DRAWS}, ~14 s a set; 0: none; at most "
                        f"{MAX_REGIME_DRAWS})")


# with --temperature only; these values: no effect
_SAMPLING_OFF = {"seed": 0, "sample_top_k": 0, "sample_top_p": 1.0, "sample_min_p": 0.0}
_PENALTIES_OFF = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0,  # greedy or sampled
                  "no_repeat_ngram_size": 0}


def add_sampling_options(p) -> None:
    """``--temperature``, ``--seed`` and the cuts ``--sample-top-k``, ``-top-p``, ``-min-p`` of ``goose decode``,
    ``validate``, ``loop`` and ``record-traces`` (ranges: DecodeConfig, via make_config)."""
    p.add_argument("--temperature", type=float, default=0.0,
                   help="0: greedy decoding (the default); > 0 (at most 100): sample at this temperature, with "
                        "noise fixed by --seed, the prompt and the position, so every method emits ar's sampled tokens")
    p.add_argument("--seed", type=int, default=0, help="the sampling noise's seed (default 0; with --temperature)")
    p.add_argument("--sample-top-k", type=int, default=0,
                   help="with --temperature: sample from the K most likely tokens only (HF's top_k; default 0: all)")
    p.add_argument("--sample-top-p", type=float, default=1.0,
                   help="with --temperature: sample from the fewest most likely tokens whose probability reaches P "
                        "(HF's top_p, after --sample-top-k; default 1: all)")
    p.add_argument("--sample-min-p", type=float, default=0.0,
                   help="with --temperature: sample from the tokens at least P times as likely as the most likely "
                        "one (HF's min_p, after --sample-top-p; default 0: all)")
    p.add_argument("--repetition-penalty", type=float, default=1.0,
                   help="HF's repetition_penalty, greedy or sampled: a token already in the text has its logit "
                        "divided by R when positive, multiplied when not (default 1: none; > 1 discourages repeats)")
    for kind, rule in (("frequency", "F times the number of times it was generated"), ("presence", "P once it was generated")):
        p.add_argument(f"--{kind}-penalty", type=float, default=0.0, metavar=kind[0].upper(),
                       help=f"vLLM's / the OpenAI API's {kind}_penalty in [-2, 2], greedy or sampled, after "
                            f"--repetition-penalty: a token's logit minus {rule} (the prompt not counted; default 0: none)")
    p.add_argument("--no-repeat-ngram-size", type=int, default=0, metavar="N",
                   help="HF's no_repeat_ngram_size, greedy or sampled: no token may complete an N-gram already in the "
                        "text, the prompt included (default 0: none)")


def sampling_settings(args) -> dict:
    """The sampling flags (and the ``--repetition-``, ``--frequency-`` and ``--presence-penalty``,
    ``--no-repeat-ngram-size``) as DecodeConfig fields (a command without them: greedy decoding, no penalty).

    Example:
        >>> import argparse
        >>> settings = sampling_settings(argparse.Namespace(temperature=0.7, seed=3, sample_top_k=0, sample_top_p=0.9))
        >>> settings["temperature"], settings["sample_top_p"], settings["sample_min_p"], settings["frequency_penalty"]
        (0.7, 0.9, 0.0, 0.0)
    """
    return {"temperature": getattr(args, "temperature", 0.0),
            **{flag: getattr(args, flag, off) for flag, off in {**_SAMPLING_OFF, **_PENALTIES_OFF}.items()}}


def add_stop_options(p) -> None:
    """``--stop-strings`` and ``--stop-token-ids`` of ``goose decode`` (DecodeConfig's fields of those names)."""
    p.add_argument("--stop-strings", action="extend", nargs="+", metavar="TEXT",
                   help="stop after the first token whose text completes one of these in the generated text (the "
                        "token stays in the output, as with HF's stop_strings; a shell's $'\\ndef' gives a newline)")
    p.add_argument("--stop-token-ids", action="extend", nargs="+", type=int, metavar="ID",
                   help="stop after any of these token ids, as after the model's EOS")


def stop_settings(args) -> dict:
    """``--stop-strings`` and ``--stop-token-ids`` as DecodeConfig fields."""
    return {"stop_strings": tuple(args.stop_strings or ()), "stop_token_ids": tuple(args.stop_token_ids or ())}


SETTING_KEYS = ("temperature", "sample_top_k", "sample_top_p", "sample_min_p", *_PENALTIES_OFF)


def sampling_setting(values: dict) -> tuple:
    """(temperature, top-k, top-p, min-p, repetition, frequency and presence penalties, n-gram ban size)
    from a dict of :data:`SETTING_KEYS` (missing or None: not recorded, so no cut or penalty); greedy
    decoding is (0, 0, 1, 0, r, f, p, n) whatever its cuts (they keep the top token), while the
    penalties change greedy's tokens too."""
    t, k, p, m, r, f, pr, n = (values.get(key) for key in SETTING_KEYS)
    penalties = (float(1.0 if r is None else r), float(f or 0), float(pr or 0), int(n or 0))
    cut = (0.0, 0, 1.0, 0.0) if not t else (float(t), int(k or 0), float(1.0 if p is None else p), float(m or 0))
    return cut + penalties


def setting_label(setting: tuple) -> str:
    """A :func:`sampling_setting` in words, after "temperature".

    Example:
        >>> setting_label(sampling_setting({"temperature": 0.7, "sample_top_p": 0.9, "frequency_penalty": 0.5}))
        '0.7 top-p 0.9 frequency penalty 0.5'
    """
    t, k, p, m, r, f, pr, n = setting
    cut = (f" top-k {k}" if k else "") + (f" top-p {p:g}" if p < 1 else "") + (f" min-p {m:g}" if m else "")
    penalties = ((f" repetition penalty {r:g}" if r != 1 else "") + (f" frequency penalty {f:g}" if f else "")
                 + (f" presence penalty {pr:g}" if pr else "") + (f" no repeated {n}-grams" if n else ""))
    return ("0 (greedy)" if not t else f"{t:g}{cut}") + penalties


def setting_line(args) -> str | None:
    """The line ``goose decode`` prints above its table when the run was sampled or penalised (None
    for plain greedy decoding)."""
    setting = sampling_setting(sampling_settings(args))
    if setting == sampling_setting({}):
        return None
    return f"decoded at temperature {setting_label(setting)}" + (f", seed {args.seed}" if setting[0] else "")


def check_regime_draws(draws: int) -> None:
    """``--regime-draws`` in 0 .. :data:`MAX_REGIME_DRAWS`, else a UsageError naming it."""
    if not 0 <= draws <= MAX_REGIME_DRAWS:
        raise UsageError(f"--regime-draws: {draws} is not in 0..{MAX_REGIME_DRAWS}")


def check_run_args(args, extra: tuple[str, ...] = ()) -> None:
    """The count flags a command has (``--limit``, ``--max-new-tokens``, ``--budget``, ``--repeats``,
    ``--threads``, and a script's own ``extra`` ones) are at least 1 (threads at most
    :data:`MAX_THREADS`, repeats at most :data:`MAX_REPEATS`), ``--seed`` and the top-k / top-p /
    min-p cuts come with a ``--temperature`` (decode: greedy decoding would ignore it), its input flags (:data:`PATH_FLAGS`)
    are not empty strings, and its output flags (``--out``, ``--trace-out`` files; ``--trace-dir``,
    ``--out-dir`` folders) can be written; else a UsageError naming the flag."""
    check_not_empty(args)
    for flag in ("limit", "max_new_tokens", "budget", "repeats", "threads", *extra):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            hint = " (a budget of 0 drafts nothing: that is --method ar)" if flag == "budget" and value == 0 else ""
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1, got {value}{hint}")
    for flag, cap in (("threads", MAX_THREADS), ("repeats", MAX_REPEATS)):
        value = getattr(args, flag, None)
        if value is not None and value > cap:
            raise UsageError(f"--{flag} must be at most {cap}, got {value}")
    if getattr(args, "temperature", None) == 0:
        for flag, off in _SAMPLING_OFF.items():
            if getattr(args, flag, off) != off:
                raise UsageError(f"--{flag.replace('_', '-')} applies with --temperature > 0 only "
                                 "(greedy decoding draws no noise and keeps the top token)")
    # output paths: refused now, not after a run of minutes
    for flag in ("out", "trace_out"):
        check_output_file(getattr(args, flag, None), f"--{flag.replace('_', '-')}")
    for flag in ("trace_dir", "out_dir"):
        check_output_dir(getattr(args, flag, None), f"--{flag.replace('_', '-')}")


def check_not_empty(args, flags: tuple[str, ...] = PATH_FLAGS) -> None:
    """An input flag given as an empty string (``--latency ''``) names nothing: a UsageError, not
    the flag's default (``--latency ''`` would silently use the cached profile); a list flag
    (``validate --topology A ''``) is checked entry by entry.

    Example:
        >>> import argparse
        >>> check_not_empty(argparse.Namespace(latency=None, topology=["a.json"]))
        >>> check_not_empty(argparse.Namespace(latency=""))
        Traceback (most recent call last):
        ...
        goose_theory.cli_util.UsageError: --latency is empty: it names nothing
    """
    for flag in flags:
        value = getattr(args, flag, None)
        values = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise UsageError(f"--{flag.replace('_', '-')} is empty: it names nothing")


def add_refresh_option(parser) -> None:
    """``--refresh-latency``, for every command that reads the cached device profile."""
    parser.add_argument("--refresh-latency", action="store_true",
                        help="re-measure this device's cached latency profile (about 10 s) and overwrite it, "
                        "and on a CPU the linear-kernel plan it is measured under (about 2 s): speeds drift (a "
                        "VM's from day to day); not with --latency FILE")


def check_refresh(args) -> None:
    """``--refresh-latency`` re-measures the cached profile only: never a ``--latency`` file (an
    empty ``--latency ''`` too is a file given, not the cached profile)."""
    if getattr(args, "refresh_latency", False) and getattr(args, "latency", None) is not None:
        raise UsageError("--refresh-latency re-measures the cached profile; it does not apply with --latency FILE "
                         "(measure a new file with `goose profile-latency --out FILE`)")


def make_config(**fields):
    """``DecodeConfig(**fields)`` from command-line values: a value out of range is a UsageError that
    names its flag (``--min-score must be in [0, 1), got 1.5``), so each range-checked field given
    here must come from the flag ``--<field-with-dashes>``."""
    from .config import ConfigError, DecodeConfig

    try:
        return DecodeConfig(**fields)
    except ConfigError as err:
        raise UsageError(f"--{err.field.replace('_', '-')} {err.problem}") from None


def check_model_args(args) -> None:
    """``--device``, ``--dtype`` and a local ``--model`` path, before any long work (``goose loop``
    fits its traces before it loads the model): a ModelLoadError, one line (a local folder must hold
    config.json: :func:`~goose_runtime.model.model_path`). The default model's folder is left to
    the load, which may first have to convert it. A command without one of the flags takes its default."""
    from .model import DEFAULT_NAME, model_path, resolve_device, resolve_dtype

    resolve_device(getattr(args, "device", "auto")), resolve_dtype(getattr(args, "dtype", "float32"))
    name = getattr(args, "model", DEFAULT_NAME)
    if name != DEFAULT_NAME:
        model_path(name)


FEW_TOKENS = 256  # below this many tokens per method the tables say their speedups are noise
SPEEDUP_SLACK = 1.1  # a speedup this far above tau is timing noise, not speculation (noisy_speedup_note)


def few_tokens_note(tokens: int) -> str | None:
    """What a speedup measured over so few tokens is worth (None from ``FEW_TOKENS`` up): a second of
    load elsewhere moves it by tens of percent.

    Example:
        >>> few_tokens_note(16)
        '16 tokens per method: too few for a steady speedup (the benches use 5 prompts of 128 tokens)'
    """
    if tokens >= FEW_TOKENS:
        return None
    return (f"{tokens} token{'' if tokens == 1 else 's'} per method: too few for a steady speedup "
            f"(the benches use 5 prompts of 128 tokens)")


def noisy_speedup_note(rows: list[tuple[str, float, float]]) -> str | None:
    """Methods whose speedup exceeds their tau (rows: label, tau, speedup against ``ar``), which only a
    change of load during the run produces: every verification forward costs at least about a decode
    step, so a cycle of tau tokens cannot beat tau steps of ``ar``. None where none does.

    Example:
        >>> noisy_speedup_note([("goose@9", 2.29, 11.2), ("pld", 1.5, 1.4)])[:35]
        'speedup above tau in goose@9: the m'
    """
    fast = [label for label, tau, speedup in rows if speedup > SPEEDUP_SLACK * tau]
    if not fast:
        return None
    return (f"speedup above tau in {', '.join(fast)}: the machine's load changed during the run; run it again "
            "on a quiet machine before reading the speedups")


def unreachable_ranks_note(specs, top_k: int) -> str | None:
    """Which fixed trees (``topology:FILE``, any of a regime file's trees) hold transition nodes of a
    rank the adjacency table never fills (it keeps the top ``top_k`` successors): those slots are
    dropped with their subtrees every cycle, so the file's tree is not the tree drafted. The fuzz
    review's ranks 32765-32767 decoded as ar at tau 1.0, unsaid.

    Example:
        >>> from goose_runtime.runner import parse_labeled
        >>> unreachable_ranks_note([parse_labeled("goose")], 10) is None
        True
    """
    out = []
    for s in specs:
        ranks = [int(r) for t in s.fixed_trees for r, kind in zip(t.rank, t.source) if kind == TRANSITION and r >= top_k]
        if ranks:
            out.append(f"{s.name} has {len(ranks)} transition node(s) of rank {min(ranks)}-{max(ranks)}")
    if not out:
        return None
    return (f"{'; '.join(out)}: the adjacency table keeps the top {top_k} successors (ranks 0-{top_k - 1}), so "
            f"those slots are never filled and are dropped with their subtrees")
