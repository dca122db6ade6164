"""pdd_metrics.reference: token counts and Laplace-smoothed log frequencies (DC-PDD Eq. 4-5)."""

from __future__ import annotations

import doctest
from collections import Counter

import numpy as np
import pytest

import pdd_metrics.reference as reference
from pdd_metrics.reference import count_token_ids, log_reference_frequencies


# ----------------------------------------------------------------------------- count_token_ids


def test_counts_hand_computed():
    docs = [[0, 2, 2], [1, 2], []]
    counts = count_token_ids(docs, vocab_size=4)
    assert counts.dtype == np.int64
    assert counts.shape == (4,)
    assert counts.tolist() == [1, 1, 3, 0]


def test_counts_cap_takes_first_tokens_of_each_doc():
    docs = [[3, 3, 1, 0, 0], [2, 1, 1]]
    # first 2 tokens of each document: [3, 3] and [2, 1]
    assert count_token_ids(docs, vocab_size=4, max_tokens_per_doc=2).tolist() == [0, 1, 1, 2]
    # a cap longer than every document changes nothing
    assert count_token_ids(docs, vocab_size=4, max_tokens_per_doc=99).tolist() == [2, 3, 1, 2]


def test_counts_default_cap_is_1024_and_none_counts_all():
    doc = [1] * 1000 + [2] * 100  # 1100 tokens: 1000 ones, then 24 of 100 twos within the cap
    assert reference.DEFAULT_MAX_TOKENS_PER_DOC == 1024
    assert count_token_ids([doc], vocab_size=3).tolist() == [0, 1000, 24]
    assert count_token_ids([doc], vocab_size=3, max_tokens_per_doc=None).tolist() == [0, 1000, 100]


def test_counts_match_an_independent_counter():
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 50, size=int(rng.integers(0, 40))).tolist() for _ in range(30)]
    expected = Counter(t for doc in docs for t in doc[:7])
    counts = count_token_ids(iter(docs), vocab_size=50, max_tokens_per_doc=7)  # a generator works
    assert counts.tolist() == [expected.get(v, 0) for v in range(50)]


def test_counts_accept_numpy_arrays_and_are_additive():
    docs = [np.array([1, 2, 3]), np.array([3, 3], dtype=np.int32), (0, 4)]
    whole = count_token_ids(docs, vocab_size=5)
    halves = count_token_ids(docs[:1], vocab_size=5) + count_token_ids(docs[1:], vocab_size=5)
    assert whole.tolist() == [1, 1, 1, 3, 1]
    np.testing.assert_array_equal(whole, halves)


def test_counts_empty_corpus_is_all_zero():
    assert count_token_ids([], vocab_size=3).tolist() == [0, 0, 0]


def test_counts_reject_an_id_beyond_the_vocabulary_naming_it():
    with pytest.raises(ValueError, match=r"token id 7 is out of range for vocab_size=4"):
        count_token_ids([[0, 1], [2, 7]], vocab_size=4)


def test_counts_reject_a_negative_id_naming_it():
    with pytest.raises(ValueError, match=r"token id -3 is negative"):
        count_token_ids([[0, -3]], vocab_size=4)


def test_counts_only_check_the_counted_prefix():
    # id 9 lies beyond the cap, so it is never counted and cannot be out of range
    assert count_token_ids([[1, 1, 9]], vocab_size=4, max_tokens_per_doc=2).tolist() == [0, 2, 0, 0]


@pytest.mark.parametrize("cap", [0, -1])
def test_counts_reject_a_non_positive_cap(cap):
    with pytest.raises(ValueError, match="max_tokens_per_doc"):
        count_token_ids([[0]], vocab_size=2, max_tokens_per_doc=cap)


def test_counts_reject_float_ids():
    with pytest.raises(TypeError, match="integers"):
        count_token_ids([[0.0, 1.0]], vocab_size=2)


@pytest.mark.parametrize("vocab_size", [0, -5])
def test_counts_reject_a_non_positive_vocab_size(vocab_size):
    with pytest.raises(ValueError, match="vocab_size"):
        count_token_ids([[0]], vocab_size=vocab_size)


# ------------------------------------------------------------------- log_reference_frequencies


def test_log_frequencies_hand_computed():
    # N' = 4, |V| = 4: f = (c + 1) / 8
    log_f = log_reference_frequencies(np.array([3, 0, 1, 0]), vocab_size=4)
    assert log_f.dtype == np.float64
    assert log_f.shape == (4,)
    np.testing.assert_allclose(log_f, np.log([4 / 8, 1 / 8, 2 / 8, 1 / 8]), rtol=0, atol=1e-15)


def test_log_frequencies_pad_to_the_model_output_size():
    # 3 tokenizer ids, 6 model logits (padded embedding): N' = 4, |V| = 6, f = (c + 1) / 10
    log_f = log_reference_frequencies(np.array([3, 0, 1]), vocab_size=6)
    assert log_f.shape == (6,)
    np.testing.assert_allclose(np.exp(log_f), [0.4, 0.1, 0.2, 0.1, 0.1, 0.1], rtol=0, atol=1e-15)


def test_log_frequencies_are_a_distribution():
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 1000, size=500)
    log_f = log_reference_frequencies(counts, vocab_size=512)
    assert np.exp(log_f).sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(log_f < 0)
    # monotone in the counts
    order = np.argsort(counts, kind="stable")
    assert np.all(np.diff(log_f[:500][order]) >= 0)


def test_log_frequencies_of_an_empty_table_are_uniform():
    log_f = log_reference_frequencies(np.zeros(4, dtype=np.int64), vocab_size=5)
    np.testing.assert_allclose(log_f, np.full(5, np.log(1 / 5)), rtol=0, atol=1e-15)


def test_log_frequencies_reject_a_vocabulary_smaller_than_the_table():
    with pytest.raises(ValueError, match=r"counts has 5 entries but vocab_size=4"):
        log_reference_frequencies(np.ones(5, dtype=np.int64), vocab_size=4)


def test_log_frequencies_reject_negative_counts():
    with pytest.raises(ValueError, match="non-negative"):
        log_reference_frequencies(np.array([1, -1]), vocab_size=2)


def test_log_frequencies_reject_2d_counts():
    with pytest.raises(ValueError, match="1-D"):
        log_reference_frequencies(np.ones((2, 2), dtype=np.int64), vocab_size=4)


def test_docstring_examples_pass():
    result = doctest.testmod(reference, verbose=False)
    assert result.attempted >= 3
    assert result.failed == 0
