"""Prompt sets: fixed order, limits, reproducible splits, JSONL errors naming file and line, encoding."""
from __future__ import annotations

import json
import os
import pathlib

import pytest

from goose_runtime.model import ByteTokenizer
from goose_runtime.prompts import (MTBENCH_FILE, Prompt, PromptError, encode_prompt, load_prompts,
                                   set_name, split_prompts)


def test_humaneval_full_set_in_file_order():
    prompts = load_prompts("humaneval")
    assert len(prompts) == 164
    assert [p.id for p in prompts[:3]] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert all(p.benchmark == "humaneval" and "def " in p.text for p in prompts)


def test_mtbench_vendored_first_turns():
    prompts = load_prompts("mtbench")
    rows = [json.loads(line) for line in MTBENCH_FILE.read_text().splitlines()]
    assert len(prompts) == 80 == len(rows)
    assert [p.text for p in prompts] == [r["turns"][0] for r in rows]
    assert (MTBENCH_FILE.parent / "NOTICE").is_file() and (MTBENCH_FILE.parent / "LICENSE").is_file()


@pytest.mark.parametrize("shuffled, source", [("humaneval-shuffled", "humaneval"), ("mtbench-shuffled", "mtbench")])
def test_shuffled_sets_are_their_source_in_sha256_order_of_ids(shuffled, source):
    import hashlib
    mixed, plain = load_prompts(shuffled), load_prompts(source)
    assert sorted((p.id, p.text) for p in mixed) == sorted((p.id, p.text) for p in plain)
    digests = [hashlib.sha256(p.id.encode()).hexdigest() for p in mixed]
    assert digests == sorted(digests) and [p.id for p in mixed] != [p.id for p in plain]
    assert {p.benchmark for p in mixed} == {shuffled} and set_name(shuffled) == shuffled


def test_mtbench_shuffled_is_the_order_of_the_committed_shuffled_copy():
    # section 12's MT-Bench halves were cut from this JSONL copy; the built-in set must agree with it
    copy = pathlib.Path(__file__).parents[1] / "bench/results/holdout_mtbench_shuffled_40_2026-11-30/mtbench-shuffled.jsonl"
    rows = [json.loads(line) for line in copy.read_text().splitlines()]
    assert [p.id for p in load_prompts("mtbench-shuffled")] == [str(r["question_id"]) for r in rows]


def test_stdlib_wide_on_this_interpreter_is_large_and_disjoint_from_stdlib():
    wide = load_prompts("stdlib-wide")
    assert len(wide) >= 300  # Python 3.11.7: 397 modules with a qualifying function
    assert len({p.id for p in wide}) == len(wide)
    assert not {p.id for p in wide} & {p.id for p in load_prompts("stdlib")}
    assert len({p.id.split(".")[0] for p in wide[:50]}) > 20  # a shuffle, not one package's run
    chat = _ChatTokenizer(512)
    assert encode_prompt(chat, wide[0]) == chat.encode(wide[0].text)  # raw code, like stdlib


@pytest.mark.parametrize("bench", ["humaneval", "mtbench", "stdlib", "stdlib-wide"])
def test_limit_is_a_prefix_and_deterministic(bench):
    full = load_prompts(bench)
    assert load_prompts(bench, limit=5) == full[:5]
    assert load_prompts(bench) == full


def test_limit_below_one_rejected():
    with pytest.raises(PromptError, match="at least 1"):
        load_prompts("humaneval", limit=0)


def test_unknown_bench_name():
    with pytest.raises(PromptError, match="unknown prompt set 'nope'.*jsonl file$"):  # nothing near: no guess
        load_prompts("nope")
    with pytest.raises(PromptError, match="; did you mean 'mtbench-shuffled'\\?$"):
        load_prompts("mtbench-shufled")


