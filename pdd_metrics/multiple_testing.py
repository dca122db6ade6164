"""Multiple-testing corrections for p-values of several tests read together."""

from __future__ import annotations

import numpy as np

from ._checks import finite_vector


__all__ = ["holm_adjusted"]


def holm_adjusted(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979, Scand. J. Statist. 6(2), Sec. 3): with the m
    p-values sorted ascending, p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)). Rejecting every test
    whose adjusted p-value is <= alpha controls the family-wise error rate at alpha, under any
    dependence between the tests.

    Args:
        p_values: shape (m,), each in [0, 1].

    Returns:
        shape (m,), the adjusted p-values in the input's order.

    >>> holm_adjusted([0.125, 0.25, 0.0625]).tolist()  # sorted: 3 * 0.0625, 2 * 0.125, max(0.25, 1 * 0.25)
    [0.25, 0.25, 0.1875]
    """
    p = finite_vector(
        p_values,
        "p_values",
        not_1d="{name} must be 1-D, got shape {shape}",
        empty="{name} is empty",
        non_finite="{name} has {count} of {size} values that are NaN or infinite (first at {first}: {value})",
    )
    if ((p < 0) | (p > 1)).any():
        raise ValueError(f"p_values must lie in [0, 1], got {p.tolist()}")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted
