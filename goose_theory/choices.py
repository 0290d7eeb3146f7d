"""Tree choices: the rank-path trees of Medusa, EAGLE, TensorRT-LLM and vLLM, to and from topologies.

Runtimes with a static speculation tree describe it as a list of *choices*: one path of 0-based
draft ranks per node, the root left implicit. ``[[0], [1], [0, 0]]`` is the root's top two
candidates and the top candidate under the first (Medusa's ``medusa_choices``, EAGLE's tree
choices, TensorRT-LLM's ``--medusa_choices``, vLLM's ``speculative_token_tree`` as tuples).
A path's every proper prefix must be a node too.

Goose's transition nodes are exactly such nodes (an adjacency candidate by rank under its
parent), so a transition-only topology and a choices list describe the same tree, and the exact
E[tau] of ``goose yield`` is the textbook sum over nodes of the product of rank acceptances along
each path. A spine node (the context matcher's chain) has no rank path: a topology with a spine
is refused on export, not approximated. Transition-only trees come from ``goose optimize --p-s 0``
(or ``--rule transition-only``), ``tr`` and ``iso:K``.

Compromises: the file is the runtimes' bare list (no version field, so that it can be pasted into
their configs as it is); the reader also takes a Python literal (tuples, as vLLM and Medusa's
``choices.py`` spell them) and refuses anything else. Export sorts by (length, path), the order
Medusa sorts into; import accepts any order.

Example:
    >>> t = topology_from_choices([[0], [1], [0, 0]])
    >>> t.parent, t.rank, t.budget
    ((-1, 0, 0, 1), (0, 0, 1, 0), 3)
    >>> choices_from_topology(t)
    [[0], [1], [0, 0]]
"""
from __future__ import annotations

import ast
import json
import os
from typing import Any, Sequence

from .errors import InputError
from .fileio import write_text_atomic
from .jsonio import DuplicateKeyError, loads_json, read_text_file
from .topology import MAX_RANK, ROOT, TRANSITION, Topology

MAX_NODES = 10_000  # goose optimize's largest budget; Medusa's and EAGLE's default trees have 63 and 59
MAX_PATH = 64  # goose optimize's deepest tree; those runtimes draft 4-6 levels
MAX_TEXT = 16 << 20  # 10 000 paths of 64 five-digit ranks are 4 MB (JSON)
# Python's parser builds a node per token, about 1 KB each: a 16 MB source took 8 GB and half a
# minute. Medusa's medusa_choices.py, nine trees, is 30 KB; a tree of 10 000 paths has ~640 000 ranks.
MAX_SOURCE = 1 << 20  # a pathological 2 MB source (x=1 on 500 000 lines) took 9 s and 1.3 GB
MAX_RANKS = MAX_NODES * MAX_PATH


class ChoicesError(InputError):
    """A choices list that does not describe a tree; the message is one line."""


def choices_from_topology(topology: Topology) -> list[list[int]]:
    """The rank path of every non-root node of a transition-only ``topology``, sorted by
    (length, path). Raises :class:`ChoicesError` when the tree has spine nodes."""
    if topology.spine_length:
        raise ChoicesError(f"the tree has {topology.spine_length} spine node(s): tree choices are draft-rank paths "
                           f"only and cannot hold the context match; export a transition-only tree (goose optimize "
                           f"--p-s 0, or --rule transition-only)")
    if topology.budget > MAX_NODES or int(topology.depth.max()) > MAX_PATH:  # else import refused what export wrote
        raise ChoicesError(f"the tree has {topology.budget} nodes past the root, {int(topology.depth.max())} levels: "
                           f"a choices list here holds at most {MAX_NODES} paths of {MAX_PATH} (as choices import reads)")
    paths: list[tuple[int, ...]] = [()]
    for i in range(1, topology.n_nodes):  # parents precede children
        paths.append(paths[topology.parent[i]] + (topology.rank[i],))
    return [list(p) for p in sorted(paths[1:], key=lambda p: (len(p), p))]


def topology_from_choices(choices: Any, *, meta: dict[str, Any] | None = None) -> Topology:
    """The transition-only topology of a choices list (lists or tuples of ranks, any order).

    Raises :class:`ChoicesError` naming the first path that is malformed, repeated, deeper than
    :data:`MAX_PATH`, or whose parent path is missing. ``max_depth`` is the deepest path's length
    (at least the paper's 6).
    """
    paths = _paths(choices)
    index = {path: i + 1 for i, path in enumerate(paths)}
    nodes = [(-1, ROOT, 0)]
    index[()] = 0  # the implicit root
    for path in paths:
        if path[:-1] not in index:
            raise ChoicesError(f"path {list(path)} has no parent: {list(path[:-1])} is not in the list "
                               f"(every prefix of a path must be a node)")
        nodes.append((index[path[:-1]], TRANSITION, path[-1]))
    depth = max((len(p) for p in paths), default=0)
    return Topology.from_nodes(nodes, max_depth=max(6, depth), meta=meta)


