"""Decoding options: :class:`DecodeConfig` (the paper's defaults, every range checked once when a
config is made) and :class:`ConfigError`, which names the field a CLI maps back to its flag.

Kept apart from :mod:`goose_runtime.decoder` so that the CLIs' argument checks
(``cli_checks.make_config``) and the runner's plans read the options without the decoding loop.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from goose_theory.allocation import PAPER_BYPASS_LEN
from goose_theory.errors import InputError
from goose_theory.latency import LatencyProfile
from goose_theory.topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K

from .methods import MethodSpec

# keep_history: the matcher keeps at most this many earlier tokens (prompts and outputs); past it, the
# next prompt starts from the newest half. Its dicts cost about 0.9 KB a token (three n-gram sizes;
# docs/bench-runtime.md, "The matcher's history").
HISTORY_TOKENS = 1 << 15
SCORES = ("logit", "prob")
MAX_TEMPERATURE = 100.0  # sampling (goose_runtime.sampling): past this the target is all but uniform
MAX_PENALTY = 100.0  # repetition penalty: past this a seen token with a positive logit is all but barred
MAX_NGRAM_BAN = 1024  # no_repeat_ngram_size: a longer n-gram repeats only in a text that loops
MAX_COUNT_PENALTY = 2.0  # frequency / presence penalties: the OpenAI API's and vLLM's range, [-2, 2]
MAX_SEED = 2**63 - 1
MAX_STOP_CHARS = 1000  # a stop string: each candidate end decodes about this many bytes' worth of tokens


class ConfigError(InputError):
    """A :class:`DecodeConfig` field out of range (a ``ValueError``): ``field`` and ``problem``, so a
    CLI can name its flag instead (``cli_checks.make_config``: ``--min-score must be in [0, 1), ...``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


def _real(v) -> bool:  # a finite number (not a bool)
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _count(v) -> bool:  # an integer >= 1 (not a bool)
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1


# field -> (what a good value is, test); every DecodeConfig checks its fields against these
_RULES = {
    "max_new_tokens": ("must be at least 1", _count),
    "top_k": ("must be at least 1", _count),
    "ngram_sizes": ("must be a non-empty tuple of integers from 1 to 127 (the traces' int8 ngram column)",
                    lambda v: isinstance(v, tuple) and len(v) > 0 and all(_count(n) and n <= 127 for n in v)),
    "max_spine": ("must be at least 1", _count),
    "max_depth": ("must be at least 1", _count),
    "adjacency_slots": ("must be at least 1", _count),
    "ema_alpha": ("must be in (0, 1]", lambda v: _real(v) and 0 < v <= 1),  # 0 would never update the EMA
    "rho": ("must be in [0, 1]", lambda v: _real(v) and 0 <= v <= 1),  # a share of the branch budget
    "bypass_len": ("must be at least 1", _count),
    "score": ("must be 'logit' or 'prob'", lambda v: v in SCORES),
    "min_score": ("must be in [0, 1)", lambda v: _real(v) and 0 <= v < 1),
    "keep_history": ("must be True or False", lambda v: isinstance(v, bool)),
    "store_corpus": ("must be paths of files or folders (an empty one names nothing)", lambda v: isinstance(v, tuple) and all(isinstance(p, str) and p for p in v)),
    "branch_power": ("must be in (0, 16]", lambda v: _real(v) and 0 < v <= 16),  # 1/rank**16 is 0 past rank 0
    "temperature": (f"must be 0 (greedy) or in (0, {MAX_TEMPERATURE:g}]", lambda v: _real(v) and 0 <= v <= MAX_TEMPERATURE),
    "sample_top_k": ("must be an integer >= 0 (0: no cut)", lambda v: isinstance(v, numbers.Integral)
                     and not isinstance(v, bool) and v >= 0),
    "sample_top_p": ("must be in (0, 1] (1: no cut)", lambda v: _real(v) and 0 < v <= 1),
    "sample_min_p": ("must be in [0, 1] (0: no cut)", lambda v: _real(v) and 0 <= v <= 1),
    "repetition_penalty": (f"must be in (0, {MAX_PENALTY:g}] (1: none)", lambda v: _real(v) and 0 < v <= MAX_PENALTY),
    **{field: (f"must be in [-{MAX_COUNT_PENALTY:g}, {MAX_COUNT_PENALTY:g}] (0: none)",
               lambda v: _real(v) and abs(v) <= MAX_COUNT_PENALTY) for field in ("frequency_penalty", "presence_penalty")},
    "no_repeat_ngram_size": (f"must be an integer in [0, {MAX_NGRAM_BAN}] (0: none)", lambda v: isinstance(v, numbers.Integral)
                             and not isinstance(v, bool) and 0 <= v <= MAX_NGRAM_BAN),
    "stop_strings": (f"must be non-empty strings of at most {MAX_STOP_CHARS} characters",
                     lambda v: isinstance(v, tuple) and all(isinstance(x, str) and 0 < len(x) <= MAX_STOP_CHARS for x in v)),
    "stop_token_ids": ("must be token ids (integers >= 0)", lambda v: isinstance(v, tuple) and all(
        isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= 0 for x in v)),
    "seed": ("must be an integer in [0, 2**63)", lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool)
             and 0 <= v <= MAX_SEED),
}


