"""The input check of the ``pdd_metrics`` functions that take a vector (log-probs of one text, scores of
documents): a 1-D, non-empty, finite float64 array (used by ``codec``, ``reference_decisions``, ``gradnorm``,
``methods``, ``multiple_testing`` and ``topk``).

Each caller words its errors for its own inputs (tokens of one text, scores of documents) by passing
message templates; the checks and their order are the same everywhere.
"""

from __future__ import annotations

import numpy as np


NOT_NUMBERS = "{name} must be an array of numbers; could not convert it ({error})"


def finite_vector(values, name: str, *, not_1d: str, empty: str, non_finite: str) -> np.ndarray:
    """``values`` as a 1-D float64 array, non-empty and finite, else a ValueError naming the fault.

    Args:
        values: array-like of numbers.
        name: the argument's name, for the messages.
        not_1d: message when the array is not 1-D; may use ``{name}`` and ``{shape}``.
        empty: message when it has no value; may use ``{name}`` and ``{shape}``.
        non_finite: message when a value is NaN or infinite; may use ``{name}``, ``{count}`` (how
            many), ``{size}`` (of how many), ``{first}`` (the first position) and ``{value}`` (its value).

    Returns:
        The values as a new or shared float64 array of shape (n,), n >= 1.

    Raises:
        ValueError: the values are not numbers, not 1-D, empty or not all finite (checked in that order).

    >>> finite_vector([1, 2], "x", not_1d="", empty="", non_finite="").dtype
    dtype('float64')
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(NOT_NUMBERS.format(name=name, error=exc)) from exc
    if arr.ndim != 1:
        raise ValueError(not_1d.format(name=name, shape=arr.shape))
    if arr.size == 0:
        raise ValueError(empty.format(name=name, shape=arr.shape))
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(non_finite.format(name=name, count=bad.size, size=arr.size, first=bad[0], value=arr[bad[0]]))
    return arr
