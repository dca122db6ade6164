"""The Neighbor attack's score (Mattern et al., ACL Findings 2023, "Membership Inference Attacks
against Language Models via Neighbourhood Comparison", Sec. 3).

How the neighbours are made (masked-LM word replacement) is in :mod:`pdd_tasks.prepare.neighbors`; this
module only compares the text's log-probs with theirs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .methods import _float_array


__all__ = ["neighbor_score"]


def neighbor_score(token_logprobs: np.ndarray, neighbor_token_logprobs: Sequence[np.ndarray]) -> float:
    """Neighbour comparison (Mattern et al. 2023, Sec. 3.1): ``mean_i log p(x)_i - (1/n) sum_j mean_i log p(x~_j)_i``.

    The paper flags x as a member when ``L(x) - (1/n) sum_j L(x~_j) < gamma``, with L the mean
    token loss (negated mean log-prob) and x~_1..x~_n the neighbours of x. This is the negation of
    that difference, so that higher = more likely a member: a member is more likely under the model
    than texts that differ from it in a word, a non-member about as likely. The text and each
    neighbour are scored the same way (after the start token, each with its own tokenization, so
    lengths may differ).

    Args:
        token_logprobs: shape (n,), log p_i of the tokens of the text.
        neighbor_token_logprobs: one array per neighbour, log p_i of its tokens; at least one.

    >>> neighbor_score(np.array([-1.0, -3.0]), [np.array([-2.0, -3.0]), np.array([-4.0, -3.0, -3.5])])
    1.0
    """
    text = float(np.mean(_float_array(token_logprobs, "token_logprobs")))
    if isinstance(neighbor_token_logprobs, np.ndarray) and neighbor_token_logprobs.ndim == 1:
        raise ValueError(
            "neighbor_token_logprobs must be a list with one array per neighbour; got one 1-D array -- wrap a "
            "single neighbour's log-probs in a list"
        )
    if len(neighbor_token_logprobs) == 0:
        raise ValueError(
            "neighbor_token_logprobs is empty: the Neighbor score needs at least one neighbour of the text"
        )
    means = [
        float(np.mean(_float_array(values, f"neighbor_token_logprobs[{j}]")))
        for j, values in enumerate(neighbor_token_logprobs)
    ]
    return text - float(np.mean(means))
