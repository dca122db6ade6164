"""SaMIA (Kaneko et al. 2024, "Sampling-based Pseudo-Likelihood for Membership Inference Attacks",
arXiv 2404.11262; code: github.com/nlp-titech/samia): a text's score from generations alone.

The text is split into words; the model continues the first ``prefix_ratio`` of them
(:func:`samia_split`) several times by sampling, and each continuation (a *candidate*) is compared
with the rest of the text (the *reference*) by ROUGE-1 recall: the share of the reference's words
that the candidate also has, counted with multiplicity. The score is the mean over candidates
(:func:`samia_score`); SaMIA*zlib multiplies each candidate's recall by the zlib-compressed size of
the candidate, in bytes. Higher = more likely a member (a member's continuation repeats its text).

ROUGE-1 comes from Google's ``rouge-score`` package (a dependency of lm-eval), with a whitespace
tokenizer: the authors' ``eval_samia.py`` splits words on spaces and keeps case and punctuation, which
``rouge-score``'s default tokenizer (lowercase, ``[a-z0-9]`` only) would not.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence


class _Whitespace:
    """A ``rouge-score`` tokenizer: the words of a text between whitespace, case and punctuation kept."""

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return text.split()


def _scorer():
    from rouge_score import rouge_scorer  # imports nltk: loaded only when SaMIA scores

    return rouge_scorer.RougeScorer(["rouge1"], tokenizer=_Whitespace())


def samia_split(text: str, prefix_ratio: float = 0.5) -> tuple[str, str]:
    """``(prefix, reference)`` of ``text``: its first ``floor(n * prefix_ratio)`` whitespace-separated
    words and the rest, each joined by single spaces (the authors' ``sampling.py`` ``get_prefix``;
    their reference is the words after the same count). At least one word goes to each side.

    >>> samia_split("The cat sat on the mat", 0.5)
    ('The cat sat', 'on the mat')
    >>> samia_split("One two three", 0.1)  # floor(0.3) = 0 words: one word is kept as the prefix
    ('One', 'two three')

    Raises:
        ValueError: a text of fewer than two words (nothing to continue, or nothing to compare), or a
            ratio outside (0, 1).
    """
    if not 0 < prefix_ratio < 1:
        raise ValueError(f"prefix_ratio must be in (0, 1), e.g. 0.5; got {prefix_ratio!r}")
    words = text.split()
    if len(words) < 2:
        raise ValueError(
            f"SaMIA needs a text of at least two words (a prefix to continue and a remainder to compare); "
            f"got {len(words)}: {text[:60]!r}"
        )
    count = min(max(int(len(words) * prefix_ratio), 1), len(words) - 1)
    return " ".join(words[:count]), " ".join(words[count:])


def samia_score(reference: str, candidates: Sequence[str], zlib_weighted: bool = False) -> float:
    """SaMIA's sampling-based pseudo-likelihood (Kaneko et al. 2024; the authors' ``eval_samia.py``):
    ``(1/m) sum_j ROUGE-1 recall(candidate_j, reference)``, the recall being
    ``sum_w min(count_ref(w), count_cand(w)) / (words of the reference)`` over whitespace-separated
    words; with ``zlib_weighted`` (SaMIA*zlib) each term is multiplied by
    ``len(zlib.compress(candidate_j))``, the candidate's words joined by single spaces, UTF-8.

    Args:
        reference: the text's remainder after the prefix (:func:`samia_split`).
        candidates: the model's m continuations of the prefix.
        zlib_weighted: SaMIA*zlib.

    >>> samia_score("on the mat", ["on a mat today", "in the house"])  # (2/3 + 1/3) / 2
    0.5

    Raises:
        ValueError: no candidate, or an empty reference.
    """
    if isinstance(candidates, str) or len(candidates) == 0:
        raise ValueError("candidates: expected a list of at least one generated continuation")
    if not reference.split():
        raise ValueError("reference: got an empty text; SaMIA compares continuations with the text's remainder")
    scorer = _scorer()
    total = 0.0
    for candidate in candidates:
        recall = scorer.score(reference, candidate)["rouge1"].recall
        if zlib_weighted:
            recall *= len(zlib.compress(" ".join(candidate.split()).encode("utf-8")))
        total += recall
    return total / len(candidates)