def portability_notes(paths: Sequence[Sequence[int]]) -> list[str]:
    """What other runtimes make of these paths, where it is not what goose means by them (each a
    phrase). Medusa and EAGLE-1 draft the top 10 per node. TensorRT-LLM's PyTorch EAGLE drafts a
    node's top-(number of its children), so a rank gap drafts another token there. vLLM drafts one
    branching count per level (the level's nodes over the previous level's) under every node, so a
    tree whose nodes of a level differ in their number of children is another tree there (newer
    versions refuse it).

    Example:
        >>> for note in portability_notes([[0], [2], [0, 10]]):
        ...     print(note[:40])
        rank 10 is past the top 10 that Medusa a
        rank gaps (path [2] without [1]): Tensor
        levels not uniform (level 1: 0 to 1 chil
    """
    notes = []
    top = max((r for p in paths for r in p), default=0)
    if top > 9:
        notes.append(f"rank {top} is past the top 10 that Medusa and EAGLE-1 draft")
    present = {tuple(p) for p in paths}
    ordered = sorted(present, key=lambda p: (len(p), p))
    gap = next((p for p in ordered if p[-1] > 0 and p[:-1] + (p[-1] - 1,) not in present), None)
    if gap is not None:
        notes.append(f"rank gaps (path {list(gap)} without {list(gap[:-1] + (gap[-1] - 1,))}): TensorRT-LLM's "
                     f"PyTorch EAGLE and vLLM draft the first children of a node, so they would draft other tokens "
                     f"there")
    uneven = _uneven_level(present)
    if uneven is not None:
        level, few, many = uneven
        notes.append(f"levels not uniform (level {level}: {few} to {many} children per node): vLLM drafts the same "
                     f"number under every node of a level, so it would draft another tree (or refuse this one); "
                     f"goose optimize --rule uniform-levels builds the best tree it takes")
    return notes


def _uneven_level(present: set[tuple[int, ...]]) -> tuple[int, int, int] | None:
    """(depth, fewest, most) children per node at the first depth whose nodes differ, else None;
    leaves count only above the last level."""
    children: dict[tuple[int, ...], int] = {p: 0 for p in present}
    children[()] = 0
    for p in present:
        children[p[:-1]] += 1
    deepest = max((len(p) for p in present), default=0)
    for depth in range(deepest):
        counts = [n for p, n in children.items() if len(p) == depth]
        if min(counts) != max(counts):
            return depth, min(counts), max(counts)
    return None


def _paths(choices: Any) -> list[tuple[int, ...]]:
    """Validated rank paths sorted by (length, path): parents first, duplicates refused."""
    if not isinstance(choices, (list, tuple)):
        raise ChoicesError(f"tree choices must be a list of rank paths such as [[0], [1], [0, 0]], "
                           f"got {type(choices).__name__}")
    if len(choices) > MAX_NODES:
        raise ChoicesError(f"{len(choices)} paths: more than the {MAX_NODES} nodes goose handles")
    seen: set[tuple[int, ...]] = set()
    for entry in choices:
        path = _path(entry)
        if path in seen:
            raise ChoicesError(f"path {list(path)} appears twice")
        seen.add(path)
    return sorted(seen, key=lambda p: (len(p), p))


def _path(entry: Any) -> tuple[int, ...]:
    if not isinstance(entry, (list, tuple)) or not entry:
        raise ChoicesError(f"each choice must be a non-empty list of ranks, got {entry!r}"[:200])
    if len(entry) > MAX_PATH:
        raise ChoicesError(f"a path of {len(entry)} ranks: deeper than {MAX_PATH}")
    for rank in entry:
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank <= MAX_RANK:
            raise ChoicesError(f"path {entry!r}: ranks must be integers in 0..{MAX_RANK}, got {rank!r}"[:200])
    return tuple(entry)


_PARSE_ERRORS = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)


CONFIG_KEYS = ("speculative_token_tree", "eagle_choices", "medusa_choices", "tree_choices")


