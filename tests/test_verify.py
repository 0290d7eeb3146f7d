"""verify.py: the blocked top-k against torch.topk (the reference), the walk, the tree mask."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from goose_runtime.trees import DraftTree, new_tree
from goose_runtime.verify import (MaskBuilder, _blocked, blocked_topk, greedy_walk, ties_to_argmax, top_candidates,
                                  tree_visibility)


@pytest.mark.parametrize("q,vocab,k", [(1, 49152, 1), (9, 49152, 10), (3, 151936, 10), (4, 1000, 3),
                                       (2, 64, 10), (5, 8, 3)])
def test_blocked_topk_equals_torch_topk(q, vocab, k):
    gen = torch.Generator().manual_seed(q * vocab + k)
    logits = torch.randn(q, vocab, generator=gen)
    want = torch.topk(logits, k, dim=-1)
    vals, idx = blocked_topk(logits, k)
    assert torch.equal(idx, want.indices) and torch.equal(vals, want.values)


def test_blocked_topk_finds_a_top_k_crowded_into_one_block():
    logits = torch.zeros(2, 4096)
    logits[:, 1024:1034] = torch.arange(10, 0, -1, dtype=torch.float32)  # all ten in one block
    assert blocked_topk(logits, 10)[1].tolist() == [list(range(1024, 1034))] * 2
    assert blocked_topk(logits[:1], 10, block=64)[1].tolist() == [list(range(1024, 1034))]  # one row, blocked


def test_one_row_is_read_with_torch_topk_and_several_rows_blocked():
    logits = torch.randn(3, 49152, generator=torch.Generator().manual_seed(5))
    assert _blocked(logits[:1], 10)[2].shape == (1, 49152)        # one row: the whole vocabulary
    assert _blocked(logits, 10)[2].shape == (3, 10 * 64)          # ten blocks of 64 columns a row
    assert _blocked(logits[:1], 10, block=64)[2].shape == (1, 640)  # unless a block is asked for


def test_top_candidates_scores():
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]))
    top, probs = top_candidates(logits, 2, "prob")
    assert top[:, 0].tolist() == [1, 0]
    np.testing.assert_allclose(probs[:, 0], [0.6, 0.5], rtol=1e-6)
    top, none = top_candidates(logits, 1, None)
    assert none is None and top.shape == (2, 1)


def test_prob_scores_bound_the_softmax_and_match_it_when_the_rest_is_negligible():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 49152, generator=gen)
    logits[:2, 7] += 30.0   # rows 0, 1: one dominant token, the rest negligible
    top, probs = top_candidates(logits, 10, "prob")
    exact = torch.softmax(logits, dim=-1).gather(1, torch.from_numpy(top)).numpy()
    assert (probs >= exact * (1 - 1e-6)).all()
    np.testing.assert_allclose(probs[:2], exact[:2], rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("vocab,dtype", [(1000, torch.float32), (50257, torch.float32), (49152, torch.bfloat16),
                                         (49152, torch.float32)])
@pytest.mark.parametrize("k", [1, 2, 10])
def test_a_tie_at_the_top_goes_to_the_argmax_whatever_k_and_path(vocab, dtype, k):
    # torch.topk leaves the order of equal values open (k = 1 and k = 10 broke a tie differently):
    # every readout must take the first of equal maxima, as torch.argmax and greedy decoding do
    gen = torch.Generator().manual_seed(vocab + k)
    logits = torch.randn(6, vocab, generator=gen).to(dtype)
    ties = [(3, vocab - 5), (vocab - 2, 0), (11, 12), (700 % vocab, 40), (vocab // 2, vocab // 2 + 64)]
    for row, cols in enumerate(ties):
        logits[row, list(cols)] = 9.0
    logits[4, [5, 300, 900 % vocab, vocab - 1]] = 9.0   # a four-way tie: wider than k = 2
    top, _ = top_candidates(logits, k, None)
    assert top[:, 0].tolist() == logits.argmax(-1).tolist()
    assert all(len(set(row)) == k for row in top.tolist())   # still k distinct tokens
    if k > 1:  # the tie's other token stays among the candidates when the tie fits in k
        assert all(max(cols) in top[row].tolist() for row, cols in enumerate(ties[:4]))
        want = torch.topk(logits, k, dim=-1)
        untied = (want.values[:, 0] != want.values[:, 1]).nonzero().flatten().tolist()
        assert untied == [5] and top[5, 0] == want.indices[5, 0]  # no tie at the top: topk's best
        assert torch.equal(logits[5, torch.from_numpy(top[5])], want.values[5])  # and its values, in order


def test_ties_to_argmax_leaves_an_untied_top_alone():
    vals, idx = torch.tensor([[5.0, 4.0]]), torch.tensor([[3, 0]])
    assert ties_to_argmax(torch.tensor([[4.0, 0.0, 0.0, 5.0]]), vals, idx) is idx


def test_greedy_walk_follows_the_argmax():
    tree = new_tree(5)
    a = tree.add(0, 2, 0, 7)
    tree.add(0, 2, 1, 8)
    c = tree.add(a, 2, 0, 9)
    # argmax at root is 7 (node a), at a is 9 (node c), at c is 4 (no child): path root, a, c
    assert greedy_walk(tree, [7, 9, 0, 4]) == [0, a, c]
    assert greedy_walk(tree, [3, 9, 0, 4]) == [0]
    assert isinstance(tree, DraftTree)
    # the argmax is read at the node's own row, not its depth's: b is node 2 at depth 1
    tree = new_tree(5)
    tree.add(0, 2, 0, 7)
    b = tree.add(0, 2, 1, 8)
    c = tree.add(b, 2, 0, 9)
    assert greedy_walk(tree, [8, 5, 9, 0]) == [0, b, c]


def test_tree_visibility_is_ancestors_and_self():
    vis = tree_visibility([-1, 0, 1, 0])
    assert vis.astype(int).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 1]]


def test_tree_visibility_of_random_trees_follows_the_parent_links():
    rng = np.random.default_rng(4)
    for q in (1, 2, 17, 81):
        parent = [-1] + [int(rng.integers(0, i)) for i in range(1, q)]
        want = np.zeros((q, q), dtype=bool)
        for i in range(q):
            node = i
            while node >= 0:  # i sees itself and every ancestor
                want[i, node] = True
                node = parent[node]
        assert np.array_equal(tree_visibility(parent), want)


@pytest.mark.parametrize("parent, message", [
    ([], "empty parent list"),
    ([0, 0], r"parent\[0\] must be -1 \(the root\), got 0"),
    ([-1, -1], r"parent\[1\] must lie in \[0, 1\) \(parents come first\), got -1"),
    ([-1, 0, 2], r"parent\[2\] must lie in \[0, 2\) \(parents come first\), got 2"),
    ([-1, 0, 1, 7, 0], r"parent\[3\] must lie in \[0, 3\) \(parents come first\), got 7"),
    ([-1, 0, 0, 1, -5], r"parent\[4\] must lie in \[0, 4\) \(parents come first\), got -5"),
])
def test_tree_visibility_rejects_a_malformed_parent_list(parent, message):
    with pytest.raises(ValueError, match=message):
        tree_visibility(parent)


def test_mask_builder_rejects_a_malformed_tree_before_caching_it():
    masks = MaskBuilder(torch.float32, torch.device("cpu"))
    with pytest.raises(ValueError, match="parent"):
        masks.tree_mask([-1, 0, 3, 1], past=4)
    assert masks.tree_mask([-1, 0, 1], past=4).shape == (1, 1, 3, 7)
