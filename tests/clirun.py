"""Helpers shared by the CLI tests (validate, loop, decode, record-traces): a refused command
line, a command's JSON output, the validation trace checked against its table, and fit inputs that hold
every prompt of a set."""
from __future__ import annotations

import json

import pytest

from goose_runtime.cli import main
from goose_runtime.model import default_model_dir


# the theory CLI tests' tree (tests/test_cli.py, tests/test_cli_acceptance.py: the topo_file fixture in conftest)
THEORY_NODES = [(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1), (1, "spine", 0),
                (1, "transition", 0), (2, "transition", 0)]


def fails(capsys, argv, message):
    # the first use of the default model converts it with a progress line on stderr: do that up front,
    # so that whether this test sees one line does not hang on which test ran first in a fresh checkout
    default_model_dir()
    capsys.readouterr()  # (its own loading bars)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:") and message in err, err


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def check_validation_trace(path, rows) -> None:
    """The run's trace is a valid trace file whose methods and per-method tau are the table's."""
    from goose_theory.traceio import open_trace, trace_metadata
    pf = open_trace(path)
    table = pf.read().to_pandas()
    roots = table[table["node"] == 0]
    assert set(roots["method"]) == {r["method"] for r in rows}
    for r in rows:
        mine = roots[roots["method"] == r["method"]]
        assert mine["tau"].sum() / len(mine) == pytest.approx(r["measured_tau"])
    config = trace_metadata(pf)["config"]
    assert config["holdout"] is True and set(config["prompt_ids"]) == set(roots["prompt_id"])


def fitted_inputs(tmp_path, name: str = "held") -> tuple[str, str, str]:
    """(topology, JSONL set, fit trace): a topology whose provenance trace holds every prompt of the
    set ``name`` (ids g/p00000, g/p00001), so holding them out leaves none."""
    import json

    from goose_theory.synthetic import SyntheticSpec, write_synthetic
    from goose_theory.topology import Topology, save_topology
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    (tmp_path / "fit").mkdir(exist_ok=True)
    trace, topo = tmp_path / "fit" / f"{name}.parquet", tmp_path / "fit" / "topology.json"
    bench = tmp_path / f"{name}.jsonl"
    write_synthetic(trace, SyntheticSpec(0.6, 0.1, (tree,), prompts=2, cycles=5, benchmark=name, prompt_group="g"),
                    seed=1)
    save_topology(tree.with_meta(provenance={"traces": [str(trace)]}), topo)
    bench.write_text("".join(json.dumps({"id": f"g/p{i:05d}", "prompt": f"print({i})"}) + "\n" for i in range(2)))
    return str(topo), str(bench), str(trace)
