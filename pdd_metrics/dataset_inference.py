"""Dataset inference (Maini et al., NeurIPS 2024): was this *set* of texts in the training data?

Maini, Jia, Papernot and Dziedzic, "LLM Dataset Inference: Did you train on my dataset?",
NeurIPS 2024 (arXiv:2406.06443); reference code ``pratyushmaini/llm_dataset_inference``
(``linear_di.py``).

Per-text membership scores are weak and disagree from one distribution to the next; the paper
(Sec. 5) combines many of them. Given a suspect set A and a set B of known non-members *of the same
distribution*, each text is described by its vector of per-method scores (features), and:

1. both sets are split at random into a fitting half and a testing half (paper Sec. 5, stage 2-3);
2. on the fitting halves, a linear model learns to tell suspects from non-members (the reference
   code: one ``nn.Linear`` layer trained with the logistic loss);
3. the fitted model scores the testing halves, and a one-sided two-sample t-test asks whether the
   held-out suspects score higher than the held-out non-members (paper Sec. 5, stage 4; the
   reference code: ``scipy.stats.ttest_ind(..., alternative=...)``, equal variances).

Why it controls false positives: the model is fit on texts the test never sees, so if A and B come
from one distribution, the held-out scores of both come from one distribution and the t-test's
p-value is valid (approximately: a t-test, as in the paper). Why it can fail: where the reference
set differs from the suspects in anything but membership (period, source, length, style), the linear
model learns *that* difference and the p-value is small without any training on A. The paper's
own false-positive check is two random halves of one non-member set.

Differences from the reference code, on purpose:

- the outlier clipping (per feature, to the 2.5% and 97.5% quantiles: the reference's ``clip``
  mode) and the standardisation use statistics of the fitting halves only, so nothing about the
  testing halves enters the model (the reference code clips each full set separately and
  standardises both sets with the full suspect set's mean and std);
- scikit-learn's ``LogisticRegression`` (L2, C=1, lbfgs) instead of 1000 Adam steps of an
  unregularised linear layer: the same model family and loss, with a unique solution; the L2 term
  keeps it stable on the small sets of a CPU run.

Orientation: suspects are the positive class and H1 is "held-out suspects score higher".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import ttest_ind


__all__ = ["DatasetInferenceResult", "dataset_inference_test"]

#: Share of each set used to fit the linear model (the rest is tested).
DEFAULT_FIT_FRACTION = 0.5
#: Per side, the share of values clipped as outliers (the reference code's remove_frac=0.05).
CLIP_FRACTION = 0.05
#: Fewest texts per set and per split: a t-test needs at least 2 per group.
MIN_PER_SPLIT = 2


@dataclass(frozen=True)
class DatasetInferenceResult:
    """Outcome of :func:`dataset_inference_test`.

    Attributes:
        p_value: one-sided p-value of H1 "held-out suspects score higher than held-out references".
        t_statistic: the two-sample t statistic (suspects minus references).
        weights: shape (n_features,), the linear model's weight per (standardised) feature.
        n_fit, n_test: texts per set in the fitting and in the testing split (suspects, references).
    """

    p_value: float
    t_statistic: float
    weights: tuple[float, ...]
    n_fit: tuple[int, int]
    n_test: tuple[int, int]


def _features(name: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0:
        raise ValueError(f"{name}: expected an array of shape (n_texts, n_features), got {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: {int((~np.isfinite(array)).sum())} feature values are NaN or infinite")
    return array


def _split(n: int, fit_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(n)
    n_fit = int(round(n * fit_fraction))
    return order[:n_fit], order[n_fit:]


def dataset_inference_test(
    suspect_features,
    reference_features,
    seed: int = 0,
    fit_fraction: float = DEFAULT_FIT_FRACTION,
) -> DatasetInferenceResult:
    """Maini et al.'s dataset inference: fit a linear model on one split, t-test on the other.

    Args:
        suspect_features: shape (n_suspect, n_features), per-text scores of the suspect set, one
            column per method (any orientation: the linear model learns the signs).
        reference_features: shape (n_reference, n_features), the same for known non-members.
        seed: seeds the random split of each set into fitting and testing texts.
        fit_fraction: share of each set used for fitting (default 0.5).

    Returns:
        :class:`DatasetInferenceResult`.

    Raises:
        ValueError: mismatched feature columns, non-finite values, or too few texts (each set
            needs at least 2 texts in each split).

    >>> rng = np.random.default_rng(0)
    >>> members = rng.normal(0.8, 1.0, size=(200, 3))
    >>> nonmembers = rng.normal(0.0, 1.0, size=(200, 3))
    >>> dataset_inference_test(members, nonmembers).p_value < 1e-6
    True
    """
    from sklearn.linear_model import LogisticRegression

    suspect = _features("suspect_features", suspect_features)
    reference = _features("reference_features", reference_features)
    if suspect.shape[1] != reference.shape[1]:
        raise ValueError(
            f"suspect_features has {suspect.shape[1]} features and reference_features {reference.shape[1]}: "
            "both sets must be scored with the same methods"
        )
    if not 0 < fit_fraction < 1:
        raise ValueError(f"fit_fraction={fit_fraction!r}: expected a share in (0, 1), e.g. 0.5")
    rng = np.random.default_rng(seed)
    suspect_fit, suspect_test = _split(len(suspect), fit_fraction, rng)
    reference_fit, reference_test = _split(len(reference), fit_fraction, rng)
    smallest = min(map(len, (suspect_fit, suspect_test, reference_fit, reference_test)))
    if smallest < MIN_PER_SPLIT:
        raise ValueError(
            f"dataset inference needs at least {MIN_PER_SPLIT} texts of each set in each split; got "
            f"{len(suspect)} suspect and {len(reference)} reference texts (fit_fraction={fit_fraction}). "
            "Give more texts (the paper uses about 1000 per set)."
        )
    fit = np.concatenate([suspect[suspect_fit], reference[reference_fit]])
    labels = np.concatenate([np.ones(len(suspect_fit)), np.zeros(len(reference_fit))])
    low, high = np.quantile(fit, [CLIP_FRACTION / 2, 1 - CLIP_FRACTION / 2], axis=0)
    fit = np.clip(fit, low, high)
    mean, std = fit.mean(axis=0), fit.std(axis=0)
    std[std == 0] = 1.0  # a constant feature stays 0 and gets no weight

    def transform(values: np.ndarray) -> np.ndarray:
        return (np.clip(values, low, high) - mean) / std

    model = LogisticRegression(C=1.0, max_iter=1000).fit(transform(fit), labels)
    held_out_suspect = model.decision_function(transform(suspect[suspect_test]))
    held_out_reference = model.decision_function(transform(reference[reference_test]))
    result = ttest_ind(held_out_suspect, held_out_reference, alternative="greater")
    t_value, p_value = float(result.statistic), float(result.pvalue)
    if not np.isfinite(p_value):  # both held-out groups constant and equal: no evidence
        t_value, p_value = 0.0, 1.0
    return DatasetInferenceResult(
        p_value=p_value,
        t_statistic=t_value,
        weights=tuple(float(w) for w in model.coef_[0]),
        n_fit=(len(suspect_fit), len(reference_fit)),
        n_test=(len(suspect_test), len(reference_test)),
    )
