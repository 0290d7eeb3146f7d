"""Checks the runtime CLIs (``goose decode``, ``profile-latency``, ``record-traces``, ``validate``,
``loop``) share: counts and their ranges, output paths, the refresh flag, and DecodeConfig's
ranges named by flag. Each raises a one-line :class:`~goose_theory.cli_util.UsageError` before
the model loads, so bad input never costs a run.
"""
from __future__ import annotations

from goose_theory.cli_util import UsageError, check_output_dir, check_output_file

MAX_THREADS = 1024  # more only allocates thread pools (100000 ran out of memory)
MAX_REPEATS = 1000  # timed forwards per size: 1000 at 128 nodes already take minutes, 100000 hours


def check_run_args(args, extra: tuple[str, ...] = ()) -> None:
    """The count flags a command has (``--limit``, ``--max-new-tokens``, ``--budget``, ``--repeats``,
    ``--threads``, and a script's own ``extra`` ones) are at least 1 (threads at most
    :data:`MAX_THREADS`, repeats at most :data:`MAX_REPEATS`), and its output flags (``--out``,
    ``--trace-out`` files; ``--trace-dir``, ``--out-dir`` folders) can be written; else a
    UsageError naming the flag."""
    for flag in ("limit", "max_new_tokens", "budget", "repeats", "threads", *extra):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1, got {value}")
    for flag, cap in (("threads", MAX_THREADS), ("repeats", MAX_REPEATS)):
        value = getattr(args, flag, None)
        if value is not None and value > cap:
            raise UsageError(f"--{flag} must be at most {cap}, got {value}")
    # output paths: refused now, not after a run of minutes
    for flag in ("out", "trace_out"):
        check_output_file(getattr(args, flag, None), f"--{flag.replace('_', '-')}")
    for flag in ("trace_dir", "out_dir"):
        check_output_dir(getattr(args, flag, None), f"--{flag.replace('_', '-')}")


def check_refresh(args) -> None:
    """``--refresh-latency`` re-measures the cached profile only: never a ``--latency`` file."""
    if getattr(args, "refresh_latency", False) and getattr(args, "latency", None):
        raise UsageError("--refresh-latency re-measures the cached profile; it does not apply with --latency FILE "
                         "(measure a new file with `goose profile-latency --out FILE`)")


def make_config(**fields):
    """``DecodeConfig(**fields)`` from command-line values: a value out of range is a UsageError that
    names its flag (``--min-score must be in [0, 1), got 1.5``), so each range-checked field given
    here must come from the flag ``--<field-with-dashes>``."""
    from .decoder import ConfigError, DecodeConfig

    try:
        return DecodeConfig(**fields)
    except ConfigError as err:
        raise UsageError(f"--{err.field.replace('_', '-')} {err.problem}") from None


def check_model_args(args) -> None:
    """``--device``, ``--dtype`` and a local ``--model`` path, before any long work (``goose loop``
    fits its traces before it loads the model): a ModelLoadError, one line. The default model's
    folder is left to the load, which may first have to convert it."""
    from .model import DEFAULT_NAME, model_path, resolve_device, resolve_dtype

    resolve_device(args.device), resolve_dtype(args.dtype)
    if args.model != DEFAULT_NAME:
        model_path(args.model)
