"""The reference-based methods, in table order: each compares the text's answer with a reference the
method obtains: neighbours of the text from a masked LM (Neighbor), known texts in front of it
(ReCaLL, Con-ReCall), word-swapped copies of it (PAC), continuations sampled from its first words
(SaMIA), another model's answer for the same text (Small-Ref). Most add requests per text or prepare
something once per run (:mod:`pdd_tasks.prepare`, named by path). Each entry is registered, after
its settings and its reference implementation, when this module is imported.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from typing import Any

import numpy as np

from pdd_metrics import neighbor_score, small_ref_score
from pdd_metrics.pac import PAC_FAR, PAC_LOCAL, pac_score, swap_augmentations
from pdd_metrics.recall import con_recall_score, recall_score
from pdd_metrics.samia import samia_score, samia_split
from pdd_tasks.errors import UserError
from pdd_tasks.registry.core import Method, TextInputs, _lowest_k, _mean, register
from pdd_tasks.registry.settings import (
    Setting,
    _is_number,
    flag,
    fraction,
    optional_path,
    optional_string,
    positive_number,
    whole_number,
    whole_number_or_zero,
)


# -- ReCaLL and Con-ReCall (pdd_tasks.prepare.recall_prefixes) --


RECALL_SHOTS = Setting(
    "recall_shots",
    0,
    whole_number_or_zero,
    "ReCaLL: how many known non-member texts make its prefix (Con-ReCall: also how many member texts); "
    "0 = ReCaLL off. The authors' code defaults to 12 and runs 7 in its README; fast-mia uses 10.",
    hint="(e.g. 7)",
    switch=True,
)
RECALL_PREFIX_FILE = Setting(
    "recall_prefix_file",
    None,
    optional_path,
    "ReCaLL/Con-ReCall: a file of known texts for the prefixes (field text; label 0 = non-member, "
    "1 = member; no label field: all non-members); default: documents held out of the benchmark itself.",
)
RECALL_SEED = Setting(
    "recall_seed", 0, whole_number_or_zero, "ReCaLL/Con-ReCall: the seed of the draw of held-out prefix documents."
)
CON_RECALL = Setting(
    "con_recall",
    False,
    flag,
    "Con-ReCall too: a prefix of recall_shots known members as well (one more forward pass per text).",
    switch=True,
)
CON_RECALL_GAMMA = Setting(
    "con_recall_gamma",
    0.5,
    positive_number,
    "gamma of Con-ReCall, the weight of the member prefix (the authors report 0.1 to 1.0; fast-mia 0.5).",
    hint="(e.g. 0.5)",
)


# -- PAC --

PAC_SETTINGS = (
    Setting(
        "pac",
        False,
        flag,
        "PAC too: pac_augmentations word-swapped copies of each text are scored (that many more forward passes "
        "per text).",
        switch=True,
    ),
    Setting(
        "pac_augmentations", 5, whole_number, "PAC: augmented copies per text (the authors' code: 5).", hint="(e.g. 5)"
    ),
    Setting(
        "pac_alpha",
        0.3,
        fraction,
        "PAC: each copy swaps two random words max(1, floor(alpha x words)) times (the authors' code: 0.3).",
    ),
    Setting("pac_seed", 0, whole_number_or_zero, "PAC: seed of the random word swaps (drawn per text, with the text)."),
)


# -- SaMIA (generations through generate_until) --


def _open_fraction(name: str, value: Any) -> float:
    """A fraction in (0, 1), e.g. the share of a text's words SaMIA gives the model as its prefix."""
    if not _is_number(value) or not 0 < value < 1:
        raise ValueError(f"metadata {name}={value!r}: expected a fraction in (0, 1), e.g. 0.5.")
    return float(value)