def test_jsonl_fields_ids_and_blank_lines(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "a", "id": "x"}\n\n{"text": "b"}\n{"turns": ["c", "d"]}\n'
                    '{"prompt": "e", "id": null, "question_id": 81}\n{"prompt": "f", "id": ""}\n')
    prompts = load_prompts(str(path))
    assert prompts == [Prompt("x", "a", "mine"), Prompt("3", "b", "mine"), Prompt("4", "c", "mine"),
                       Prompt("81", "e", "mine"), Prompt("6", "f", "mine")]  # null: not given (was "None")
    path.write_bytes(b'\xef\xbb\xbf{"prompt": "a", "id": "x"}\n')  # a BOM (Windows editors): line 1 was "not valid JSON"
    assert load_prompts(str(path)) == [Prompt("x", "a", "mine")]
    path.write_text('{"prompt": "", "text": "b"}\n{"prompt": null, "turns": ["c"]}\n')  # "" and null: not given
    assert load_prompts(str(path)) == [Prompt("1", "b", "mine"), Prompt("2", "c", "mine")]


def test_a_large_set_is_read_in_one_pass_and_an_oversized_file_refused(tmp_path, monkeypatch):
    path = tmp_path / "big.jsonl"
    path.write_text("".join(f'{{"prompt": "a", "id": {i}}}\n' for i in range(100_000)) + '{"prompt": "b", "id": 99999}\n')
    with pytest.raises(PromptError, match="duplicate prompt id '99999'"):  # a count per id took 141 s
        load_prompts(str(path))
    monkeypatch.setattr("goose_runtime.prompts.MAX_JSON_BYTES", 1 << 20)
    with pytest.raises(PromptError, match="big.jsonl: larger than 1 MB, more than a prompt set"):
        load_prompts(str(path))


@pytest.mark.parametrize("content, message", [
    ("", "empty"),
    ('{"prompt": "a"}\nnot json\n', "mine.jsonl:2: not valid JSON"),
    ('{"prompt": "a"}\n' + "[" * 50_000 + "\n", "mine.jsonl:2: not valid JSON \\(nested too deeply"),
    ('{"prompt": "a", "id": ' + "7" * 5000 + "}\n", "mine.jsonl:1: not valid JSON \\(an integer longer"),
    ('[1, 2]\n', "mine.jsonl:1: expected a JSON object"),
    ('{"prompt": "  "}\n', "mine.jsonl:1: needs a non-empty string"),
    ('{"other": 1}\n', "mine.jsonl:1: needs a non-empty string"),
    ('{"prompt": "a", "id": 1}\n{"prompt": "b", "id": 1}\n', "duplicate prompt id '1'"),
    ('{"prompt": "a"}\n{"prompt": "b", "prompt": "c"}\n', "mine.jsonl:2: the key 'prompt' appears twice in one object"),
    ('{"prompt": "a", "id": [1]}\n', "mine.jsonl:1: id must be a string or an integer, got \\[1\\]"),
    ('{"prompt": "a", "task_id": true}\n', "mine.jsonl:1: task_id must be a string or an integer, got True"),
    ('{"prompt": "a", "id": "x\\ny"}\n', "mine.jsonl:1: id must be one line without control characters, got 'x\\\\ny'"),
])
def test_jsonl_errors_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "mine.jsonl"
    path.write_text(content)
    with pytest.raises(PromptError, match=message):
        load_prompts(str(path))


def test_a_pipe_is_refused_naming_what_to_do(tmp_path):
    # a set is read twice (checked, then decoded): a pipe was reported as "no such file"
    fifo = tmp_path / "set.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(PromptError, match="set.jsonl: is not a regular file \\(save the prompts to a .jsonl file\\)"):
        load_prompts(str(fifo))


def test_missing_jsonl(tmp_path):
    with pytest.raises(PromptError, match="no such file"):
        load_prompts(str(tmp_path / "absent.jsonl"))


def test_an_id_or_file_name_the_trace_cannot_hold_is_one_line(tmp_path):
    # both went into the trace as they were and failed there, after the whole decode (UnicodeEncodeError)
    ids = tmp_path / "ids.jsonl"
    ids.write_text('{"prompt": "ok", "id": "a"}\n{"prompt": "hi", "id": "\\ud800"}\n', encoding="utf-8")
    with pytest.raises(PromptError, match=r"ids.jsonl:2: id: not valid Unicode text \('\\ud800' at character 0"):
        load_prompts(str(ids))
    named = tmp_path / os.fsdecode(b"set_\xff.jsonl")  # the stem, 'set_\udcff', is the set's label
    named.write_text('{"prompt": "hi", "id": "x"}\n', encoding="utf-8")
    with pytest.raises(PromptError, match=r"the file name \(the prompt set's label\): not valid Unicode text"):
        load_prompts(str(named))


