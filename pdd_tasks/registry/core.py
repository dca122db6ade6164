"""The core of the method registry: :class:`Method` (one detection method), :data:`METHODS` (every
method by name, in registration order = table order: a :class:`pdd_tasks.registries.Registry`),
:func:`register` (which refuses a name registered twice), :class:`TextInputs` (what a method sees of
one text), :func:`prepare_hook`, the plain helpers of the reference implementations, and :func:`with_stderr` (an aggregation that carries its standard
error).

The entries are registered by the method families (:mod:`pdd_tasks.registry.reference_free`,
:mod:`pdd_tasks.registry.reference_based`), which :mod:`pdd_tasks.registry.scoring` imports in table
order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from pdd_tasks.registries import DuplicateNameError, Registry, load_path
from pdd_tasks.registry.settings import Setting


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
            :mod:`pdd_metrics`; :func:`~pdd_tasks.registry.checks.check_method` compares ``score``
            with it on hand-made and random inputs (run on every registered method by
            ``tests/methods/test_registry.py``).
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
            (:func:`~pdd_tasks.registry.scoring.planned_requests`).
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


class DuplicateMethodError(DuplicateNameError):
    """A method name registered twice (a programming error, as in lm-eval's registry)."""


#: Every registered method by name, in registration order (= table order).
METHODS: Registry[Method] = Registry(
    "method",
    duplicate_error=DuplicateMethodError,
    describe=lambda method: f"citation {method.citation!r}",
    unique_because="a method's name is the prefix of its metrics (<name>_auc, ...) and must be unique: rename one "
    "of them.",
)


def register(method: Method) -> Method:
    """Add ``method`` to :data:`METHODS` under its name, after those registered before it (its place in
    tables).

    A name registered twice raises :class:`DuplicateMethodError` (:class:`pdd_tasks.registries.Registry`'s
    rule, as ``lm_eval.api.registry`` does for a model or metric name): its metrics (``<name>_auc``)
    would otherwise replace the other method's silently. Methods are registered at import, by their
    family's module: :data:`~pdd_tasks.registry.scoring.SETTINGS` and
    :class:`~pdd_tasks.registry.scoring.ScoringSettings` are built from them once every family is
    imported (:mod:`pdd_tasks.registry.scoring`).
    """
    return METHODS.register(method.name, method)


def prepare_hook(path: str) -> Callable[[Any, Any], Any]:
    """The function a :attr:`Method.prepare` path ``"module:function"`` names, imported now."""
    if not path.partition(":")[2]:
        raise ValueError(f"prepare hook {path!r}: expected 'module:function'")
    return load_path(path)


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
