"""Which children a candidate node may hold together under the exclusive model.

At a reached node at most one child can match, so the children's q must sum to <= 1. When the
spine child and all ``top_k`` ranks together exceed that, a node has to leave some out, and
*which* matters: first fit in rank order (:meth:`Candidate.rank_set`) can be beaten by giving up a
rank that fits for two later ones (p_s 0.9, p_t 0.66, 0.37, 0.37, budget 4, max_spine 1: ranks 1
and 2 under a transition node give E[tau] 2.934, rank 0 alone 2.886). Adding a child never lowers
the best value at a budget (the dynamic programme may give it no nodes), so the sets worth
searching are the *maximal* feasible ones, less those another set beats child for child (at least
the same children's kinds, each with at least the q): :func:`child_sets` lists them, and
:mod:`goose_theory._dp` scores every one as a variant of the node's type.

Compromise: children of equal q (a flat tail of ranks, which the model rates alike) are
interchangeable in the model, so one set stands for all of them: the one with the lowest ranks,
which the runtime finds likelier. Under the independent model, or where everything fits, a node
has one set: all its children.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

from .acceptance import EXCLUSIVE_TOLERANCE, AcceptanceError
from .candidate import node_label, ranks_used

# (with the spine child?, transition ranks in rank order)
ChildSet = tuple[bool, tuple[int, ...]]

# Competing sets per node type, each a variant type in the DP (its cost grows with them): distinct
# p_t over many ranks can give thousands (top_k 16 with 16 distinct p_t summing to 3: ~200).
MAX_CHILD_SETS = 1000
MAX_FITS = 20 * MAX_CHILD_SETS  # maximal sets searched before that (~0.5 s; 3,775 in the case above)
VECTOR_FROM = 500  # sets: numpy rows beat Python comparisons above this (4 Dec: Python at 431 sets, numpy at 942)


class ChildSetLimitError(AcceptanceError):
    """A node has more competing child sets than :data:`MAX_CHILD_SETS`."""


def maximal_fits(q: Sequence[float], limit: float = 1.0 + EXCLUSIVE_TOLERANCE,
                 labels: Sequence[object] | None = None, cap: int | None = None) -> list[tuple[int, ...]]:
    """Every maximal set of indices of ``q`` whose sum stays <= ``limit``. Items of equal q and
    equal label are interchangeable: of those a set takes the lowest indices, and sets that differ
    only in which of them they take are listed once. Sets come as sorted index tuples, in the
    order a depth-first search taking as many as fit of each group (first met first) finds them.
    Raises :class:`ChildSetLimitError` on finding more than ``cap`` (None: no cap).

    Example:
        >>> maximal_fits([0.66, 0.37, 0.37])       # rank 0 alone, or ranks 1 and 2
        [(0,), (1, 2)]
        >>> maximal_fits([0.5, 0.2, 0.2, 0.2, 0.2])
        [(0, 1, 2), (1, 2, 3, 4)]
    """
    labels = [None] * len(q) if labels is None else labels
    groups: dict[tuple[object, float], list[int]] = {}
    for i, (x, label) in enumerate(zip(q, labels)):
        groups.setdefault((label, float(x)), []).append(i)
    keys = list(groups)
    counts = [0] * len(keys)
    rest = [0.0] * (len(keys) + 1)  # rest[g]: everything in groups g.. (a bound on what can still come)
    for g in range(len(keys) - 1, -1, -1):
        rest[g] = rest[g + 1] + keys[g][1] * len(groups[keys[g]])
    found: list[tuple[int, ...]] = []

    def search(g: int, total: float, gap: float) -> None:
        # gap: the smallest q of a group left short; a maximal set's total ends above limit - gap
        if total + rest[g] + gap <= limit:
            return  # whatever comes, one more of that group would still fit: not maximal
        if g == len(keys):
            found.append(tuple(sorted(i for h, key in enumerate(keys) for i in groups[key][:counts[h]])))
            if cap is not None and len(found) > cap:
                raise ChildSetLimitError(f"more than {cap} maximal child sets")
            return
        value, members = keys[g][1], groups[keys[g]]
        running = [total]
        for _ in members:  # running[c]: the total with c of this group, summed one at a time
            running.append(running[-1] + value)
        for c in range(len(members), -1, -1):
            if running[c] <= limit:
                counts[g] = c
                search(g + 1, running[c], gap if c == len(members) else min(gap, value))
        counts[g] = 0

    search(0, 0.0, float("inf"))
    return found


def child_sets(cand, kind: int, depth: int) -> tuple[ChildSet, ...]:
    """The child sets a node of ``kind`` at ``depth`` may hold (spine child iff eligible first,
    then the transition ranks that exist there): the first fit in rank order, beside the spine
    child where eligible, first (it keeps a tie), then every other maximal set that fits and that
    no other set beats child for child, spine-holding ones first, then by ranks. Raises
    :class:`ChildSetLimitError` past :data:`MAX_CHILD_SETS` such sets.

    Example:
        >>> from goose_theory.acceptance import Acceptance
        >>> from goose_theory.candidate import Candidate
        >>> from goose_theory.topology import ROOT, TRANSITION
        >>> cand = Candidate(Acceptance.parse(0.9, "0.66,0.37,0.37"), max_spine=1, top_k=3)
        >>> child_sets(cand, ROOT, 0)         # the spine child alone, rank 0 alone, or ranks 1 and 2
        ((True, ()), (False, (0,)), (False, (1, 2)))
        >>> child_sets(cand, TRANSITION, 1)
        ((False, (0,)), (False, (1, 2)))
    """
    key = ("childsets", kind, depth)
    if key not in cand._cache:
        cand._cache[key] = _child_sets(cand, kind, depth)
    return cand._cache[key]


def _child_sets(cand, kind: int, depth: int) -> tuple[ChildSet, ...]:
    eligible = cand.spine_eligible(kind, depth)
    first = (eligible, cand.rank_set(kind, depth, eligible))
    ranks = list(range(cand.top_k)) if depth + 1 <= cand.max_depth else []
    acc = cand.acceptance
    q = ([acc.spine_q(depth + 1)] if eligible else []) + [acc.transition_q(r, kind) for r in ranks]
    if acc.independent or sum(q) <= 1.0 + EXCLUSIVE_TOLERANCE:
        return (first,)  # one set: all the children (the first fit then takes every rank)
    return _maximal_sets(tuple(q), eligible, first)


@lru_cache(maxsize=4096)
def _maximal_sets(q: tuple[float, ...], eligible: bool, first: ChildSet) -> tuple[ChildSet, ...]:
    """:func:`child_sets` for the children's q (spine child first iff ``eligible``): a function of
    the numbers alone, cached (a slider move rebuilds the same candidate nodes many times)."""
    shift = 1 if eligible else 0
    labels = ["spine"] * shift + ["rank"] * (len(q) - shift)
    try:
        fits = _in_child_order(q, labels, maximal_fits(q, labels=labels, cap=MAX_FITS))
    except ChildSetLimitError as exc:
        raise _limit_error(str(exc), q, shift) from None
    sets = [(eligible and 0 in chosen, tuple(i - shift for i in chosen if i >= shift)) for chosen in fits]
    kept = [sets[i] for i in _undominated(q, shift, fits, MAX_CHILD_SETS + 1) if sets[i] != first]
    if len(kept) >= MAX_CHILD_SETS:
        raise _limit_error(f"more than {MAX_CHILD_SETS} competing child sets", q, shift)
    return (first, *sorted(kept, key=lambda s: (not s[0], s[1])))


def _limit_error(what: str, q: tuple[float, ...], shift: int) -> ChildSetLimitError:
    return ChildSetLimitError(
        f"exclusive model: {what} at one node (its {len(q) - shift} transition ranks' p_t sum to "
        f"{sum(q[shift:]):.3g}); use a smaller top_k, fewer distinct p_t values, or the independent model")


def _in_child_order(q: tuple[float, ...], labels: Sequence[object],
                    fits: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The sets whose sum also fits when added in child order (spine, then ranks ascending), as
    the yield checks it: :func:`maximal_fits` adds group by group, and near the limit the float
    sums can differ by an ulp. A set that fails gives way to its one-smaller subsets, each less
    one item of a group of equal (label, q), its highest index (so the set keeps the lowest, as
    maximal_fits does), never an item of q = 0 (which cannot lower the sum); each set tried once."""
    out: dict[tuple[int, ...], None] = {}
    seen: set[tuple[int, ...]] = set()
    todo = list(reversed(fits))  # popped from the end: in the search's order
    while todo:
        chosen = todo.pop()
        if chosen in seen:
            continue
        seen.add(chosen)
        total = 0.0
        for i in chosen:
            total += q[i]
        if total <= 1.0 + EXCLUSIVE_TOLERANCE:
            out[chosen] = None
            continue
        last = {(labels[i], q[i]): i for i in chosen if q[i] > 0}  # each group's highest index
        todo.extend(tuple(j for j in chosen if j != i) for i in sorted(last.values(), reverse=True))
    return list(out)


