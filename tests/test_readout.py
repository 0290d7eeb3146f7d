"""readout.py: the numba top-k against torch.topk (the reference), ties, the "prob" path, threads."""
from __future__ import annotations

import doctest

import numba
import numpy as np
import pytest
import torch

from goose_runtime import readout
from goose_runtime.verify import _blocked, top_candidates


@pytest.mark.parametrize("q,vocab,k", [(1, 49152, 1), (1, 49152, 10), (2, 49152, 1), (9, 49152, 10), (81, 49152, 10), (3, 151936, 10),
                                       (5, 4096, 16), (300, 2560, 10)])
def test_topk_rows_equals_torch_topk(q, vocab, k):
    logits = torch.randn(q, vocab, generator=torch.Generator().manual_seed(q + vocab + k)) * 4
    want = torch.topk(logits, k, dim=-1)
    vals, idx, blocks = readout.topk_rows(logits, k)
    assert np.array_equal(idx, want.indices.numpy()) and np.array_equal(vals, want.values.numpy())
    for r in range(q):  # the top k lie in the chosen blocks
        assert set((idx[r] // readout.BLOCK).tolist()) <= set(blocks[r].tolist())


def test_blocks_are_the_k_largest_block_maxima_best_first():
    logits = torch.randn(4, 8192, generator=torch.Generator().manual_seed(3))
    _, _, blocks = readout.topk_rows(logits, 10)
    block_max = logits.view(4, -1, readout.BLOCK).amax(-1)
    assert np.array_equal(blocks, torch.topk(block_max, 10, dim=-1).indices.numpy())


def test_a_top_k_crowded_into_one_block_and_ties_go_to_the_smaller_column():
    logits = torch.zeros(2, 4096)
    logits[0, 1024:1034] = torch.arange(10, 0, -1, dtype=torch.float32)   # all ten in one block
    logits[1, [4000, 17, 900]] = 5.0                                        # a three-way tie at the top
    vals, idx, _ = readout.topk_rows(logits, 10)
    assert idx[0].tolist() == list(range(1024, 1034))
    assert idx[1, :3].tolist() == [17, 900, 4000] and vals[1, :3].tolist() == [5.0] * 3
    assert idx[1, 0] == int(torch.argmax(logits[1]))


def test_equal_values_in_blocks_of_different_rank_keep_column_order():
    # block 3 holds the row's max and a 5; block 0 holds an equal 5: the smaller column comes first,
    # although block 3 is the better block
    logits = torch.zeros(2, 4096)
    logits[:, 10], logits[:, 200], logits[:, 201] = 5.0, 9.0, 5.0
    assert readout.topk_rows(logits, 3)[1].tolist() == [[200, 10, 201]] * 2


def test_fits_only_contiguous_cpu_floats_with_enough_blocks():
    x = torch.randn(3, 4096)
    assert readout.fits(x, 10)
    assert readout.fits(x[:1], 10)                            # one row too (ar's step)
    assert readout.fits(x.bfloat16(), 10) and readout.fits(x.half(), 10)  # widened to fp32 exactly
    assert not readout.fits(x.double(), 10)                    # another dtype (narrowing is not exact)
    assert not readout.fits(x[:, :4000], 10)                   # not whole blocks (and a view)
    assert not readout.fits(torch.randn(3, 512), 10)           # fewer than 4 k blocks
    assert not readout.fits(x.t().contiguous().t(), 10)        # not contiguous


def test_the_numba_path_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(readout, "USE_NUMBA", False)
    assert not readout.fits(torch.randn(3, 4096), 10)


@pytest.mark.parametrize("score", [None, "logit", "prob"])
@pytest.mark.parametrize("rows", [1, 17, max(40, readout.PARALLEL_ROWS)])   # serial and pooled kernels
def test_top_candidates_equal_the_torch_path(score, rows):
    logits = torch.randn(rows, 49152, generator=torch.Generator().manual_seed(11)) * 3
    top, scores = top_candidates(logits, 10, score)
    vals, idx, _ = _blocked(logits, 10)
    assert np.array_equal(top, idx.numpy())
    if score is None:
        assert scores is None
    elif score == "logit":
        assert np.array_equal(scores, vals.numpy())
    else:  # the softmax over the k best blocks' columns (fp64 sums in the kernel: equal to fp32 rounding)
        _, _, blocks = readout.topk_rows(logits, 10)
        cand = torch.stack([torch.cat([logits[r, b * readout.BLOCK:(b + 1) * readout.BLOCK] for b in row])
                            for r, row in enumerate(blocks.tolist())])
        want = torch.exp(vals.double() - torch.logsumexp(cand.double(), dim=-1, keepdim=True)).float().numpy()
        np.testing.assert_allclose(scores, want, rtol=1e-6, atol=0)
        assert scores.dtype == np.float32 and np.all(np.diff(scores, axis=1) <= 0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [1, 9, max(40, readout.PARALLEL_ROWS)])   # serial and pooled kernels
def test_half_precision_logits_read_as_their_exact_fp32_widening(dtype, rows, monkeypatch):
    # bf16 logits tie at the top at 2-4% of positions (docs/bench-runtime.md); widening is exact, so the
    # top k is that of the same values in fp32, and column 0 is torch.argmax's token, ties included
    x = (torch.randn(rows, 49152, generator=torch.Generator().manual_seed(5)) * 3).to(dtype)
    x[0, 100] = x[0, 7000] = x[0].max() + 1
    for score in (None, "logit", "prob"):
        got, want = top_candidates(x, 10, score), top_candidates(x.float(), 10, score)
        assert np.array_equal(got[0], want[0]) and (score is None or np.array_equal(got[1], want[1]))
    assert np.array_equal(got[0][:, 0], x.argmax(-1).numpy()) and got[0][0, :2].tolist() == [100, 7000]
    monkeypatch.setattr(readout, "USE_NUMBA", False)  # the torch path on the half-precision tensor agrees
    assert np.array_equal(top_candidates(x, 10, None)[0][:, 0], got[0][:, 0])


def test_the_result_does_not_depend_on_the_thread_count(monkeypatch):
    logits = torch.randn(max(40, readout.PARALLEL_ROWS), 49152, generator=torch.Generator().manual_seed(2))
    before_torch, before_numba = torch.get_num_threads(), numba.get_num_threads()
    asked = []
    real_set = numba.set_num_threads
    monkeypatch.setattr(numba, "set_num_threads", lambda n: (asked.append(n), real_set(n))[1])
    try:
        torch.set_num_threads(1)
        one = readout.topk_rows(logits, 10)
        assert asked[0] == 1                                   # the pool ran on torch's one thread
        assert numba.get_num_threads() == before_numba         # and numba's own setting came back
        torch.set_num_threads(max(2, before_torch))
        many = readout.topk_rows(logits, 10)
    finally:
        torch.set_num_threads(before_torch)
    assert all(np.array_equal(a, b) for a, b in zip(one, many))


def test_few_rows_run_serially_and_agree_with_the_pool(monkeypatch):
    logits = torch.randn(readout.PARALLEL_ROWS, 49152, generator=torch.Generator().manual_seed(4)) * 3
    pooled = readout.topk_rows(logits, 10)
    asked = []
    monkeypatch.setattr(numba, "set_num_threads", lambda n: asked.append(n))
    for q in (1, 9, readout.PARALLEL_ROWS - 1):   # below the threshold numba's pool is not touched
        serial = readout.topk_rows(logits[:q].contiguous(), 10)
        assert all(np.array_equal(a, b[:q]) for a, b in zip(serial, pooled))
    assert asked == []


def test_ties_and_minus_inf_follow_a_stable_sort_and_argmax():
    """Integer-valued logits (many ties, maxima shared by more than 4 k blocks), -inf rows: the
    result is the first k of a stable descending sort, and column 0 is torch.argmax."""
    gen = torch.Generator().manual_seed(9)
    for trial in range(40):
        q, v, k = 6, 64 * int(torch.randint(40, 80, (1,), generator=gen)), int(torch.randint(1, 11, (1,), generator=gen))
        logits = torch.randint(0, 4 if trial % 2 else 40, (q, v), generator=gen).float()
        logits[0] = float("-inf")                               # a row with no finite value
        logits[1, : v // 2] = float("-inf")
        vals, idx, _ = readout.topk_rows(logits, k)
        order = np.argsort(-logits.numpy(), axis=1, kind="stable")[:, :k]
        assert np.array_equal(idx[1:], order[1:]), trial
        assert np.array_equal(idx[:, 0], torch.argmax(logits, dim=1).numpy()), trial
        assert np.array_equal(vals, np.take_along_axis(logits.numpy(), idx, 1))


def test_doctest():
    assert doctest.testmod(readout).failed == 0


def test_one_row_with_a_tie_at_the_top_reads_like_argmax():
    logits = torch.randn(1, 49152, generator=torch.Generator().manual_seed(4))
    logits[0, [30000, 77, 12345]] = 50.0                     # an exact three-way tie at the top
    top, _ = top_candidates(logits, 1, None)
    assert top[0, 0] == int(torch.argmax(logits[0])) == 77


@pytest.mark.parametrize("q", [1, 5, max(40, readout.PARALLEL_ROWS)])   # serial and thread-pool kernels
def test_a_nan_logit_is_an_error_not_a_silent_choice(q):
    logits = torch.randn(q, 4096, generator=torch.Generator().manual_seed(q))
    logits[q - 1, 1234] = float("nan")
    with pytest.raises(readout.NaNLogitsError, match=f"row {q - 1}:"):
        readout.topk_rows(logits, 10)
    with pytest.raises(readout.NaNLogitsError, match=f"row {q - 1}:"):   # the torch path too (bf16)
        top_candidates(logits.to(torch.bfloat16), 10, "logit")
    logits[q - 1, 1234] = float("inf")   # +inf is a number: it is the argmax
    assert readout.topk_rows(logits, 10)[1][q - 1, 0] == 1234
    logits[q - 1] = float("nan")   # a whole row of NaN (fp16 overflow): fewer than k blocks to scan
    with pytest.raises(readout.NaNLogitsError, match=f"row {q - 1}:"):
        readout.topk_rows(logits, 10)


def test_a_nan_row_is_not_scanned():
    # an all-NaN row leaves fewer than k blocks in its list (the rest of the list is whatever the
    # buffer held); the kernel must not scan it -- here the buffer holds block 0, and a scan would
    # write the row's values
    x = np.full((1, 4096), np.nan, np.float32)
    block_max = np.full((1, 64), np.nan, np.float32)
    vals = np.full((1, 10), -7.0, np.float32)
    idx, blocks, nan_rows = np.zeros((1, 10), np.int64), np.zeros((1, 10), np.int64), np.zeros(1, np.uint8)
    x[0, :64] = 1.0   # block 0 holds numbers, so a scan would find them
    readout._topk_serial(x, block_max, 10, readout.BLOCK, vals, idx, blocks, nan_rows, np.empty((0, 10), np.float32))
    assert nan_rows[0] == 1 and (vals == -7.0).all()
