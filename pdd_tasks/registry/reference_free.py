"""The reference-free methods, in table order: each scores a text from the target model's answer for
that text (its token log-probs, their distribution, the gradient of its loss) and fixed side
information (its zlib size, its lowercased copy, corpus token frequencies): Loss, Zlib, Lowercase,
Min-K%, Min-K%++, Gap-K%, DC-PDD and its two ablations, GradNorm. Each entry is registered, after its
settings and its reference implementation, when this module is imported.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

from pdd_metrics import (
    DCPDD_ABLATIONS,
    dcpdd_score,
    gap_k_score,
    loss_score,
    lowercase_score,
    min_k_plus_plus_score,
    min_k_score,
    zlib_score,
)
from pdd_metrics.gradnorm import GRADIENT_NORM_ORDERS, gradnorm_score
from pdd_tasks.registry.core import Method, TextInputs, _lowest_k, _mean, register
from pdd_tasks.registry.settings import Setting, flag, fraction, optional_path, positive_number, whole_number


# -- settings ------------------------------------------------------------------------------------


MIN_K = Setting("min_k", 0.2, fraction, "k of Min-K% Prob (Shi et al. 2024 use 0.2).")
MIN_K_PP = Setting("min_k_pp", 0.2, fraction, "k of Min-K%++ (Zhang et al. 2025 use 0.2).")
GAP_K = Setting("gap_k", 0.2, fraction, "k of Gap-K%, the fraction of lowest windows averaged (the authors use 0.2).")
GAP_K_WINDOW = Setting(
    "gap_k_window",
    3,
    whole_number,
    "window of Gap-K%'s moving average, in tokens; 1 = none (the authors' scripts: 3, and 6 for LLaMA models).",
    hint="(e.g. 3)",
)
DCPDD_A = Setting(
    "dcpdd_a",
    0.01,
    positive_number,
    "the cap a of DC-PDD Eq. 7 (the paper recommends 0.01; 10 in its BookMIA table).",
    hint="(paper: 0.01 or 10)",
)
FREQ_TABLE = Setting(
    "freq_table",
    None,
    optional_path,
    "path of a DC-PDD reference frequency table; default: the table installed for the model's "
    "tokenizer (`lm-eval-pdd install-table`), else the table shipped for the default model.",
)
DCPDD_ABLATION_SETTING = Setting(
    "dcpdd_ablations", False, flag, "also report DC-PDD's ablations CLD and +LUP (paper Sec. 5).", switch=True
)
LOWERCASE = Setting(
    "lowercase",
    True,
    flag,
    "score the lowercased text too (one more forward pass per text) for Lowercase.",
    switch=True,
)


# -- GradNorm (the HF backend's backward pass) --

#: The values of ``gradnorm_p``: the norm of each parameter tensor's gradient (MIMIR accepts these three).
GRADNORM_PS = (1, 2, "inf")


def gradnorm_p(name: str, value: Any) -> int | str:
    """One of :data:`GRADNORM_PS` (YAML's ``.inf`` is read as "inf")."""
    if isinstance(value, float) and value in (1.0, 2.0, math.inf):
        value = "inf" if value == math.inf else int(value)
    if isinstance(value, bool) or value not in GRADNORM_PS:
        raise ValueError(f'metadata {name}={value!r}: expected 1, 2 or "inf" (the norm of each weight\'s gradient).')
    return value


GRADNORM_SETTINGS = (
    Setting(
        "gradnorm",
        False,
        flag,
        "GradNorm too: the gradient of each text's loss with respect to the model's weights (one more forward "
        "and one backward pass per text; --model hf only).",
        switch=True,
    ),
    Setting(
        "gradnorm_p",
        "inf",
        gradnorm_p,
        "GradNorm: the norm of each parameter tensor's gradient, averaged over the tensors (mimir's default: inf).",
    ),
)


# -- the methods, in table order -----------------------------------------------------------------


def _loss_reference(inputs: TextInputs, settings) -> float:
    return _mean(inputs.logprobs)  # -log PPL = (1/n) sum_i log p_i


register(
    Method(
        name="loss",
        score=lambda inputs, settings: loss_score(inputs.logprobs),
        reference=_loss_reference,
        label=lambda settings: "Loss",
        citation="Yeom et al. 2018; Carlini et al. 2021: mean log p",
    )
)


def _zlib_reference(inputs: TextInputs, settings) -> float:
    return _mean(inputs.logprobs) / len(zlib.compress(inputs.text.encode("utf-8")))


register(
    Method(
        name="zlib",
        score=lambda inputs, settings: zlib_score(inputs.logprobs, inputs.text),
        reference=_zlib_reference,
        label=lambda settings: "Zlib",
        citation="Carlini et al. 2021, Sec. 6.1: mean log p / zlib bytes",
    )
)


def _lowercase_reference(inputs: TextInputs, settings) -> float:
    return _mean(inputs.extra_logprobs["lowercase"][0]) / _mean(inputs.logprobs)  # log PPL_lower / log PPL


register(
    Method(
        name="lowercase",
        score=lambda inputs, settings: lowercase_score(inputs.logprobs, inputs.extra_logprobs["lowercase"][0]),
        reference=_lowercase_reference,
        label=lambda settings: "Lowercase",
        citation="Carlini et al. 2021, Sec. 6.1: log PPL(lower(x)) / log PPL(x)",
        settings=(LOWERCASE,),
        extra_requests=lambda text, settings, prepared: [("", text.lower())],
        requests_per_text=lambda settings: 1,
        enabled=lambda settings: settings.lowercase,
    )
)


def _min_k_reference(inputs: TextInputs, settings) -> float:
    return _mean(_lowest_k(inputs.logprobs, settings.min_k))


register(
    Method(
        name="min_k",
        score=lambda inputs, settings: min_k_score(inputs.logprobs, k=settings.min_k),
        reference=_min_k_reference,
        label=lambda settings: f"Min-K% (k={settings.min_k:g})",
        citation="Shi et al., ICLR 2024, Sec. 3",
        settings=(MIN_K,),
    )
)


def _min_k_pp_reference(inputs: TextInputs, settings) -> float:
    z = []  # Eq. 3: z_i = (log p_i - mu_i) / sigma_i, sigma floored at 1e-6 (min_k_plus_plus_score)
    for logprob, mu, sigma in zip(inputs.logprobs, inputs.mu, inputs.sigma, strict=True):
        z.append((float(logprob) - float(mu)) / max(float(sigma), 1e-6))
    return _mean(_lowest_k(z, settings.min_k_pp))  # Eq. 4


register(
    Method(
        name="min_k_pp",
        score=lambda inputs, settings: min_k_plus_plus_score(
            inputs.logprobs, inputs.mu, inputs.sigma, k=settings.min_k_pp
        ),
        reference=_min_k_pp_reference,
        label=lambda settings: f"Min-K%++ (k={settings.min_k_pp:g})",
        citation="Zhang et al., ICLR 2025, Eq. 3-4",
        settings=(MIN_K_PP,),
    )
)


def _gap_k_reference(inputs: TextInputs, settings) -> float:
    gaps = []  # g_i = (log p_i - max_v log p_i(v)) / sigma_i, sigma floored at 1e-4 (the scripts' variance clamp 1e-8)
    for logprob, top1, sigma in zip(inputs.logprobs, inputs.top1, inputs.sigma, strict=True):
        gaps.append((float(logprob) - float(top1)) / max(float(sigma), 1e-4))
    w = settings.gap_k_window  # moving averages of w consecutive g_i; a text shorter than w keeps its g_i
    windows = gaps if len(gaps) < w else [_mean(gaps[j : j + w]) for j in range(len(gaps) - w + 1)]
    return _mean(_lowest_k(windows, settings.gap_k))


register(
    Method(
        name="gap_k",
        score=lambda inputs, settings: gap_k_score(
            inputs.logprobs, inputs.top1, inputs.sigma, k=settings.gap_k, window=settings.gap_k_window
        ),
        reference=_gap_k_reference,
        label=lambda settings: f"Gap-K% (k={settings.gap_k:g}, w={settings.gap_k_window})",
        citation="Kwak and Kim, ACL 2026 (arXiv 2601.19936): top-1 gap / sigma, moving average, lowest k",
        settings=(GAP_K, GAP_K_WINDOW),
    )
)


def _dcpdd(ablation: str | None):
    def score(inputs: TextInputs, settings) -> float:
        options = {"a": settings.dcpdd_a, **(DCPDD_ABLATIONS[ablation] if ablation else {})}
        return dcpdd_score(inputs.logprobs, inputs.token_ids, inputs.log_reference_freq, **options)

    return score


def _dcpdd_reference(capped: bool, first_occurrences: bool):
    """DC-PDD Eq. 6-8 as a loop: alpha_i = -p_i log f(x_i), capped at a (Eq. 7), averaged over the
    first occurrence of each token id (Eq. 8) or over every token (the ablations)."""

    def reference(inputs: TextInputs, settings) -> float:
        seen, alphas = set(), []
        for logprob, token in zip(inputs.logprobs, inputs.token_ids, strict=True):
            if first_occurrences and int(token) in seen:
                continue
            seen.add(int(token))
            alpha = -math.exp(float(logprob)) * float(inputs.log_reference_freq[int(token)])
            alphas.append(min(alpha, settings.dcpdd_a) if capped else alpha)
        return _mean(alphas)

    return reference


register(
    Method(
        name="dcpdd",
        score=_dcpdd(None),
        reference=_dcpdd_reference(capped=True, first_occurrences=True),
        label=lambda settings: f"DC-PDD (a={settings.dcpdd_a:g})",
        citation="Zhang et al., EMNLP 2024, Eq. 3-8",
        settings=(DCPDD_A, FREQ_TABLE),
    )
)
register(
    Method(
        name="dcpdd_cld",
        score=_dcpdd("cld"),
        reference=_dcpdd_reference(capped=False, first_occurrences=False),
        label=lambda settings: "DC-PDD ablation CLD",
        citation="Zhang et al., EMNLP 2024, Sec. 5 (no cap, every token)",
        settings=(FREQ_TABLE, DCPDD_ABLATION_SETTING),
        enabled=lambda settings: settings.dcpdd_ablations,
    )
)
register(
    Method(
        name="dcpdd_lup",
        score=_dcpdd("lup"),
        reference=_dcpdd_reference(capped=True, first_occurrences=False),
        label=lambda settings: f"DC-PDD ablation +LUP (a={settings.dcpdd_a:g})",
        citation="Zhang et al., EMNLP 2024, Sec. 5 (cap a, every token)",
        settings=(DCPDD_A, FREQ_TABLE, DCPDD_ABLATION_SETTING),
        enabled=lambda settings: settings.dcpdd_ablations,
    )
)


# -- GradNorm (MIMIR, Duan et al. 2024): the gradient of the text's loss, from the HF backend --


def _gradnorm_reference(inputs: TextInputs, settings) -> float:
    row = {1: 0, 2: 1, "inf": 2}[settings.gradnorm_p]  # the backend's rows: p = 1, 2, inf
    return -_mean(inputs.grad_norms[row])  # -(1/T) sum_t ||grad_t L(x)||_p, as mimir's attack returns


register(
    Method(
        name="gradnorm",
        score=lambda inputs, settings: gradnorm_score(
            inputs.logprobs, inputs.grad_norms[GRADIENT_NORM_ORDERS.index(float(settings.gradnorm_p))]
        ),
        reference=_gradnorm_reference,
        label=lambda settings: f"GradNorm (p={settings.gradnorm_p})",
        citation="Duan et al., COLM 2024 (MIMIR, attacks/gradnorm.py): -mean over weight tensors of ||grad L(x)||_p",
        settings=GRADNORM_SETTINGS,
        enabled=lambda settings: settings.gradnorm,
        gradients=True,
    )
)
