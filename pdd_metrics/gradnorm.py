"""GradNorm: the size of the gradient of a text's loss with respect to the model's weights.

A text the model was trained on sits nearer a minimum of the training loss, so the gradient of its
loss is smaller. MIMIR (Duan et al., COLM 2024, "Do Membership Inference Attacks Work on Large
Language Models?") runs it as the gradient-norm attack (``mimir/attacks/gradnorm.py``): the loss
``L(x) = -(1/n) sum_i log p(x_i | x_<i)``, one backward pass, the p-norm of the gradient of every
parameter tensor, their mean, negated. The backward pass needs the model's weights: the HF backend
computes the per-tensor norms (``pdd_tasks.backends.gradients``); this module scores them.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import finite_vector
from .methods import _float_array


__all__ = ["GRADIENT_NORM_ORDERS", "gradnorm_score"]

#: The norms a backend reports per parameter tensor, in this order: p = 1, 2 and infinity (the three
#: mimir's attack accepts; it uses infinity unless told otherwise).
GRADIENT_NORM_ORDERS = (1.0, 2.0, math.inf)


def gradnorm_score(token_logprobs: np.ndarray, tensor_grad_norms: np.ndarray) -> float:
    """GradNorm (MIMIR, Duan et al. 2024, ``mimir/attacks/gradnorm.py``): ``-(1/T) sum_t ||grad_t||_p``,
    with ``grad_t`` the gradient of the text's mean loss ``-(1/n) sum_i log p_i`` with respect to
    the t-th of the model's T parameter tensors (each tensor once, tied weights once).

    The attack's quantity is the mean norm, lower for members; it is negated (as mimir returns it),
    so higher = more likely a member.

    Args:
        token_logprobs: shape (n,), log p_i of the text's tokens: the loss the gradient is of. Checked
            (non-empty, finite) as every method checks them: a NaN loss has NaN gradients.
        tensor_grad_norms: shape (T,), ``||grad_t||_p`` of each parameter tensor that has a
            gradient, for one p (a row of what the backend reports, :data:`GRADIENT_NORM_ORDERS`).

    Returns:
        ``-mean_t ||grad_t||_p``.

    >>> gradnorm_score(np.array([-1.0, -2.0]), np.array([0.5, 1.5, 4.0]))  # -(0.5 + 1.5 + 4) / 3
    -2.0
    """
    _float_array(token_logprobs, "token_logprobs")
    norms = finite_vector(
        tensor_grad_norms,
        "tensor_grad_norms",
        not_1d="{name} must be a 1-D array with one norm per parameter tensor; got shape {shape}",
        empty="{name}: got no parameter tensor; the backend found no weight with a gradient",
        non_finite="{name} has {count} non-finite norm(s) of {size} (first at tensor {first}: {value}); the "
        "gradient overflowed -- score the model in float32",
    )
    if (norms < 0).any():
        raise ValueError(f"tensor_grad_norms must be norms (>= 0); got {norms.min()!r}")
    return -float(np.mean(norms))
