"""The method registry: every detection method of the pdd tasks, registered once.

An entry (:class:`Method`) says what a method is called (its name is the prefix of its metrics:
``min_k`` gives ``min_k_auc``), how it scores one text from the backend's answer (a call of a pure
function of :mod:`pdd_metrics`), the same score computed plainly (its reference implementation,
which the tests compare with it), which task settings it reads (with their defaults, checks and the
paper's value), which extra texts it has scored, what it prepares once per run, when it is in
effect, and its table label, built from the settings in effect. :func:`register` adds an entry and
refuses a name registered twice. The task class (:mod:`pdd_tasks.tasks.base`), the report
(:mod:`pdd_tasks.tools.report`), the tests and the benchmarks read this module. Adding a method:
``docs/adding-a-method.md``.

This module imports neither lm-eval nor torch: the per-run hooks (:attr:`Method.prepare`) are named
by path and imported when a task runs them.

Every score is oriented higher = more likely a member.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import importlib
import inspect
import logging
import math
import re
import zlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from pdd_metrics import (
    DCPDD_ABLATIONS,
    dcpdd_score,
    gap_k_score,
    loss_score,
    lowercase_score,
    min_k_plus_plus_score,
    min_k_score,
    neighbor_score,
    small_ref_score,
    zlib_score,
)
from pdd_metrics.gradnorm import GRADIENT_NORM_ORDERS, gradnorm_score
from pdd_metrics.pac import PAC_FAR, PAC_LOCAL, pac_score, swap_augmentations
from pdd_metrics.recall import con_recall_score, recall_score
from pdd_metrics.samia import samia_score, samia_split
from pdd_tasks.errors import UserError


logger = logging.getLogger(__name__)


# -- settings ------------------------------------------------------------------------------------


class SettingError(UserError):
    """A task setting (a metadata key) with a wrong value, or a key that is no setting (a typo)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fraction(name: str, value: Any) -> float:
    """A fraction in (0, 1], e.g. the k of Min-K%."""
    if not _is_number(value) or not 0 < value <= 1:
        raise ValueError(f"metadata {name}={value!r}: expected a fraction in (0, 1], e.g. 0.2.")
    return float(value)


def positive_number(name: str, value: Any) -> float:
    """A number > 0."""
    if not _is_number(value) or not value > 0:
        raise ValueError(f"metadata {name}={value!r}: expected a positive number.")
    return float(value)


def whole_number(name: str, value: Any) -> int:
    """A whole number >= 1."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"metadata {name}={value!r}: expected a whole number >= 1.")
    return value


def whole_number_or_zero(name: str, value: Any) -> int:
    """A whole number >= 0."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"metadata {name}={value!r}: expected a whole number >= 0.")
    return value


def flag(name: str, value: Any) -> bool:
    """true or false."""
    if not isinstance(value, bool):
        raise ValueError(f"metadata {name}={value!r}: expected true or false.")
    return value


#: The values of the ``convention`` setting.
CONVENTIONS = ("paper", "reference-code")


def convention(name: str, value: Any) -> str:
    """One of :data:`CONVENTIONS`: which tokens of a text are scored (docs/methods.md, "Start token")."""
    if value not in CONVENTIONS:
        raise ValueError(
            f'metadata {name}={value!r}: expected one of {", ".join(map(repr, CONVENTIONS))}: "paper" scores every '
            f'token of the text after the model\'s start token; "reference-code" scores tokenizer.encode(text) '
            f"without its first token, as the Min-K%++ and DC-PDD scripts do."
        )
    return value


def optional_string(expected: str) -> Callable[[str, Any], str | None]:
    """A check of a setting that names something (a file, a model) or is null / "" for none;
    ``expected`` says what, for the message (e.g. "a file path (a string)")."""

    def check(name: str, value: Any) -> str | None:
        if value in (None, ""):
            return None
        if not isinstance(value, str):
            raise ValueError(f"metadata {name}={value!r}: expected {expected}.")
        return value

    check.__doc__ = f'{expected[0].upper()}{expected[1:]}, or null / "" for none.'
    return check


#: A file path, or null / "" for the default.
optional_path = optional_string("a file path (a string)")