SAMIA_SETTINGS = (
    Setting(
        "samia",
        False,
        flag,
        "SaMIA too: samia_samples continuations of each text's first words are sampled (generate_until "
        "requests, samia_max_tokens tokens at most each) and compared with the rest of the text by ROUGE-1.",
        switch=True,
    ),
    Setting(
        "samia_samples",
        10,
        whole_number,
        "SaMIA: sampled continuations per text (the authors' README and scripts: 10; fast-mia: 5).",
        hint="(e.g. 10)",
    ),
    Setting(
        "samia_prefix_ratio",
        0.5,
        _open_fraction,
        "SaMIA: the share of a text's words given as the prefix; the rest is the reference (the authors: 0.5).",
    ),
    Setting(
        "samia_zlib",
        False,
        flag,
        "SaMIA*zlib: each ROUGE-1 recall times the zlib-compressed size of its continuation (the authors' --zlib, "
        "off by default; fast-mia: on).",
    ),
    Setting(
        "samia_max_tokens",
        1024,
        whole_number,
        "SaMIA: tokens generated per continuation at most, it stops earlier at the end-of-text token (fast-mia: "
        "1024; the authors' sampling.py: 1024 with the prefix).",
        hint="(e.g. 1024)",
    ),
    Setting(
        "samia_seed",
        0,
        whole_number_or_zero,
        "SaMIA: seed of the sampling; each continuation has its own seed, drawn from this one, the text and its "
        "index, on every backend.",
    ),
)


# -- Small-Ref (pdd_tasks.prepare.small_ref) --

#: The dtypes Small-Ref's reference model can be loaded in.
SMALL_REF_DTYPES = ("float32", "bfloat16", "float16")


def dtype_choice(name: str, value: Any) -> str:
    """One of :data:`SMALL_REF_DTYPES`."""
    if value not in SMALL_REF_DTYPES:
        raise ValueError(f"metadata {name}={value!r}: expected one of {', '.join(SMALL_REF_DTYPES)}.")
    return value


def device_name(name: str, value: Any) -> str:
    """``auto`` (CUDA if available, else CPU), ``cpu``, ``cuda``, ``cuda:1``, ``mps``, ..."""
    if not isinstance(value, str) or not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?|xpu(:\d+)?", value):
        raise ValueError(f"metadata {name}={value!r}: expected auto, cpu, cuda, cuda:<index>, mps or xpu[:<index>].")
    return value


def short_name(name: str | None) -> str:
    """The last part of a model name or path (``EleutherAI/pythia-70m`` -> ``pythia-70m``), for labels."""
    return str(name).rstrip("/").split("/")[-1] if name else "none"


SMALL_REF_SETTINGS = (
    Setting(
        "small_ref_model",
        None,
        optional_string("a model directory or hub id (a string)"),
        "Small-Ref's reference model: a causal LM's directory or hub id (in the local hub cache); Small-Ref "
        "is off without it. DC-PDD uses a smaller model of the target's family (Pythia-70M for Pythia-6.9B); "
        "for a fine-tuned target, its base model.",
        switch=True,
    ),
    Setting("small_ref_dtype", "float32", dtype_choice, "dtype of the reference model's weights."),
    Setting("small_ref_device", "auto", device_name, "device of the reference model (auto: CUDA if available)."),
    Setting("small_ref_batch_size", 8, whole_number, "texts per forward pass of the reference model."),
    Setting(
        "small_ref_cache",
        None,
        optional_path,
        "file of the reference model's per-text log-probs; default: one file per reference model under "
        "$LM_EVAL_PDD_HOME/small_ref (a file written for another model is refused).",
    ),
)

# -- Neighbor (pdd_tasks.prepare.neighbors) --


#: Largest number of words replaced per neighbour (the neighbour generator enumerates the sets of
#: ``neighbor_words`` replaced words, so the work grows as positions ** words).
NEIGHBOR_MAX_WORDS = 3