def _undominated(q: tuple[float, ...], shift: int, fits: list[tuple[int, ...]],
                 limit: int | None = None) -> list[int]:
    """Indices of the sets no other set dominates (:func:`_dominates`). Exact and fast: a
    dominating set has at least the spine flag, the size and, entry by entry, the sorted q of the
    one it dominates, so sorted by those, descending (the q lexicographically, which a float sum
    would not keep exactly), it comes first; and each set is compared with the kept ones only
    (domination is transitive, so a set beaten by a dropped one is beaten by a kept one). Stops
    once ``limit`` are kept. Few sets are compared in Python, many as numpy rows."""
    sigs = [(shift == 1 and 0 in f, sorted((q[j] for j in f if j >= shift), reverse=True)) for f in fits]
    order = sorted(range(len(fits)), key=lambda i: (not sigs[i][0], -len(fits[i]), [-x for x in sigs[i][1]]))
    rows = _signature_rows(sigs) if len(fits) > VECTOR_FROM else None
    kept: list[int] = []
    for i in order:
        if rows is None:
            beaten = any(_dominates(sigs[k], sigs[i]) for k in kept)
        else:
            others = rows[kept]
            beaten = bool((np.all(others >= rows[i], axis=1) & np.any(others != rows[i], axis=1)).any())
        if not beaten:
            kept.append(i)
            if len(kept) == limit:
                break
    return kept


