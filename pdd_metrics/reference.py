"""Reference-corpus token frequencies for DC-PDD.

DC-PDD (Zhang et al., EMNLP 2024, "Pretraining Data Detection for Large Language Models: A
Divergence-based Calibration Method", Section 3) calibrates each token's probability with the
token's frequency in a reference corpus D' tokenized by the **target model's** tokenizer:

    f(v) = (count(v) + 1) / (N' + |V|)        (Eq. 4-5, Laplace smoothing)

with N' the number of counted tokens and |V| the size of the model's output distribution.

Pure NumPy: token ids in, arrays out. Tokenization, files and table identity live in
``pdd_tasks.freq.tables``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


__all__ = ["DEFAULT_MAX_TOKENS_PER_DOC", "count_token_ids", "log_reference_frequencies"]

#: The DC-PDD reference code counts the first 1024 tokens of each reference-corpus document.
DEFAULT_MAX_TOKENS_PER_DOC = 1024
#: How many ids :func:`count_token_ids` collects before one ``np.bincount``.
_BINCOUNT_CHUNK = 1 << 20


def _check_vocab_size(vocab_size: int) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size}")
    return int(vocab_size)


def count_token_ids(
    token_id_lists: Iterable[Sequence[int]],
    vocab_size: int,
    max_tokens_per_doc: int | None = DEFAULT_MAX_TOKENS_PER_DOC,
) -> np.ndarray:
    """Count token ids over documents: the count(v) of DC-PDD Eq. 4.

    Every token among the first ``max_tokens_per_doc`` tokens of each document is counted (the rule
    of the DC-PDD reference code, default 1024); repeated tokens count each time. Counts are
    additive: tables counted on shards of a corpus sum to the table of the whole corpus.

    Parameters
    ----------
    token_id_lists : iterable of sequences of int
        One sequence of token ids per document (any iterable; consumed once). Empty documents are
        allowed and count nothing.
    vocab_size : int
        Length of the returned array; every id must satisfy ``0 <= id < vocab_size``.
    max_tokens_per_doc : int or None, default 1024
        Only the first this-many tokens of each document are counted; ``None`` counts all tokens.

    Returns
    -------
    counts : np.ndarray of shape (vocab_size,), dtype int64
        ``counts[v]`` = number of counted occurrences of id ``v``.

    Raises
    ------
    ValueError
        If an id is negative or ``>= vocab_size`` (the message names the id and the document index),
        or if ``vocab_size`` or ``max_tokens_per_doc`` is not positive.

    Examples
    --------
    >>> count_token_ids([[0, 2, 2], [1, 2]], vocab_size=4).tolist()
    [1, 1, 3, 0]
    >>> count_token_ids([[0, 2, 2], [1, 2]], vocab_size=4, max_tokens_per_doc=1).tolist()
    [1, 1, 0, 0]
    """
    vocab_size = _check_vocab_size(vocab_size)
    if max_tokens_per_doc is not None:
        if isinstance(max_tokens_per_doc, bool) or not isinstance(max_tokens_per_doc, (int, np.integer)):
            raise TypeError(f"max_tokens_per_doc must be an int or None, got {type(max_tokens_per_doc).__name__}")
        if max_tokens_per_doc <= 0:
            raise ValueError(
                f"max_tokens_per_doc must be a positive int or None (all tokens), got {max_tokens_per_doc}"
            )
    counts = np.zeros(vocab_size, dtype=np.int64)
    # One bincount per ~1M collected ids instead of one per document: a bincount costs O(|V|), so
    # per-document calls would dominate for short documents and large vocabularies.
    pending: list[np.ndarray] = []
    pending_size = 0
    for doc_index, ids in enumerate(token_id_lists):
        arr = np.asarray(ids)
        if arr.size == 0:
            continue
        if arr.ndim != 1:
            raise ValueError(
                f"document {doc_index}: expected a flat sequence of token ids, got an array of shape {arr.shape}"
            )
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"document {doc_index}: token ids must be integers, got dtype {arr.dtype}")
        if max_tokens_per_doc is not None:
            arr = arr[:max_tokens_per_doc]
        arr = arr.astype(np.int64, copy=False)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0:
            raise ValueError(f"document {doc_index}: token id {lo} is negative; ids must be in [0, {vocab_size})")
        if hi >= vocab_size:
            raise ValueError(
                f"document {doc_index}: token id {hi} is out of range for vocab_size={vocab_size} "
                f"(ids must be in [0, {vocab_size})); pass the tokenizer's full size, "
                f"len(tokenizer)"
            )
        pending.append(arr)
        pending_size += arr.size
        if pending_size >= _BINCOUNT_CHUNK:
            counts += np.bincount(np.concatenate(pending), minlength=vocab_size)
            pending, pending_size = [], 0
    if pending:
        counts += np.bincount(np.concatenate(pending), minlength=vocab_size)
    return counts


def log_reference_frequencies(counts: np.ndarray, vocab_size: int) -> np.ndarray:
    """Laplace-smoothed log reference frequencies log f(v) (DC-PDD Eq. 4-5).

    ``log f(v) = log((count(v) + 1) / (N' + |V|))`` with ``N' = counts.sum()`` and
    ``|V| = vocab_size``, the size of the model's **output distribution**. That can exceed the
    tokenizer's size (models pad their embedding matrix, e.g. Pythia: 50304 logits for 50277
    tokenizer entries); ``counts`` is then padded with zeros, so ids never produced by the tokenizer
    get the smoothed frequency ``1 / (N' + |V|)``. The result sums (in probability space) to 1.

    Parameters
    ----------
    counts : np.ndarray of shape (n,), non-negative integers
        Token counts, e.g. from :func:`count_token_ids`; ``n <= vocab_size``.
    vocab_size : int
        |V|, the number of entries of the model's next-token distribution.

    Returns
    -------
    log_f : np.ndarray of shape (vocab_size,), dtype float64
        Natural-log smoothed frequencies; all values are < 0.

    Raises
    ------
    ValueError
        If ``counts`` is not 1-D, holds negative values, or is longer than ``vocab_size``.

    Examples
    --------
    >>> import numpy as np
    >>> log_f = log_reference_frequencies(np.array([3, 0, 1]), vocab_size=4)
    >>> np.exp(log_f).round(4).tolist()   # (c + 1) / (4 + 4)
    [0.5, 0.125, 0.25, 0.125]
    """
    vocab_size = _check_vocab_size(vocab_size)
    counts = np.asarray(counts)
    if counts.ndim != 1:
        raise ValueError(f"counts must be 1-D, got shape {counts.shape}")
    if counts.size and not np.issubdtype(counts.dtype, np.integer):
        raise TypeError(f"counts must hold integers, got dtype {counts.dtype}")
    if counts.size > vocab_size:
        raise ValueError(
            f"counts has {counts.size} entries but vocab_size={vocab_size}: |V| must be at least "
            f"the number of counted ids (a table built for a larger tokenizer cannot serve this "
            f"model; build one with the model's own tokenizer)"
        )
    if counts.size and counts.min() < 0:
        raise ValueError(f"counts must be non-negative, got a minimum of {counts.min()}")
    padded = np.zeros(vocab_size, dtype=np.float64)
    padded[: counts.size] = counts
    total = float(counts.sum(dtype=np.int64)) if counts.size else 0.0
    return np.log(padded + 1.0) - np.log(total + vocab_size)
