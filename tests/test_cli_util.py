"""CLI plumbing: aligned text tables (NaN shown, not hidden), one-line errors with exit code 2,
strict JSON output, argparse errors as one line."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from goose_theory.cli_util import (EXIT_BAD_INPUT, UsageError, check_output_dir, format_table, make_parser,
                                   print_json, run_command)
from goose_theory.errors import InputError
from goose_theory.traceio import TraceFileError


def _cells(line: str, widths: list[int]) -> list[str]:
    """Cut one table line into its padded cells (columns are joined by two spaces)."""
    out, at = [], 0
    for w in widths:
        out.append(line[at:at + w])
        at += w + 2
    return out


def test_format_table_aligns_columns():
    rows = [{"rule": "optimal", "budget": 60, "tau": 3.14159265},
            {"rule": "paper", "budget": 8, "tau": 12.0}]
    lines = format_table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    widths = [len(d) for d in lines[1].split("  ")]
    assert set(lines[1]) <= {"-", " "}
    assert all(len(line) <= len(lines[1]) and line == line.rstrip() for line in lines)  # no trailing blanks
    assert [c.strip() for c in _cells(lines[0], widths)] == ["rule", "budget", "tau"]
    body = [_cells(line.ljust(len(lines[1])), widths) for line in lines[2:]]
    # text left-aligned, numbers right-aligned (their headers too); each column as wide as its widest entry
    assert [c[0] for c in body] == ["optimal", "paper  "] and widths[0] == len("optimal")
    assert [c[1] for c in body] == ["    60", "     8"] and widths[1] == len("budget")
    # a float column shows every value with the decimals its 4 significant digits need: points line up
    assert [c[2] for c in body] ==[" 3.142", "12.000"]
    assert lines[0] == "rule     budget     tau"


def test_format_table_float_columns():
    rows = [{"gain": 0.268, "p": 8.69e-37, "share": 0.5, "mixed": 0},
            {"gain": -0.2369, "p": 0.04, "share": 1.0, "mixed": 1.25},
            {"gain": 1 / 3, "p": 1.0, "share": 0.25, "mixed": 2}]
    lines = format_table(rows).splitlines()
    body = [line.split() for line in lines[2:]]
    assert [r[0] for r in body] == ["0.2680", "-0.2369", "0.3333"]
    assert [r[1] for r in body] == ["8.69e-37", "0.04", "1"]  # a value that needs an exponent: each its own
    assert [r[2] for r in body] == ["0.50", "1.00", "0.25"]
    assert [r[3] for r in body] == ["0.00", "1.25", "2.00"]  # integers in a float column take its decimals
    tiny = format_table([{"x": 1234.5678}, {"x": 0.00012345}]).splitlines()[2:]
    assert [v.strip() for v in tiny] == ["1234.567800", "0.000123"]  # at most MAX_DECIMALS decimals


def test_format_table_whole_floats_still_read_as_floats():
    # a tau of exactly 1 (budget 0) or 17 (p_s = 1) printed as "1" looked like a count
    body = [line.split() for line in format_table([{"budget": 0, "predicted_tau": 1.0},
                                                   {"budget": 16, "predicted_tau": 17.0}]).splitlines()[2:]]
    assert body == [["0", "1.0"], ["16", "17.0"]]


@pytest.mark.parametrize("cell, right", [("1.40x", True), ("-2.3%", True), ("+9.4% [-1.0%, +3.2%]", True),
                                         ("1.764 [1.65, 1.88]", True), ("0.62 ms", True), ("12", True), ("+-64%", True),
                                         ("8,2,0", False), ("iso:3", False), ("goose@8", False), ("yes", False),
                                         ("[0.83, 0.92]", False), ("3rd", False)])
def test_format_table_aligns_text_that_reads_as_a_number_right(cell, right):
    lines = format_table([{"column_name": cell}, {"column_name": "nan"}]).splitlines()
    width = max(len(cell), len("column_name"))
    align = str.rjust if right else str.ljust
    assert lines[0] == align("column_name", width).rstrip() and lines[2] == align(cell, width).rstrip()
    assert lines[3] == align("nan", width).rstrip()  # a nan takes its column's side


def test_format_table_shows_nan_and_picks_columns():
    rows = [{"a": float("nan"), "b": np.float32(0.5), "c": "kept out"}, {"a": np.float64("nan"), "b": None}]
    lines = format_table(rows, columns=["b", "a", "missing"]).splitlines()
    widths = [len(d) for d in lines[1].split("  ")]
    assert [c.strip() for c in _cells(lines[0], widths)] == ["b", "a", "missing"]
    first, second = (_cells(line.ljust(len(lines[1])), widths) for line in lines[2:])
    assert first[1].strip() == second[1].strip() == "nan"  # a NaN shows as nan, never as a blank or a number
    assert first[0].strip() == "0.5" and second[0].strip() == "n/a"  # None: no value, not Python's repr
    missing = format_table([{"speedup": None, "x": 1}, {"speedup": None, "x": 2}]).splitlines()
    assert missing[2].startswith("    n/a")  # a column of missing numbers right-aligned, as its numbers would be
    assert first[2].strip() == second[2].strip() == ""  # a column a row lacks is blank
    assert "kept out" not in "\n".join(lines)


def test_format_table_without_rows():
    assert format_table([]) == "(no rows)"


@pytest.mark.parametrize("error", [InputError("bad  value\n  for --x"), UsageError("bad value for --x"),
                                   TraceFileError("bad value for --x")])
def test_bad_input_is_one_line_on_stderr_and_exit_2(capsys, error):
    def handler(args):
        print("partial output")  # what a handler printed before failing stays, but no traceback
        raise error
    assert run_command(handler, argparse.Namespace()) == EXIT_BAD_INPUT == 2
    out, err = capsys.readouterr()
    assert err == "error: bad value for --x\n"  # line breaks and runs of spaces folded into one line
    assert out == "partial output\n"


def test_a_message_less_input_error_names_its_type(capsys):
    class ShapeError(InputError):
        pass

    def handler(args):
        raise ShapeError("")
    assert run_command(handler, argparse.Namespace()) == 2
    assert capsys.readouterr().err == "error: ShapeError\n"


def test_ctrl_c_is_one_line_and_exit_130(capsys):
    # a decode interrupted 40 s in ended in a page of torch traceback (walkthrough, 5 Dec)
    def handler(args):
        raise KeyboardInterrupt
    assert run_command(handler, argparse.Namespace()) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_success_returns_the_handlers_code_and_sees_the_args(capsys):
    seen = []

    def handler(args):
        seen.append(args.n)
        return 0 if args.n else 3
    assert run_command(handler, argparse.Namespace(n=5)) == 0
    assert run_command(handler, argparse.Namespace(n=0)) == 3
    assert seen == [5, 0] and capsys.readouterr().err == ""


def test_a_bug_is_not_disguised_as_bad_input():
    def handler(args):
        raise KeyError("a genuine bug")
    with pytest.raises(KeyError):
        run_command(handler, argparse.Namespace())


def test_print_json_writes_strict_json(capsys):
    value = {"tau": np.float64(2.5), "n": np.int64(7), "curve": np.array([0.5, np.nan]), 3: (1, float("inf")),
             "nested": [{"x": np.float32(-np.inf)}], "ok": True, "none": None}
    print_json(value)
    out = capsys.readouterr().out
    assert out.count("\n") == 1

    def no_constants(name):
        raise AssertionError(f"non-standard JSON constant {name}")
    got = json.loads(out, parse_constant=no_constants)
    assert got == {"tau": 2.5, "n": 7, "curve": [0.5, None], "3": [1, None], "nested": [{"x": None}],
                   "ok": True, "none": None}


def test_parser_error_is_one_line_with_exit_2(capsys):
    parser = make_parser("goose-x", "a test command")
    parser.add_argument("--port", type=int)
    with pytest.raises(SystemExit) as caught:
        parser.parse_args(["--port", "eighty"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: goose-x: ") and "--port" in err
    assert parser.parse_args(["--port", "80"]).port == 80


@pytest.mark.parametrize("name", ["fit.json", "report.MD", "t.parquet"])
def test_an_output_folder_named_like_a_file_is_refused_unless_it_exists(tmp_path, name):
    # fit-acceptance --out fit.json made a folder 'fit.json' holding topology-*.json and the report
    target = tmp_path / name
    with pytest.raises(UsageError, match=rf"^--out: .*{name} is named like a file, but --out is a folder"):
        check_output_dir(str(target), "--out")
    assert not target.exists()
    target.mkdir()
    check_output_dir(str(target), "--out")  # an existing folder of that name: the user's own
    check_output_dir(str(tmp_path / "fit.v2"), "--out")  # a dot alone is no file name


def test_a_dash_for_standard_output_is_refused(tmp_path, monkeypatch):
    # practitioner review, 6 Dec: goose optimize --out - wrote a file named '-'
    from goose_theory.cli_util import check_output_file
    monkeypatch.chdir(tmp_path)
    for check in (check_output_file, check_output_dir):
        with pytest.raises(UsageError, match=r"^--out: '-' \(standard output\) is not written to here"):
            check("-", "--out")
    assert not (tmp_path / "-").exists()


def test_file_scored_names_the_file_the_acceptance_cannot_score(tmp_path):
    # goose compare --topology a.json --topology b.json said only "the children of node 0 have match
    # probabilities summing to 1.7 > 1", not which file (walkthrough, 5 Dec)
    from goose_theory.acceptance import Acceptance
    from goose_theory.cli_util import file_scored
    from goose_theory.yields import exact_yield
    from goose_theory.topology import Topology
    wide = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), *[(0, "transition", r) for r in range(5)]])
    assert file_scored("w.json", exact_yield, wide, Acceptance.parse(0.5, 0.1)).expected_tau == pytest.approx(1.5 + 5 * 0.1)
    with pytest.raises(UsageError, match=r"^--topology w\.json: exclusive model: the children of node 0 .* 1\.2 > 1"):
        file_scored("w.json", exact_yield, wide, Acceptance.parse(0.7, 0.1))


def test_a_value_starting_minus_digit_reaches_its_options_check(capsys):
    # argparse 3.11 took --p-s -0.5,0.3 for an option ("expected one argument"), so the message never
    # said what was wrong with the value (--sizes -1,2 in stop 47's walkthrough)
    from goose_runtime.cli import main
    assert main(["optimize", "--p-s", "-0.5,0.3", "--p-t", "0.05", "--budget", "4", "--out", "x.json"]) == 2
    assert capsys.readouterr().err == "error: p_s: -0.5 is not a probability in [0, 1]\n"


def test_goose_without_a_command_is_one_line(capsys):
    from goose_runtime.cli import main
    assert main([]) == 2  # it printed the whole help to stdout
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: goose: a command is needed, one of yield, simulate,") and err.count("\n") == 1


def test_count_takes_whole_numbers_in_float_notation(capsys):
    from goose_runtime.cli import main
    from goose_theory.cli_util import count

    assert (count("1e6"), count("1.5e3"), count("7"), count("-3")) == (1_000_000, 1500, 7, -3)  # range: the command's
    for bad in ("2.5", "nan", "inf", "1e-3", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=f"invalid count {bad!r}"):
            count(bad)
    # simulate --cycles 1e6 was "invalid int value", while its range error printed 1e+11
    with pytest.raises(SystemExit, match="2"):  # argparse's own errors exit from the parser
        main(["simulate", "--topology", "x.json", "--p-s", "0.5", "--cycles", "2.5"])
    assert capsys.readouterr().err.strip().endswith("argument --cycles: invalid count '2.5' (a whole number: 250, 1e6)")


def test_a_regime_note_never_precedes_an_error(capsys, tmp_path):
    # the two-regime note was printed, then the refusal of the tree under the rates: two lines on stderr
    from goose_runtime.cli import main
    from goose_theory.topology import Topology, save_topology

    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1)])
    fit = {"psi": 0.5, "matched": {"p_s": 0.8, "p_t": 0.2}, "unmatched": {"p_s": 0.0, "p_t": 0.2}}
    save_topology(tree.with_meta(regime_fit=fit), tmp_path / "single.json")
    for argv in (["yield"], ["simulate", "--cycles", "1000"], ["compare", "--budget", "3"]):
        assert main([*argv, "--topology", str(tmp_path / "single.json"), "--p-s", "0.8", "--p-t", "0.2"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and "exclusive model" in err, err


def test_compare_takes_several_trees_after_one_flag(capsys, tmp_path):
    # the README writes `goose compare ... --topology mine.json ...`; the flag took one file, so a second
    # was "unrecognized arguments" (walkthrough, 6 Dec); the repeated flag still works
    import json

    from goose_runtime.cli import main
    from goose_theory.topology import Topology, save_topology
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]), a)
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "transition", 0)]), b)
    flags = ["compare", "--budget", "4", "--p-s", "0.6", "--p-t", "0.1", "--json"]
    for files in (["--topology", str(a), str(b)], ["--topology", str(a), "--topology", str(b)]):
        assert main([*flags, *files]) == 0
        rows = json.loads(capsys.readouterr().out)["rules"][-2:]
        assert [r["rule"] for r in rows] == [f"topology:{a}", f"topology:{b}"]
        assert [r["predicted_tau"] for r in rows] == pytest.approx([1.6, 1.1])


def test_an_empty_acceptance_model_is_refused(capsys):
    # bad-input sweep, 6 Dec: --model '' ran as the default (exclusive) while --model bogus was refused
    from goose_runtime.cli import main
    assert main(["compare", "--budget", "4", "--p-s", "0.6", "--p-t", "0.1", "--model", ""]) == 2
    assert capsys.readouterr().err == "error: model: unknown acceptance model '' (expected one of exclusive, independent)\n"


def test_a_regime_note_gives_the_files_own_prediction(capsys):
    # practitioner review, 6 Dec: goose yield printed E[tau] 3.850 on a regime file predicting 1.922, the note
    # naming the metadata key but not the number
    from goose_theory.cli_util import regime_note
    from goose_theory.topology import Topology
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    regime_note(tree.with_meta(regimes={"unmatched": tree.to_dict()}, predicted_tau=1.9216), "pair.json", "scores")
    assert capsys.readouterr().err.rstrip().endswith("its two-regime prediction is 1.922")
    regime_note(tree.with_meta(regime_fit={"psi": 0.3}), "one.json", "scores")
    assert capsys.readouterr().err.rstrip().endswith("its two-regime prediction is the predicted_tau in its metadata")
    regime_note(tree, "plain.json", "scores")
    assert capsys.readouterr().err == ""
