"""ReCaLL and Con-ReCall: how a text's log-likelihood moves when known texts are put before it.

Both compare LL(x), the mean log-probability of the text's tokens scored after the start token,
with LL(x | P), the mean log-probability of the same tokens scored after the start token and a
prefix P of known texts. Log-likelihoods are negative, so a ratio LL(x | P) / LL(x) above 1 means
that the prefix made the text less likely.

Orientation: as in the authors' code (``pred["recall"] = ll_nonmember / ll``, ranked as is by
``roc_curve(labels, score)``) and on the ReCaLL project page ("a higher ReCaLL score indicates ...
a member"), **higher = more likely a member**; nothing is negated.
"""

from __future__ import annotations

import numpy as np

from .methods import _float_array, _same_length


__all__ = ["con_recall_score", "recall_score"]


def _check_prefixed(prefixed: np.ndarray, name: str, plain: np.ndarray) -> None:
    """The prefixed request scores the text's n tokens, or n + 1 where it also scores the text's
    first id (the authors' scripts do; the ``reference-code`` convention reproduces them)."""
    if prefixed.size != plain.size + 1:
        _same_length(prefixed, name, plain, "token_logprobs")


def _mean_ll(token_logprobs: np.ndarray, name: str) -> float:
    return float(np.mean(_float_array(token_logprobs, name)))


def _unconditional(token_logprobs: np.ndarray) -> float:
    unconditional = _mean_ll(token_logprobs, "token_logprobs")
    if unconditional == 0.0:
        raise ValueError(
            "the mean log-probability of the text without a prefix is exactly 0 (every token has "
            "probability 1), so the ratio LL(x | P) / LL(x) is undefined -- check that the "
            "log-probabilities are not all zero (e.g. a masked or padded output)"
        )
    return unconditional


def recall_score(prefixed_token_logprobs: np.ndarray, token_logprobs: np.ndarray) -> float:
    """ReCaLL (Xie et al., EMNLP 2024, Sec. 3): ``LL(x | P) / LL(x)``, P a prefix of known non-members.

    LL is the mean token log-probability (the authors' code takes ``-loss`` of a causal-LM forward
    pass, the mean over the scored tokens). A non-member prefix lowers the likelihood of a member
    more than that of a non-member, so LL(x | P) of a member is more negative and the ratio of two
    negative numbers is larger: higher = more likely a member, as the authors rank it.

    Args:
        prefixed_token_logprobs: shape (n,), log p_i of the text's n tokens after the prefix P; or
            (n + 1,) with the text's first id scored too, as the authors' scripts (after a prefix
            they score every id of ``tokenizer(text)``, without one all but the first).
        token_logprobs: shape (n,), log p_i of the text's tokens without the prefix.

    >>> recall_score(np.array([-3.0, -1.0]), np.array([-1.0, -1.0]))  # -2 / -1
    2.0
    >>> recall_score(np.array([-0.5, -1.5]), np.array([-2.0, -2.0]))  # -1 / -2
    0.5
    """
    prefixed = _float_array(prefixed_token_logprobs, "prefixed_token_logprobs")
    _check_prefixed(prefixed, "prefixed_token_logprobs", _float_array(token_logprobs, "token_logprobs"))
    return float(np.mean(prefixed)) / _unconditional(token_logprobs)


def con_recall_score(
    nonmember_prefixed_token_logprobs: np.ndarray,
    member_prefixed_token_logprobs: np.ndarray,
    token_logprobs: np.ndarray,
    gamma: float = 0.5,
) -> float:
    """Con-ReCall (Wang et al., COLING 2025, Sec. 3):
    ``(LL(x | P_non-member) - gamma * LL(x | P_member)) / LL(x)``.

    The contrast of a prefix of known non-members with a prefix of known members (contrastive
    decoding); ``gamma = 0`` is ReCaLL. The authors' code reports gamma in {0.1, 0.2, 0.3, 0.5, ...,
    1.0} for every run and has no single default; fast-mia's default is 0.5, taken here. Ranked as
    is by the authors' code: higher = more likely a member.

    Args:
        nonmember_prefixed_token_logprobs: shape (n,), log p_i of the text's tokens after P_non-member
            (or (n + 1,), as in :func:`recall_score`).
        member_prefixed_token_logprobs: the same after P_member.
        token_logprobs: shape (n,), the same without a prefix.
        gamma: the weight of the member prefix, a number >= 0.

    >>> con_recall_score(np.array([-3.0, -1.0]), np.array([-1.5, -0.5]), np.array([-1.0, -1.0]), gamma=0.5)
    1.5
    >>> con_recall_score(np.array([-3.0, -1.0]), np.array([-1.5, -0.5]), np.array([-1.0, -1.0]), gamma=0.0)
    2.0
    """
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating)) or not gamma >= 0:
        raise ValueError(f"gamma must be a number >= 0 (the weight of the member prefix, e.g. 0.5); got {gamma!r}")
    nonmember = _float_array(nonmember_prefixed_token_logprobs, "nonmember_prefixed_token_logprobs")
    member = _float_array(member_prefixed_token_logprobs, "member_prefixed_token_logprobs")
    plain = _float_array(token_logprobs, "token_logprobs")
    _check_prefixed(nonmember, "nonmember_prefixed_token_logprobs", plain)
    _check_prefixed(member, "member_prefixed_token_logprobs", plain)
    return (float(np.mean(nonmember)) - float(gamma) * float(np.mean(member))) / _unconditional(token_logprobs)