@dataclass(frozen=True)
class DecodeConfig:
    """Decoding options (paper defaults). ``reset_adjacency``: empty the adjacency table before each
    prompt (False carries it over, as Token Recycling's own code does). ``keep_history``: the context
    matcher also indexes the earlier prompts and outputs of this decoder (the last
    :data:`HISTORY_TOKENS`), so a phrase the model wrote for an earlier prompt is drafted as a spine
    (off by default: the paper matches within one prompt; Lookahead, Zhao et al. 2023, retrieves
    drafts from a trie of earlier prompts and outputs in the same way).

    Every range is checked here, once, when a config is made (also by ``dataclasses.replace``): a
    bad value raises :class:`ConfigError` naming the field.

    Example:
        >>> DecodeConfig(min_score=1.5)
        Traceback (most recent call last):
        ...
        goose_runtime.config.ConfigError: min_score must be in [0, 1), got 1.5
    """

    max_new_tokens: int = 128
    reset_adjacency: bool = True
    keep_history: bool = False
    top_k: int = PAPER_TOP_K
    ngram_sizes: tuple[int, ...] = (5, 4, 3)
    max_spine: int = PAPER_MAX_SPINE
    max_depth: int = PAPER_MAX_DEPTH
    record: bool = True
    adjacency_slots: int = 1 << 16
    ema_alpha: float = 0.3
    rho: float = 0.5
    bypass_len: int = PAPER_BYPASS_LEN
    score: str = "logit"   # adjacency score: "logit" (free with the top-k) or "prob" (softmax over
                           # the top-k's blocks; verify.top_candidates). ``auto`` always uses "prob"
    # goose: transition candidates harvested with a probability below this are not drafted. The
    # paper lists 0.01; off by default here: on the shipped prompt sets it moves tau by -0.3% to
    # +2.2% at B = 4-16 and trims 7-10% of the nodes at B = 60 for -1.3% / -6.3% / 0% tau (README).
    # > 0 makes goose harvest "prob" scores, an upper bound on the probability (normalised over the
    # top-k's blocks only), so it cuts fewer candidates than a threshold on exact probabilities.
    min_score: float = 0.0
    # goose: a branch budget is split over sibling candidates with weights 1/rank**branch_power
    # (goose.grow_branches). 1 (harmonic) is the default and what every goose number in the README
    # used; 2 is the shape of Token Recycling's static tree, and measured higher tau in 15 of 18
    # cases (README, "Branch split").
    branch_power: float = 1.0
    latency: LatencyProfile | None = None  # device profile; required by the ``auto`` method
    store_corpus: tuple[str, ...] = ()  # +store methods: files / folders of the store (): the default (store.py)
    # 0: greedy decoding (the default; what every number in the README used unless it says otherwise).
    # > 0: sample at this temperature with Gumbel noise fixed by (seed, prompt, position), which every method
    # reproduces token for token (goose_runtime.sampling)
    temperature: float = 0.0
    seed: int = 0
    # sampling only: cut the target's distribution to its top k tokens (0: no cut), then to the nucleus
    # of mass p (1: no cut), then to the tokens at least min_p times as probable as the top one (0: no
    # cut), as HF generate's top_k / top_p / min_p (``top_k`` above is the adjacency table's)
    sample_top_k: int = 0
    sample_top_p: float = 1.0
    sample_min_p: float = 0.0
    # HF generate's repetition_penalty (1: none), greedy or sampled: a logit of a token already in the
    # sequence divided by it when positive, multiplied when not (goose_runtime.penalty)
    repetition_penalty: float = 1.0
    # vLLM's / the OpenAI API's (0: none), greedy or sampled, after the repetition penalty: a logit of a
    # token generated c times so far (the prompt's are not counted) minus frequency * c + presence
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    # HF generate's no_repeat_ngram_size (0: none), greedy or sampled: a token that would complete an
    # n-gram already in the sequence (the prompt's included) is barred
    no_repeat_ngram_size: int = 0
    # stop after the first generated token whose text completes one of ``stop_strings`` (looked for in the
    # generated text only, as vLLM's ``stop``; the token stays in the output, as with HF's ``stop_strings``)
    # or that is one of ``stop_token_ids`` (as the model's EOS)
    stop_strings: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:  # the Decoder and the CLIs rely on these checks (decode_cli also
        # checks --max-new-tokens early, for record-traces, whose config runner.py builds)
        for field, (rule, ok) in _RULES.items():
            if not ok(value := getattr(self, field)):
                shown = repr(value) if isinstance(value, str) else value
                raise ConfigError(field, f"{rule}, got {shown}")


def harvest_score(method: MethodSpec, config: DecodeConfig) -> str:
    """The adjacency score a method's decoder harvests: ``auto`` needs probabilities to rank
    candidates, ``goose`` to apply ``min_score``; the rest use only their order (``config.score``)."""
    if method.kind == "auto" or (method.kind == "goose" and config.min_score > 0):
        return "prob"
    return config.score