def _neighbor_words(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= NEIGHBOR_MAX_WORDS:
        raise ValueError(f"metadata {name}={value!r}: expected a whole number from 1 to {NEIGHBOR_MAX_WORDS}.")
    return value


NEIGHBOR_SETTINGS = (
    Setting(
        "neighbor_model",
        None,
        optional_string("a masked LM's hub id or local directory, e.g. roberta-base"),
        "the masked LM that makes the Neighbor attack's neighbours (hub id or local directory; the paper uses "
        "BERT, mimir RoBERTa too); naming one turns the Neighbor method on (neighbor_count + 1 forward passes "
        "of the target model per text).",
        switch=True,
    ),
    Setting(
        "neighbor_count",
        25,
        whole_number,
        "neighbours per text for the Neighbor attack (25, as mimir's and the Min-K%++ paper's comparison; "
        "Mattern et al. vary it up to 100, more is better and costlier).",
    ),
    Setting(
        "neighbor_words",
        1,
        _neighbor_words,
        "words replaced per neighbour for the Neighbor attack (the paper's neighbours replace one word).",
    ),
    Setting(
        "neighbor_seed", 0, whole_number_or_zero, "seed of the masked LM's embedding dropout for the Neighbor attack."
    ),
)


# -- Neighbor (Mattern et al. 2023): neighbours from a masked LM (pdd_tasks.prepare.neighbors) --


def _neighbor_label(settings) -> str:
    words = f", {settings.neighbor_words} words" if settings.neighbor_words != 1 else ""
    return f"Neighbor (n={settings.neighbor_count}{words}, {short_name(settings.neighbor_model)})"


def _neighbor_reference(inputs: TextInputs, settings) -> float:
    neighbours = [_mean(values) for values in inputs.extra_logprobs["neighbor"]]
    return _mean(inputs.logprobs) - _mean(neighbours)  # L(x~) - L(x), L the mean loss (Sec. 3.1)


register(
    Method(
        name="neighbor",
        score=lambda inputs, settings: neighbor_score(inputs.logprobs, inputs.extra_logprobs["neighbor"]),
        reference=_neighbor_reference,
        label=_neighbor_label,
        citation="Mattern et al., ACL Findings 2023, Sec. 3: mean log p(x) - mean over neighbours",
        settings=NEIGHBOR_SETTINGS,
        extra_requests=lambda text, settings, prepared: [("", n) for n in prepared.neighbors(text)],
        requests_per_text=lambda settings: settings.neighbor_count,
        prepare="pdd_tasks.prepare.neighbors:prepare",
        enabled=lambda settings: settings.neighbor_model is not None,
    )
)


# -- ReCaLL and Con-ReCall (pdd_tasks.prepare.recall_prefixes) --


def prefixed_pair(prefixed: np.ndarray, plain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log p after a prefix, log p without it) of the same tokens; with ``truncate: true`` a prefix
    can leave room for fewer of them, and both are then cut to those the prefixed request scored.
    Under ``convention: reference-code`` the prefixed request scores the text's first id too (one
    more value, first), as the authors' scripts: both are passed whole."""
    if prefixed.size == plain.size + 1:
        return prefixed, plain
    return prefixed, plain[: prefixed.size]