@dataclass(frozen=True)
class Setting:
    """A task setting: a key of the task's metadata (YAML ``metadata:`` or ``--metadata``).

    Attributes:
        name: the metadata key.
        default: the value when the key is absent.
        check: ``check(name, value)`` returns the value to use or raises a ValueError that names
            the key, what was expected and an example.
        doc: what it does, with the paper's value where there is one.
        hint: appended to the check's message (e.g. the paper's value).
        switch: it turns its method on or off (``lowercase``, ``neighbor_model``): given while the
            method is off, it is no mistake (:func:`settings_of_methods_off`).
    """

    name: str
    default: Any
    check: Callable[[str, Any], Any]
    doc: str
    hint: str = ""
    switch: bool = False

    def read(self, metadata: dict) -> Any:
        if self.name not in metadata:
            return self.default
        try:
            return self.check(self.name, metadata[self.name])
        except ValueError as error:
            raise SettingError(f"{error} {self.hint}".strip()) from None


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
        raise ValueError(f"metadata {name}={value!r}: expected auto, cpu, cuda, cuda:<index> or mps.")
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


# -- EM-MIA: a dataset-level method (pdd_tasks.tasks.aggregations), not a Method of one text --

#: The metric prefix of EM-MIA (``em_mia_auc``, ...): its score of a text depends on every text of the
#: run, so it is computed by an aggregation after all texts are scored, not by a :class:`Method`.
EM_MIA = "em_mia"


def method_name(name: str, value: Any) -> str:
    """The name of a method of the registry that scores each text alone (e.g. "min_k_pp", "loss")."""
    if value not in METHODS:
        raise ValueError(f"metadata {name}={value!r}: expected the name of a method, one of {', '.join(METHODS)}.")
    return value


EM_MIA_SETTINGS = (
    Setting(
        EM_MIA,
        False,
        flag,
        "EM-MIA too: every text of the scored set is also scored after every other as its prefix (n^2 more "
        "forward passes for n texts: ReCaLL-all), then EM-MIA's label-free loop runs over the whole set.",
        switch=True,
    ),
    Setting(
        "em_mia_init",
        "min_k_pp",
        method_name,
        "EM-MIA: the method whose scores start the loop (the authors' README: -i Loss Min-K++_20; Min-K%++ "
        "with k = min_k_pp here); it must be in effect.",
        hint='(e.g. "loss")',
    ),
    Setting(
        "em_mia_max_texts",
        200,
        whole_number,
        "EM-MIA: the most texts a run may score with it (200 texts: 40,000 prefixed passes); a run with more is "
        "refused before scoring. Raise it for a GPU run of a whole benchmark (776 texts of pdd_wikimia_32: 602,176).",
        hint="(e.g. 776)",
    ),
)

#: Settings of the dataset-level methods, by metric prefix (the settings table names them as readers).
DATASET_METHOD_SETTINGS = {EM_MIA: EM_MIA_SETTINGS}


#: The default of ``max_requests``: room for every default method on the largest shipped benchmark with
#: Neighbor at 25 neighbours (pdd_wikimia: 1,650 texts x 27 = 44,550) and then some.
DEFAULT_MAX_REQUESTS = 100_000

#: Settings of the scoring path itself, not of one method.
GENERAL_SETTINGS = (
    Setting(
        "max_requests",
        DEFAULT_MAX_REQUESTS,
        whole_number,
        "the most requests a run of the task may send (texts x requests per text: the text, the lowercased copy, "
        "neighbours, augmentations, SaMIA's samples, ...); settings that ask for more are refused before any request "
        "is built, naming the methods that cost most. EM-MIA's n^2 prefixed passes have their own cap "
        "(em_mia_max_texts).",
        hint="(e.g. 200000)",
    ),
    Setting(
        "truncate",
        False,
        flag,
        "allow texts longer than the model's context window, keeping their beginning (without it, "
        "such a text is an error).",
    ),
    Setting(
        "topk_logprobs",
        20,
        whole_number,
        "how many top alternatives per token to ask for from backends that return only the top k "
        "(local-completions, vLLM; Min-K%++'s mu/sigma are then approximated from them).",
        hint="e.g. 20 (at most what the server allows: vLLM 20 by default, OpenAI 5).",
    ),
    Setting(
        "exact_mu_sigma",
        False,
        flag,
        "--model vllm only: ask for the full next-token distribution (prompt_logprobs=-1; needs "
        "max_logprobs=-1 in --model_args) so that Min-K%++'s mu/sigma are exact. With "
        "worker_extension_cls=pdd_tasks.lm_eval_patches.VllmWorkerExtension in --model_args too, vLLM's "
        "worker computes them (about the top-k mode's cost instead of about twice it).",
    ),
    Setting(
        "convention",
        "paper",
        convention,
        'which tokens of a text are scored: "paper" (default): every token of the text, after the model\'s '
        'start token (DC-PDD Eq. 2); "reference-code": tokenizer.encode(text) with the tokenizer\'s default '
        "special tokens, all but its first token, as the Min-K%++ and DC-PDD scripts score (for tokenizers "
        'without BOS the first text token is not scored). docs/methods.md, "Start token: the two conventions".',
        hint='(e.g. --metadata \'{"convention": "reference-code"}\')',
    ),
    Setting(
        "share_prefixes",
        True,
        flag,
        "answer a text whose tokens begin a longer text's (after the same start token) from the longer "
        "text's forward pass, and identical texts from one pass: WikiMIA's 64-, 128- and 256-word texts "
        "begin with the shorter splits' texts. A causal model's values at a position depend only on the "
        "tokens before it, so the scores are the same up to float rounding; texts with a context of "
        "their own (ReCaLL, EM-MIA), GradNorm's texts and truncated texts are always forwarded. false: "
        "one pass per text.",
    ),
    Setting(
        "keep_duplicates",
        False,
        flag,
        "score every copy of a text that the run's inputs hold more than once (after the task's cut to "
        "max_words). By default each distinct text is scored once, its first copy, since every metric, its "
        "standard error and every test count a text once per copy; either way a warning and the results JSON "
        '(metadata repeats) say how many and where. docs/mistakes.md, "Repeated texts".',
    ),
)