def test_split_is_deterministic_disjoint_and_ordered():
    prompts = load_prompts("humaneval", limit=40)
    fit, hold = split_prompts(prompts, holdout_fraction=0.25, seed=3)
    assert len(hold) == 10 and len(fit) == 30
    assert set(fit).isdisjoint(hold) and set(fit) | set(hold) == set(prompts)
    assert fit == sorted(fit, key=prompts.index) and hold == sorted(hold, key=prompts.index)
    assert (fit, hold) == split_prompts(prompts, holdout_fraction=0.25, seed=3)
    assert hold != split_prompts(prompts, holdout_fraction=0.25, seed=4)[1]


def test_split_rejects_bad_fraction():
    with pytest.raises(PromptError):
        split_prompts([], holdout_fraction=1.0, seed=0)


class _ChatTokenizer(ByteTokenizer):
    chat_template = "fake"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        return "<user>" + messages[0]["content"] + "<assistant>"


def test_encode_raw_for_base_models_and_stdlib():
    tok = ByteTokenizer(512)
    p = Prompt("1", "def f():", "humaneval")
    assert encode_prompt(tok, p) == tok.encode("def f():")
    chat = _ChatTokenizer(512)
    code = Prompt("m:1", "x = 1\n", "stdlib")
    assert encode_prompt(chat, code) == chat.encode("x = 1\n")


def test_encode_chat_template_for_instruct_models():
    chat = _ChatTokenizer(512)
    question = encode_prompt(chat, Prompt("81", "Hello?", "mtbench"))
    assert chat.decode(question) == "<user>Hello?<assistant>"
    task = chat.decode(encode_prompt(chat, Prompt("HumanEval/0", "def f():\n", "humaneval")))
    assert task.startswith("<user>Complete the following Python function") and "```python\ndef f():\n```" in task
    shuffled = encode_prompt(chat, Prompt("HumanEval/0", "def f():\n", "humaneval-shuffled"))
    assert chat.decode(shuffled) == task  # the shuffled copy keeps HumanEval's wrapper


def test_a_bare_file_name_is_a_jsonl_set(tmp_path, monkeypatch):
    # load_prompts reads any existing file, with or without the .jsonl suffix; set_name is its stem
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myset").write_text('{"prompt": "a"}\n')
    (tmp_path / "other.jsonl").write_text('{"prompt": "b"}\n')
    assert [p.benchmark for p in load_prompts("myset")] == ["myset"] and set_name("myset") == "myset"
    assert [p.benchmark for p in load_prompts("other.jsonl")] == ["other"] and set_name("other.jsonl") == "other"
    assert set_name("humaneval") == "humaneval" and set_name("nope") == "nope"


def test_built_in_sets_are_read_once_and_handed_out_as_fresh_lists():
    first = load_prompts("mtbench")
    first.clear()  # a caller's list is its own
    again = load_prompts("mtbench")
    assert len(again) == 80 and again is not first and again[0] is load_prompts("mtbench")[0]


def test_text_that_is_not_utf8_is_one_line(tmp_path):
    raw = tmp_path / "latin1.jsonl"
    raw.write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    with pytest.raises(PromptError, match=r"latin1.jsonl: not valid UTF-8 \(it holds the byte 0xe9\)"):
        load_prompts(str(raw))
    lone = tmp_path / "surrogate.jsonl"
    lone.write_text('{"prompt": "ok"}\n{"prompt": "\\ud800 x"}\n', encoding="utf-8")
    with pytest.raises(PromptError, match=r"surrogate.jsonl:2: not valid Unicode text"):
        load_prompts(str(lone))
    with pytest.raises(PromptError, match="is a directory"):
        load_prompts(str(tmp_path))