def parse_choices_text(text: str, *, name: str | None = None) -> Any:
    """The list in ``text``: JSON, a Python literal (``[(0,), (1,), (0, 0)]``; also inside a JSON
    string, as vLLM's ``speculative_token_tree`` is written), a runtime's JSON config holding one
    (the entry ``name``, else the first of :data:`CONFIG_KEYS`, also under ``speculative_config``),
    or, in a Python source such as Medusa's ``medusa_choices.py``, the literal assigned to ``name``
    (or to its only ``NAME = [...]``). Nothing is executed: the source is parsed and only literals
    are evaluated.

    Example:
        >>> parse_choices_text("[(0,), (1,), (0, 0)]")
        [(0,), (1,), (0, 0)]
        >>> parse_choices_text('"[(0,), (1,)]"'), parse_choices_text("a = [[0]]\\nb = [[0], [1]]", name="b")
        ([(0,), (1,)], [[0], [1]])
        >>> parse_choices_text('{"speculative_config": {"speculative_token_tree": "[(0,), (0, 0)]"}}')
        [(0,), (0, 0)]
    """
    text = text.removeprefix("\ufeff")  # a byte-order mark, as some Windows editors save UTF-8
    _check_size(text)
    try:
        data = loads_json(text)
    except DuplicateKeyError as exc:  # valid JSON: Python's literal parser would take the last one
        raise ChoicesError(str(exc)) from None
    except json.JSONDecodeError as exc:
        json_problem = str(exc)
    else:
        if isinstance(data, dict):
            return _unquoted(_config_entry(data, name))
        if name is not None:
            raise ChoicesError(f"--name picks an entry of a JSON object or a list of a Python source, and this "
                               f"is a JSON {type(data).__name__}")
        return _unquoted(data)
    if len(text) > MAX_SOURCE:
        raise ChoicesError(f"not JSON ({json_problem}), and larger than {MAX_SOURCE >> 20} MB for Python")
    if name is None:
        try:  # literal_eval builds constants only: no names, calls or attributes run
            return _unquoted(ast.literal_eval(text.strip()))
        except _PARSE_ERRORS:
            pass
    lists = _assigned_lists(text) or {}
    if not lists:
        if name is not None:
            raise ChoicesError(f"no list assigned to {name!r} (a Python source of NAME = [...] lines)")
        raise ChoicesError(f"neither JSON ({json_problem}) nor a Python list literal, nor a source assigning one")
    if name is None and len(lists) > 1:
        raise ChoicesError(f"assigns {len(lists)} lists ({', '.join(lists)})"[:160] + ": pick one with --name")
    if name is not None and name not in lists:
        raise ChoicesError(f"no list assigned to {name!r} (it assigns {', '.join(lists)})"[:200])
    return lists[name] if name is not None else next(iter(lists.values()))


def _config_entry(data: dict, name: str | None) -> Any:
    """The tree in a runtime's JSON config: the entry ``name``, else the first of
    :data:`CONFIG_KEYS`, at the top or under ``speculative_config`` (vLLM's flag of that name)."""
    scopes = [data] + ([data["speculative_config"]] if isinstance(data.get("speculative_config"), dict) else [])
    for scope in scopes:
        if name is None and len(found := [k for k in CONFIG_KEYS if k in scope]) > 1:  # as two lists in a source
            raise ChoicesError(f"a JSON object with {len(found)} trees ({', '.join(found)}): pick one with --name")
        for key in (name,) if name is not None else CONFIG_KEYS:
            if key in scope:
                return scope[key]
    if name is not None:
        raise ChoicesError(f"a JSON object without an entry {name!r}"[:200])
    raise ChoicesError(f"a JSON object without {', '.join(CONFIG_KEYS)} (--name picks another entry)")


def _check_size(text: str) -> None:
    """Refuse, before any parser runs, a text with more numbers than the largest tree holds."""
    if len(text) > MAX_TEXT:
        raise ChoicesError(f"larger than {MAX_TEXT >> 20} MB; no tree of {MAX_NODES} nodes is")
    if text.count(",") > MAX_RANKS + MAX_NODES:  # a path's ranks and the paths are comma-separated
        raise ChoicesError(f"more than the {MAX_RANKS} ranks of {MAX_NODES} paths of depth {MAX_PATH}")


def _unquoted(value: Any) -> Any:
    """A string holding the list (vLLM takes the tree as one) is read as the literal it holds."""
    if not isinstance(value, str):
        return value
    if len(value) > MAX_SOURCE:
        raise ChoicesError(f"a string larger than {MAX_SOURCE >> 20} MB for a Python literal")
    try:
        return ast.literal_eval(value.strip())
    except _PARSE_ERRORS:
        raise ChoicesError(f"a string that is not a list literal: {value[:60]!r}") from None


def _assigned_lists(text: str) -> dict[str, Any] | None:
    """``NAME = <list literal>`` at the top level of a Python source; None if it does not parse."""
    try:
        module = ast.parse(text)
    except _PARSE_ERRORS:
        return None
    found: dict[str, Any] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                value = ast.literal_eval(stmt.value)
            except _PARSE_ERRORS:
                continue
            if isinstance(value, str):  # TREE = "[(0,), (1,)]"
                try:
                    value = _unquoted(value)
                except ChoicesError:
                    continue
            if isinstance(value, (list, tuple)):
                found[stmt.targets[0].id] = value
    return found


def load_choices(path: str | os.PathLike, *, name: str | None = None) -> Topology:
    """Read a choices file (JSON, a Python literal, or the list ``name`` of a Python source) as a
    topology; errors name the file."""
    where = os.fspath(path)
    text = read_text_file(where, ChoicesError, max_bytes=MAX_TEXT, what="a tree choices file")
    source = os.path.basename(where) + (f":{name}" if name else "")
    try:
        return topology_from_choices(parse_choices_text(text, name=name),
                                     meta={"rule": "tree-choices", "imported_from": source})
    except ChoicesError as exc:
        raise ChoicesError(f"{where}: {exc}") from None


def choices_text(paths: Sequence[Sequence[int]]) -> str:
    """One line of JSON, as the runtimes' configs write the list."""
    return json.dumps([list(p) for p in paths], separators=(", ", ": ")) + "\n"


def save_choices(paths: Sequence[Sequence[int]], path: str | os.PathLike) -> None:
    """Write ``paths`` as one JSON line, atomically."""
    write_text_atomic(path, choices_text(paths))