# -- what a method sees of one text --------------------------------------------------------------


@dataclass(frozen=True)
class TextInputs:
    """What the backend returned for one text, as arrays with one entry per scored token.

    Attributes:
        text: the scored text (under ``truncate: true``, the beginning the model scored).
        logprobs: log p(x_i | x_<i) of its tokens after the start token.
        token_ids: the ids of those tokens.
        mu, sigma: mean and standard deviation of log p over the full next-token distribution
            (Min-K%++ Eq. 3-4; exact or a top-k estimate, as the results JSON records).
        top1: max_v log p(v | x_<i), the most likely token's log-prob at each position (Gap-K%;
            exact on every backend).
        log_reference_freq: log f(v) per token id (DC-PDD Eq. 5), from the run's reference table.
        grad_norms: shape (3, T), the norms ``||grad_t||_p`` of the gradient of the text's mean loss
            with respect to each of the model's T parameter tensors, for p = 1, 2, inf (rows, in
            :data:`pdd_metrics.GRADIENT_NORM_ORDERS`); GradNorm's, None unless a method asked for
            gradients (:attr:`Method.gradients`; the HF backend only).
        extra_logprobs: method name -> log-probs of the continuation of each of its extra
            requests (:attr:`Method.extra_requests`), in the order it listed them.
        prepared: method name -> what the task prepared for it once per run
            (:attr:`Method.prepare`), e.g. ReCaLL's prefixes; absent for methods without ``prepare``.
        generations: method name -> the text the model generated for each of its generation
            requests (:attr:`Method.generations`), in the order it listed them.
    """

    text: str
    logprobs: np.ndarray
    token_ids: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    log_reference_freq: np.ndarray | None = None
    extra_logprobs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    prepared: dict[str, Any] = field(default_factory=dict)
    top1: np.ndarray | None = None
    generations: dict[str, list[str]] = field(default_factory=dict)
    grad_norms: np.ndarray | None = None


