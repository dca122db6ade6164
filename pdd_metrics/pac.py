"""PAC, Polarized Augment Calibration (Ye et al., ACL 2024, "Data Contamination Calibration for
Black-box LLMs"): the score and the word-swap augmentation it calibrates with.

A text's polarized distance contrasts its most and its least likely tokens; PAC compares it with
the mean polarized distance of copies of the text whose words were swapped at random (the
authors' ``eda`` random swap, after Wei and Zou's EDA). Written from the authors' code
(yyy01/PAC, ``attack.py`` and ``src/eda.py``), whose defaults are used here.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import numpy as np

from .methods import _float_array, lowest_k_count


__all__ = ["PAC_FAR", "PAC_LOCAL", "pac_score", "polarized_distance", "swap_augmentations"]

#: Fraction of the lowest log-probs in the "local region" (``ratio_local`` of the authors' code).
PAC_LOCAL = 0.3
#: Fraction of the highest log-probs in the "far region" (``ratio_far`` of the authors' code).
PAC_FAR = 0.05


def polarized_distance(token_logprobs: np.ndarray, local: float = PAC_LOCAL, far: float = PAC_FAR) -> float:
    """Polarized distance (Ye et al. 2024): mean of the ``max(1, floor(n*far))`` highest log p_i minus
    mean of the ``max(1, floor(n*local))`` lowest.

    Args:
        token_logprobs: shape (n,), log p_i of one text.
        local: fraction in (0, 1] of lowest log-probs; default 0.3 (the authors' ``ratio_local``).
        far: fraction in (0, 1] of highest log-probs; default 0.05 (the authors' ``ratio_far``).

    >>> polarized_distance(np.array([-0.1, -2.0, -4.0, -1.0]), local=0.5, far=0.25)  # -0.1 - (-3)
    2.9
    """
    values = np.sort(_float_array(token_logprobs, "token_logprobs"))
    highest = values[::-1][: lowest_k_count(values.size, far)]
    lowest = values[: lowest_k_count(values.size, local)]
    return float(np.mean(highest) - np.mean(lowest))


def pac_score(
    token_logprobs: np.ndarray,
    augmented_token_logprobs: Sequence[np.ndarray],
    local: float = PAC_LOCAL,
    far: float = PAC_FAR,
) -> float:
    """PAC (Ye et al., ACL 2024): ``(1/N) sum_j PD(x~_j) - PD(x)``, PD the :func:`polarized_distance`.

    The authors compute ``PD(x) - mean_j PD(x~_j)`` and rank texts by its negation
    (``roc_auc_score(labels, -PAC)`` in ``attack.py``; fast-mia returns ``-score`` likewise): a
    member's polarized distance is lower than its augmented copies'. This is that negation, so
    higher = more likely a member. The text and each augmented copy are scored alike (after the start
    token, each with its own tokenization, so lengths may differ).

    Args:
        token_logprobs: shape (n,), log p_i of the tokens of the text.
        augmented_token_logprobs: one array per augmented copy x~_j, log p_i of its tokens; at least one.
        local, far: as :func:`polarized_distance` (the authors' 0.3 and 0.05).

    >>> # PD(x) = -0.5 - (-3) = 2.5; PD of the copies 1.5 and 3.0, mean 2.25
    >>> pac_score(np.array([-0.5, -3.0]), [np.array([-0.5, -2.0]), np.array([-1.0, -4.0])], local=0.5, far=0.5)
    -0.25
    """
    if isinstance(augmented_token_logprobs, np.ndarray) and augmented_token_logprobs.ndim == 1:
        raise ValueError(
            "augmented_token_logprobs must be a list with one array per augmented copy; got one 1-D array -- wrap "
            "a single copy's log-probs in a list"
        )
    if len(augmented_token_logprobs) == 0:
        raise ValueError("augmented_token_logprobs is empty: PAC needs at least one augmented copy of the text")
    text = polarized_distance(token_logprobs, local, far)
    copies = [
        polarized_distance(_float_array(values, f"augmented_token_logprobs[{j}]"), local, far)
        for j, values in enumerate(augmented_token_logprobs)
    ]
    return float(np.mean(copies)) - text


def swap_augmentations(text: str, count: int = 5, alpha: float = 0.3, seed: int = 0) -> list[str]:
    """``count`` copies of ``text``, each with ``max(1, floor(alpha * words))`` random swaps of two words.

    The authors' ``eda(sentence, alpha=0.3, num_aug=5)`` with random swap only (yyy01/PAC
    ``src/eda.py``): words are the parts of ``text.split(" ")`` (so other whitespace stays inside a
    word, and the copy is joined with single spaces exactly as the text was split); each swap draws
    a position, then draws a second one until it differs, giving up that swap at the 4th draw
    (``counter > 3``; a one-word text stays as it is). The draws come from ``random.Random`` seeded with SHA-256 of
    (``seed``, ``text``): the same text and seed give the same copies in any run, whatever the other
    texts or their order (the authors seed one global generator once, so a text's copies depend on
    the texts before it). Copies are returned in the order made (the authors shuffle them; PAC
    averages over them).

    >>> swap_augmentations("a b c d", count=2, alpha=0.3, seed=0)  # one swap each
    ['b a c d', 'a d c b']
    """
    if not isinstance(text, str) or not text:
        raise ValueError("text must be a non-empty str; an empty text cannot be scored -- remove it from the dataset")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a whole number >= 1 of augmented copies, e.g. 5; got {count!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
        raise ValueError(f"alpha must be a fraction in (0, 1], e.g. 0.3; got {alpha!r}")
    digest = hashlib.sha256(f"{seed}\n{text}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    words = text.split(" ")
    swaps = max(1, int(alpha * len(words)))
    copies = []
    for _ in range(count):
        swapped = list(words)
        for _ in range(swaps):
            first = rng.randint(0, len(swapped) - 1)
            for draw in range(1, 5):
                second = rng.randint(0, len(swapped) - 1)
                if draw == 4:
                    break  # the authors' swap_word returns at its 4th draw, whatever it drew
                if second != first:
                    swapped[first], swapped[second] = swapped[second], swapped[first]
                    break
        copies.append(" ".join(swapped))
    return copies