def _prefixed(inputs: TextInputs, method: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`prefixed_pair` of the method's first extra request and the text's own request."""
    return prefixed_pair(inputs.extra_logprobs[method][0], inputs.logprobs)


def _recall(inputs: TextInputs, settings) -> float:
    return recall_score(*_prefixed(inputs, "recall"))


def _con_recall(inputs: TextInputs, settings) -> float:
    nonmember, plain = _prefixed(inputs, "recall")  # Con-ReCall shares ReCaLL's non-member request
    member = inputs.extra_logprobs["con_recall"][0]
    n = min(nonmember.size, member.size)
    return con_recall_score(nonmember[:n], member[:n], plain[:n], gamma=settings.con_recall_gamma)


def _unprefixed_reference(inputs: TextInputs, prefixed_size: int) -> list[float]:
    """log p without the prefix of the tokens a prefixed request scored: all of them when it scored
    one more (the text's first id, ``reference-code``), else its first ``prefixed_size``."""
    values = [float(value) for value in inputs.logprobs]
    return values if prefixed_size == len(values) + 1 else values[:prefixed_size]


def _recall_reference(inputs: TextInputs, settings) -> float:
    prefixed = inputs.extra_logprobs["recall"][0]
    return _mean(prefixed) / _mean(_unprefixed_reference(inputs, len(prefixed)))  # LL(x | P) / LL(x)


def _con_recall_reference(inputs: TextInputs, settings) -> float:
    nonmember, member = inputs.extra_logprobs["recall"][0], inputs.extra_logprobs["con_recall"][0]
    plain = _unprefixed_reference(inputs, len(nonmember))
    n = min(len(nonmember), len(member))
    gamma = settings.con_recall_gamma
    return (_mean(nonmember[:n]) - gamma * _mean(member[:n])) / _mean(plain[:n])


_RECALL_PREFIXES = "pdd_tasks.prepare.recall_prefixes:prepare_prefixes"  # one call shared by both

register(
    Method(
        name="recall",
        score=_recall,
        reference=_recall_reference,
        label=lambda settings: f"ReCaLL ({settings.recall_shots} shots)",
        citation="Xie et al., EMNLP 2024, Sec. 3: LL(x | P) / LL(x)",
        settings=(RECALL_SHOTS, RECALL_PREFIX_FILE, RECALL_SEED),
        extra_requests=lambda text, settings, prefixes: [(prefixes.nonmember, text)],
        requests_per_text=lambda settings: 1,
        prepare=_RECALL_PREFIXES,
        enabled=lambda settings: settings.recall_shots > 0,
    )
)
register(
    Method(
        name="con_recall",
        score=_con_recall,
        reference=_con_recall_reference,
        label=lambda settings: f"Con-ReCall (gamma={settings.con_recall_gamma:g}, {settings.recall_shots} shots)",
        citation="Wang et al., COLING 2025, Sec. 3: (LL(x | P_nm) - gamma LL(x | P_m)) / LL(x)",
        settings=(RECALL_SHOTS, RECALL_PREFIX_FILE, RECALL_SEED, CON_RECALL, CON_RECALL_GAMMA),
        extra_requests=lambda text, settings, prefixes: [(prefixes.member, text)],
        requests_per_text=lambda settings: 1,
        prepare=_RECALL_PREFIXES,
        enabled=lambda settings: settings.con_recall,
    )
)


# -- PAC (Ye et al., ACL 2024): the text against word-swapped copies of it --


def _polarized_distance_reference(values) -> float:
    highest = [-value for value in _lowest_k([-float(value) for value in values], PAC_FAR)]
    return _mean(highest) - _mean(_lowest_k(values, PAC_LOCAL))  # far region - local region


def _pac_reference(inputs: TextInputs, settings) -> float:
    copies = [_polarized_distance_reference(values) for values in inputs.extra_logprobs["pac"]]
    return _mean(copies) - _polarized_distance_reference(inputs.logprobs)  # -(PD(x) - mean PD(x~)), as ranked


def _pac_augmentations(text: str, settings) -> list[tuple[str, str]]:
    copies = swap_augmentations(text, settings.pac_augmentations, settings.pac_alpha, settings.pac_seed)
    return [("", copy) for copy in copies]


register(
    Method(
        name="pac",
        score=lambda inputs, settings: pac_score(inputs.logprobs, inputs.extra_logprobs["pac"]),
        reference=_pac_reference,
        label=lambda settings: f"PAC (N={settings.pac_augmentations}, alpha={settings.pac_alpha:g})",
        citation="Ye et al., ACL 2024: mean PD(swapped copies) - PD(x), PD = mean top 5% - mean bottom 30% log p",
        settings=PAC_SETTINGS,
        extra_requests=lambda text, settings, prepared: _pac_augmentations(text, settings),
        requests_per_text=lambda settings: settings.pac_augmentations,
        enabled=lambda settings: settings.pac,
    )
)


# -- SaMIA (Kaneko et al. 2024): sampled continuations of the text's first half against its second --


class SamiaTextError(UserError):
    """A text SaMIA cannot split into a prefix and a remainder (fewer than two words)."""


def _samia_seed(seed: int, text: str, index: int) -> int:
    """The seed of continuation ``index`` of ``text``: the same on every run and backend, whatever the batch."""
    digest = hashlib.sha256(f"{seed}\x00{index}\x00{text}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _samia_generations(text: str, settings, prepared) -> list[tuple[str, dict]]:
    """``samia_samples`` seeded sampling requests continuing the text's prefix: temperature 1, top-k 50,
    top-p 1 (the authors' sampling.py and fast-mia), until the end-of-text token or samia_max_tokens."""
    try:
        prefix, _ = samia_split(text, settings.samia_prefix_ratio)
    except ValueError as error:
        raise SamiaTextError(f"{error}. Drop such texts from the data, or run without SaMIA.") from None
    sampling = {"until": [], "max_gen_toks": settings.samia_max_tokens, "do_sample": True, "temperature": 1.0}
    sampling |= {"top_k": 50, "top_p": 1.0}
    return [
        (prefix, sampling | {"seed": _samia_seed(settings.samia_seed, text, j)}) for j in range(settings.samia_samples)
    ]


def _samia(inputs: TextInputs, settings) -> float:
    _, reference = samia_split(inputs.text, settings.samia_prefix_ratio)
    return samia_score(reference, inputs.generations["samia"], zlib_weighted=settings.samia_zlib)


def _samia_reference(inputs: TextInputs, settings) -> float:
    words = inputs.text.split()  # the paper's x_ref: the words after the prefix, as eval_samia.py's get_suffix
    count = min(max(int(len(words) * settings.samia_prefix_ratio), 1), len(words) - 1)
    reference = words[count:]
    total = 0.0
    for candidate in inputs.generations["samia"]:
        words_of_candidate = candidate.split()
        matched = 0  # ROUGE-1 recall: words of the reference also in the candidate, with multiplicity
        for word in set(reference):
            matched += min(reference.count(word), words_of_candidate.count(word))
        recall = matched / len(reference)
        if settings.samia_zlib:  # SaMIA*zlib: times the candidate's zlib size (eval_samia.py --zlib)
            recall *= len(zlib.compress(" ".join(words_of_candidate).encode("utf-8")))
        total += recall
    return total / len(inputs.generations["samia"])  # SPL: the mean over the m candidates


register(
    Method(
        name="samia",
        score=_samia,
        reference=_samia_reference,
        label=lambda settings: (
            f"SaMIA{'*zlib' if settings.samia_zlib else ''} (m={settings.samia_samples}, "
            f"prefix {settings.samia_prefix_ratio:g})"
        ),
        citation="Kaneko et al. 2024 (arXiv 2404.11262): mean ROUGE-1 recall of sampled continuations",
        settings=SAMIA_SETTINGS,
        generations=_samia_generations,
        requests_per_text=lambda settings: settings.samia_samples,
        enabled=lambda settings: settings.samia,
    )
)


# -- Small-Ref (pdd_tasks.prepare.small_ref): a reference model's log-probs of the same text --


def _small_ref_reference(inputs: TextInputs, settings) -> float:
    return _mean(inputs.logprobs) - _mean(inputs.prepared["small_ref"].logprobs(inputs.text))


register(
    Method(
        name="small_ref",
        score=lambda inputs, settings: small_ref_score(
            inputs.logprobs, inputs.prepared["small_ref"].logprobs(inputs.text)
        ),
        reference=_small_ref_reference,
        label=lambda settings: f"Small-Ref ({short_name(settings.small_ref_model)})",
        citation="Carlini et al. 2021, Sec. 6.1; DC-PDD Appendix A.1: mean log p_target - mean log p_ref",
        settings=SMALL_REF_SETTINGS,
        prepare="pdd_tasks.prepare.small_ref:prepare",
        enabled=lambda settings: settings.small_ref_model is not None,
    )
)