@dataclass(frozen=True)
class Method:
    """One detection method.

    Attributes:
        name: the metric prefix (``<name>_auc``); lowercase, no spaces, registered once.
        score: ``score(inputs, settings)`` -> the text's score, higher = more likely a member: a
            call of the method's pure function of :mod:`pdd_metrics`.
        reference: ``reference(inputs, settings)`` -> the same score computed plainly from the same
            inputs (a loop over the tokens, as the paper writes its equation), with no call of
            :mod:`pdd_metrics`; ``tests/test_registry.py`` compares ``score`` with it for every
            registered method on hand-made and random inputs.
        label: ``label(settings)`` -> the table label, from the settings in effect.
        citation: the paper and equation.
        settings: the settings it reads (each declared once; shared ones are module constants).
        extra_requests: ``extra_requests(text, settings, prepared)`` -> ``(context, continuation)``
            pairs to score, one request each on every backend: context ``""`` scores the
            continuation after the start token, as the text itself; a non-empty context is encoded
            after the start token and the continuation's tokens are those it has on its own (under
            ``convention: "reference-code"``, as the reference scripts encode them:
            :func:`pdd_tasks.backends.base.split_after_start_token`). Their
            log-probs reach ``score`` as ``inputs.extra_logprobs[name]``. ``prepared`` is what
            ``prepare`` returned (None without it).
        prepare: ``"module:function"`` of a hook ``function(task, settings)`` -> anything the method
            needs once per run (prefix texts, a neighbour generator, ...), called by the task after
            its data is loaded; the result reaches ``extra_requests`` and ``inputs.prepared[name]``.
            Named by its path, as lm-eval's registry names lazy entries, and imported only when a
            task runs the method (:func:`prepare_hook`): the hooks live in :mod:`pdd_tasks.prepare`,
            a layer above this module, and load models.
        enabled: ``enabled(settings)`` -> whether the method is in effect.
        generations: ``generations(text, settings, prepared)`` -> ``(context, gen_kwargs)`` pairs, each
            a ``generate_until`` request (lm-eval's generation keys: ``until``, ``max_gen_toks``,
            ``do_sample``, ``temperature``, ...; ``seed`` seeds that one request on every backend);
            the generated texts reach ``score`` as ``inputs.generations[name]``.
        gradients: it reads ``inputs.grad_norms``: the text's own request asks the backend for the
            gradient norms of its loss (a backward pass; the HF backend only, the others refuse).
        requests_per_text: ``requests_per_text(settings)`` -> at most how many requests it adds per
            text (its ``extra_requests`` and ``generations``), from the settings alone: the run's
            request count is checked against ``max_requests`` before any request is built
            (:func:`planned_requests`).
    """

    name: str
    score: Callable[[TextInputs, Any], float]
    reference: Callable[[TextInputs, Any], float]
    label: Callable[[Any], str]
    citation: str
    settings: tuple[Setting, ...] = ()
    extra_requests: Callable[[str, Any, Any], list[tuple[str, str]]] | None = None
    prepare: str | None = None
    enabled: Callable[[Any], bool] = lambda settings: True
    generations: Callable[[str, Any, Any], list[tuple[str, dict]]] | None = None
    gradients: bool = False
    requests_per_text: Callable[[Any], int] = lambda settings: 0


class DuplicateMethodError(ValueError):
    """A method name registered twice (a programming error, as in lm-eval's registry)."""


