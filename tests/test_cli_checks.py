"""The checks the runtime CLIs share (goose_runtime/cli_checks.py); the CLIs' own tests run them
through each command."""
from __future__ import annotations

import pytest

from goose_runtime import cli_checks


def test_make_config_names_the_flag_of_a_bad_field():
    assert cli_checks.make_config(max_new_tokens=3, min_score=0.5).min_score == 0.5
    with pytest.raises(cli_checks.UsageError, match=r"^--max-new-tokens must be at least 1, got 0$"):
        cli_checks.make_config(max_new_tokens=0)


def test_an_empty_path_flag_is_refused_not_taken_as_not_given():
    """``--latency ''`` passed every ``if args.latency:`` check as "not given" (fuzzing): it used the
    cached profile, re-measured it under --refresh-latency, and slipped past "auto only"."""
    import argparse

    for flag in ("latency", "topology", "model", "traces", "bench"):
        with pytest.raises(cli_checks.UsageError, match=rf"^--{flag} is empty: it names nothing$"):
            cli_checks.check_not_empty(argparse.Namespace(**{flag: ""}))
    with pytest.raises(cli_checks.UsageError, match=r"^--topology is empty"):
        cli_checks.check_not_empty(argparse.Namespace(topology=["a.json", " "]))
    cli_checks.check_not_empty(argparse.Namespace(latency=None, topology=["a.json"], model="default"))
    with pytest.raises(cli_checks.UsageError, match="--refresh-latency re-measures the cached profile"):
        cli_checks.check_refresh(argparse.Namespace(refresh_latency=True, latency=""))


def test_check_model_args_wants_config_json_in_a_local_folder(tmp_path, monkeypatch):
    """A folder without config.json was found only at the load, after `goose loop`'s fit (fuzzing)."""
    import argparse

    import goose_runtime.model as model_mod

    def args(model):
        return argparse.Namespace(model=model, device="cpu", dtype="float32")
    with pytest.raises(model_mod.ModelLoadError, match="holds no config.json, so it is not a model folder"):
        cli_checks.check_model_args(args(str(tmp_path)))
    (tmp_path / "config.json").write_text("{}")
    cli_checks.check_model_args(args(str(tmp_path)))
    cli_checks.check_model_args(args("org/some-model"))  # an HF id: left to the load
    monkeypatch.setattr(model_mod, "default_model_dir", lambda: pytest.fail("the default's folder is the load's"))
    cli_checks.check_model_args(args("default"))
    cli_checks.check_model_args(argparse.Namespace())  # a command without the flags: the defaults


def test_a_fixed_tree_with_ranks_the_adjacency_table_never_fills_is_named(tmp_path):
    """Fuzz review, 7 Dec: ranks 32765-32767 decoded as ar (tau 1.0) without a word."""
    from goose_runtime.runner import parse_labeled
    from goose_theory.topology import Topology, save_topology

    unmatched = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 12)])
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 3)])
    save_topology(tree.with_meta(regimes={"unmatched": unmatched.to_dict()}), tmp_path / "wide.json")
    save_topology(tree, tmp_path / "fine.json")
    specs = [parse_labeled(f"topology:{tmp_path / name}") for name in ("wide.json", "fine.json")] + [parse_labeled("goose")]
    note = cli_checks.unreachable_ranks_note(specs, 10)
    assert note.startswith("topology:wide has 1 transition node(s) of rank 12-12: the adjacency table keeps the top 10")
    assert "fine" not in note and cli_checks.unreachable_ranks_note(specs, 13) is None


def test_the_regime_draws_default_is_the_intervals_own_and_its_range_is_checked():
    # cli_checks keeps its own copy so that `goose --help` loads neither pandas nor numba
    from goose_theory.cli_util import UsageError
    from goose_theory.regimeinterval import DRAWS
    assert cli_checks.REGIME_DRAWS == DRAWS
    cli_checks.check_regime_draws(0), cli_checks.check_regime_draws(cli_checks.MAX_REGIME_DRAWS)
    for bad in (-1, cli_checks.MAX_REGIME_DRAWS + 1):
        with pytest.raises(UsageError, match=rf"^--regime-draws: {bad} is not in 0\.\.10000$"):
            cli_checks.check_regime_draws(bad)


def test_the_setting_line_names_a_sampled_or_penalised_run_only():
    import argparse

    def line(**flags):
        return cli_checks.setting_line(argparse.Namespace(**flags))

    assert line() is None and line(temperature=0.0, sample_top_p=0.9) is None  # greedy ignores a cut
    assert line(temperature=0.0, repetition_penalty=1.2) == "decoded at temperature 0 (greedy) repetition penalty 1.2"
    assert line(temperature=1.0, seed=7, sample_top_k=40) == "decoded at temperature 1 top-k 40, seed 7"
    assert line(no_repeat_ngram_size=3, frequency_penalty=0.5) == ("decoded at temperature 0 (greedy) frequency penalty "
                                                                   "0.5 no repeated 3-grams")