def _signature_rows(sigs: list[tuple[bool, list[float]]]) -> np.ndarray:
    """One row per signature: the spine flag, then the sorted q, padded with -1 (below any q, so
    a shorter set never covers a longer one): a covers b iff every entry of a's row is >= b's."""
    width = max(len(ranks) for _, ranks in sigs)
    rows = np.full((len(sigs), width + 1), -1.0)
    for i, (spine, ranks) in enumerate(sigs):
        rows[i, 0] = 1.0 if spine else 0.0
        rows[i, 1:1 + len(ranks)] = ranks
    return rows


def _dominates(a: tuple[bool, list[float]], b: tuple[bool, list[float]]) -> bool:
    """Set a is at least as good as set b at every budget: it has the spine child if b has, and
    its transition q, sorted, are at least b's one by one (give a's children what b's would get:
    under the exclusive model a child's share is q (1 + its subtree's), and all transition
    children of a node have the same subtree type). Sets of equal signature do not count.
    :func:`_undominated` applies it to few sets; tests hold its numpy path against it."""
    (spine_a, q_a), (spine_b, q_b) = a, b
    return (a != b and (spine_a or not spine_b) and len(q_a) >= len(q_b)
            and all(x >= y for x, y in zip(q_a, q_b)))


def set_note(cand, kind: int, depth: int, with_spine: bool, ranks: tuple[int, ...],
             where: str | None = None) -> str | None:
    """A one-line note when a node's child set leaves ranks out, else None: the first fit's note
    (:meth:`Candidate.truncation_note`) where the set is the first fit, otherwise the set itself.
    ``where`` names the nodes (default: from kind and depth)."""
    if ranks == cand.rank_set(kind, depth, with_spine):
        return cand.truncation_note(kind, depth, with_spine, first_fit=True, where=where)
    where = where or node_label(kind, depth)
    spine = cand.spine_term(depth, with_spine)
    beside = " beside the spine child" if spine else ""
    return (f"exclusive model: at {where} {ranks_used(ranks, cand.top_k)}{beside} (the best set whose "
            f"{spine}p_t fits in 1; first fit in rank order does worse)")