#: Every registered method by name, in registration order (= table order).
METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add ``method`` to :data:`METHODS`, after those registered before it (its place in tables).

    A name registered twice raises :class:`DuplicateMethodError`, as ``lm_eval.api.registry`` does
    for a model or metric name: its metrics (``<name>_auc``) would otherwise replace the other
    method's silently. Methods are registered here, at import: :data:`SETTINGS` and
    :class:`ScoringSettings` are built from them below.
    """
    if method.name in METHODS:
        raise DuplicateMethodError(
            f"method {method.name!r} is registered twice in pdd_tasks.registry (citations: "
            f"{METHODS[method.name].citation!r} and {method.citation!r}); a method name is the prefix of its "
            f"metrics ({method.name}_auc, ...) and must be unique: rename one of them."
        )
    METHODS[method.name] = method
    return method


def prepare_hook(path: str) -> Callable[[Any, Any], Any]:
    """The function a :attr:`Method.prepare` path ``"module:function"`` names, imported now."""
    module, _, name = path.partition(":")
    if not name:
        raise ValueError(f"prepare hook {path!r}: expected 'module:function'")
    return getattr(importlib.import_module(module), name)


# -- plain computations for the reference implementations ---------------------------------------


def _mean(values) -> float:
    """The arithmetic mean, summed in a loop."""
    total = 0.0
    for value in values:
        total += float(value)
    return total / len(values)


def _lowest_k(values, k: float) -> list[float]:
    """The ``max(1, floor(n k))`` smallest values, with k the decimal as written (29% of 100 is 29)."""
    count = max(1, math.floor(Fraction(str(k)) * len(values)))
    return sorted(float(value) for value in values)[:count]


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


#: Every method name, in table order.
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)


def _all_settings() -> tuple[Setting, ...]:
    declared: dict[str, Setting] = {}
    for setting in (
        [s for method in METHODS.values() for s in method.settings] + list(EM_MIA_SETTINGS) + list(GENERAL_SETTINGS)
    ):
        if declared.setdefault(setting.name, setting) is not setting:
            raise RuntimeError(f"setting {setting.name!r} is declared twice in the method registry")
    return tuple(declared.values())


SETTINGS: tuple[Setting, ...] = _all_settings()


def _from_metadata(cls, metadata: dict):
    """The settings in ``metadata`` (absent keys take their defaults), each checked; a warning names
    settings given for methods that are off (:func:`settings_of_methods_off`)."""
    settings = cls(**{setting.name: setting.read(metadata) for setting in SETTINGS})
    idle = settings_of_methods_off(metadata, settings)
    if idle:
        logger.warning(
            "metadata %s given, but only read by method(s) that are off with these settings: %s. "
            "Turn the method on (see its settings in docs/methods.md), or drop the key.",
            ", ".join(map(repr, idle)),
            "; ".join(
                f"{name} (its settings: {', '.join(s.name for s in readers)})"
                for name, readers in [(name, METHODS[name].settings) for name in METHODS]
                + list(DATASET_METHOD_SETTINGS.items())
                if not _in_effect(name, settings) and any(s.name in idle for s in readers)
            ),
        )
    return settings


def settings_of_methods_off(metadata: dict, settings) -> list[str]:
    """Keys of ``metadata`` that only methods that are off read (e.g. ``neighbor_count`` without
    ``neighbor_model``): given, and without effect."""
    read = {s.name for name in settings.methods for s in METHODS[name].settings}
    read |= {s.name for s in GENERAL_SETTINGS}
    read |= {s.name for name, readers in DATASET_METHOD_SETTINGS.items() if _in_effect(name, settings) for s in readers}
    every = [s for method in METHODS.values() for s in method.settings]
    every += [s for readers in DATASET_METHOD_SETTINGS.values() for s in readers]
    switches = {s.name for s in every if s.switch}
    return [key for key in metadata if key in {s.name for s in every} and key not in read and key not in switches]


def _in_effect(name: str, settings) -> bool:
    """Whether method ``name`` (a per-text or a dataset-level one, whose switch is its name) is in effect."""
    return name in settings.methods or bool(getattr(settings, name, False))


def _methods_in_effect(self) -> tuple[str, ...]:
    return tuple(name for name, method in METHODS.items() if method.enabled(self))


#: The values of every setting of :data:`SETTINGS` (frozen; attributes named as the settings).
ScoringSettings = dataclasses.make_dataclass(
    "ScoringSettings",
    [(s.name, Any, field(default=s.default)) for s in SETTINGS],
    frozen=True,
    namespace={
        "from_metadata": classmethod(_from_metadata),
        "methods": property(_methods_in_effect, doc="Names of the methods in effect, in table order."),
        "__doc__": "Method and scoring settings read from a task's metadata; see pdd_tasks.registry.SETTINGS.",
    },
)
ScoringSettings.__module__ = __name__


def _requests_of(kind: str, text: str, settings, prepared: dict[str, Any] | None) -> list[tuple[str, str, Any]]:
    """``(method name, context, second argument)`` of every request the methods in effect list in their
    attribute ``kind`` (``extra_requests`` or ``generations``), in request order."""
    prepared = prepared or {}
    return [
        (name, context, argument)
        for name in settings.methods
        if getattr(METHODS[name], kind) is not None
        for context, argument in getattr(METHODS[name], kind)(text, settings, prepared.get(name))
    ]


def extra_requests(text: str, settings, prepared: dict[str, Any] | None = None) -> list[tuple[str, str, str]]:
    """``(method name, context, continuation)`` of every extra request of the methods in effect, in
    request order. ``prepared``: method name -> what its ``prepare`` returned for this run."""
    return _requests_of("extra_requests", text, settings, prepared)


def generation_requests(text: str, settings, prepared: dict[str, Any] | None = None) -> list[tuple[str, str, dict]]:
    """``(method name, context, gen_kwargs)`` of every generation request of the methods in effect, in
    request order (after the loglikelihood requests of :func:`extra_requests`)."""
    return _requests_of("generations", text, settings, prepared)


def planned_requests(texts: int, settings) -> tuple[int, list[tuple[str, int]]]:
    """At most how many requests ``texts`` texts send under ``settings`` (EM-MIA's aside), and per
    method in effect with more requests than the text's own, how many it adds per text."""
    extra = [(name, METHODS[name].requests_per_text(settings)) for name in settings.methods]
    extra = [(name, count) for name, count in extra if count]
    return texts * (1 + sum(count for _, count in extra)), extra


def score_text(inputs: TextInputs, settings) -> dict[str, float]:
    """Every method's score of one text (higher = more likely a member), for the methods in effect."""
    return {name: METHODS[name].score(inputs, settings) for name in settings.methods}


def label(name: str, settings) -> str:
    """The table label of method ``name`` under ``settings`` (e.g. "Min-K% (k=0.1)"; EM-MIA's names its start)."""
    if name == EM_MIA:
        return f"EM-MIA (from {label(settings.em_mia_init, settings)})"
    return METHODS[name].label(settings)


#: The methods in effect with every setting at its default.
DEFAULT_METHODS: tuple[str, ...] = ScoringSettings().methods


# -- metadata keys -------------------------------------------------------------------------------

#: Keys that lm_eval (``version``, ``config_source``) and the pdd tasks (what was used, for the
#: results JSON) put in a task's metadata themselves.
RECORDED_KEYS = frozenset(
    {
        "version",
        "config_source",
        "_metadata",
        "token_scores",
        "freq_table_used",
        "recall_prefixes",
        "small_ref_used",
        "repeats",
    }
)

_MODEL_CLASSES = (
    ("lm_eval.models.huggingface", "HFLM"),
    ("lm_eval.models.vllm_causallms", "VLLM"),
    ("lm_eval.api.model", "TemplateLM"),
    ("lm_eval.models.api_models", "TemplateAPI"),
    ("lm_eval.models.openai_completions", "LocalCompletionsAPI"),
)


@functools.cache
def model_argument_names() -> frozenset[str]:
    """Names of the ``--model_args`` of the backends the pdd tasks support (hf, vllm,
    local-completions), read from their signatures: ``lm_eval`` merges ``--model_args`` into every
    task's metadata, so these keys are no typo."""
    import importlib

    names = {"pretrained", "tokenizer", "model", "dtype", "device", "trust_remote_code", "revision"}
    names |= {  # vLLM's (lm_eval.models.vllm_causallms imports vllm, which may not be installed here)
        "max_model_len",
        "gpu_memory_utilization",
        "tensor_parallel_size",
        "data_parallel_size",
        "quantization",
        "max_logprobs",
        "swap_space",
        "enforce_eager",
        "lora_local_path",
        "tokenizer_mode",
        "tokenizer_revision",
        "max_num_seqs",
        "kv_cache_dtype",
        "enable_prefix_caching",
    }
    for module_name, class_name in _MODEL_CLASSES:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except Exception:  # an optional backend (vllm) that is not installed
            continue
        names |= set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs"}
    return frozenset(names)


def check_metadata_keys(metadata: dict, known: Collection[str], task: str) -> None:
    """Refuse a metadata key that looks like a misspelt setting (``mink``, ``dcpdd_A``), naming the
    closest known key; warn about other keys that are neither settings nor model arguments.

    ``known``: the keys the task reads (its settings and data keys). Keys of
    :data:`RECORDED_KEYS` and :func:`model_argument_names` are always accepted.
    """
    known = set(known) | RECORDED_KEYS
    unknown = [key for key in metadata if key not in known and key not in model_argument_names()]
    for key in unknown:
        close = difflib.get_close_matches(str(key).lower(), sorted(known - RECORDED_KEYS), n=1, cutoff=0.75)
        if close:
            raise SettingError(
                f"{task}: metadata key {key!r} is not a setting of this task; did you mean {close[0]!r}? "
                f"Fix the key in --metadata (known keys: {', '.join(sorted(known - RECORDED_KEYS))})."
            )
    if unknown:
        logger.warning(
            "%s: metadata key(s) %s are neither settings of this task nor known model arguments: ignored by the "
            "task. (--model_args reach the task metadata too; if these are model arguments, this is expected.) "
            "Task settings: %s.",
            task,
            ", ".join(map(repr, unknown)),
            ", ".join(sorted(known - RECORDED_KEYS)),
        )


# -- aggregations that carry their standard error ------------------------------------------------


def with_stderr(stderr: Callable[[Any, int], float]) -> Callable[[Callable], Callable]:
    """Decorator: the aggregation carries ``stderr(items, bootstrap_iters)`` as its attribute
    ``stderr``, which patch ``stderr-for-metric`` of :mod:`pdd_tasks.lm_eval_patches` asks for (lm-eval
    0.4.13 computes standard errors only for its own aggregations). An aggregation without it gets
    lm-eval's answer (none)."""

    def attach(aggregate: Callable) -> Callable:
        aggregate.stderr = stderr
        return aggregate

    return attach
