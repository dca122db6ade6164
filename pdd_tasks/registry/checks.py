"""The battery every method entry must pass, exported as scikit-learn exports ``check_estimator``
(``sklearn/utils/estimator_checks.py``): :func:`check_method` runs every check of :data:`CHECKS` on one
entry of :data:`~pdd_tasks.registry.METHODS` (by name) or on a :class:`~pdd_tasks.registry.Method` not
registered, and ``tests/methods/test_registry.py`` runs it on every registered method (and on broken
toy entries, to show that each rule can fail).

Each check is a function of the entry that raises :class:`AssertionError` naming the method and the
rule it breaks. They need neither a model nor lm-eval: a method's inputs are hand-made and random
per-token log-probs (:func:`text_inputs`), its prepared object a stand-in (:class:`Prepared`); only
:func:`check_prepare_hook` imports the module its hook names, and :func:`check_docs` reads the
checkout's ``docs/``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np

import pdd_metrics
from pdd_tasks.registry.core import METHODS, Method, TextInputs, prepare_hook
from pdd_tasks.registry.em_mia import EM_MIA
from pdd_tasks.registry.scoring import SETTINGS, ScoringSettings
from pdd_tasks.registry.settings import RECORDED_KEYS, Setting
from pdd_tasks.results_schema import BLIND


#: The checkout's documentation (:func:`check_docs`).
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _fail(method: Method, what: str) -> None:
    raise AssertionError(f"method {method.name!r}: {what}")


# -- inputs of every method ----------------------------------------------------------------------


class Prepared:
    """What the ``prepare`` hooks return, reduced to what scoring reads: ReCaLL's and Con-ReCall's
    prefixes (``recall_prefixes.Prefixes``), Neighbor's neighbours (``NeighborGenerator.neighbors``)
    and Small-Ref's reference log-probs (``ReferenceScores.logprobs``). A method whose prepared
    object offers something else needs it added here; :func:`check_scores_match_reference` fails (an
    ``AttributeError``) until then."""

    nonmember = "A known non-member text."
    member = "A known member text."

    def __init__(self, reference_logprobs: np.ndarray) -> None:
        self.reference_logprobs = reference_logprobs

    def neighbors(self, text: str) -> list[str]:
        return [f"{text} ({index})" for index in range(3)]

    def logprobs(self, text: str) -> np.ndarray:
        return self.reference_logprobs


def text_inputs(
    text, logprobs, token_ids, mu, sigma, log_freq, settings, seed=0, prefixed="paper", methods=None
) -> TextInputs:
    """TextInputs of one text for every method of ``methods`` (default: the registered ones): the
    extra requests each asks for (random log-probs; a request after a context scores the text's n
    tokens, n + 1 under ``prefixed="reference-code"``, fewer under ``"truncated"``), random
    continuations (some empty) for its generation requests, one prepared object for all, random
    gradient norms, and a top-1 log-prob per position at or above both log p_i and mu_i (x_i is the
    top-1 at about half of the positions)."""
    methods = METHODS if methods is None else methods
    rng = np.random.default_rng(seed)
    logprobs = np.asarray(logprobs, dtype=float)
    prepared = Prepared(-rng.random(int(rng.integers(1, 9))) * 5)
    extra: dict[str, list[np.ndarray]] = {}
    for name, method in methods.items():
        if method.extra_requests is None:
            continue
        for context, _ in method.extra_requests(text, settings, prepared):
            if not context:
                size = int(rng.integers(1, 12))
            elif prefixed == "truncated":
                size = int(rng.integers(1, logprobs.size + 1))
            else:
                size = logprobs.size + (prefixed == "reference-code")
            extra.setdefault(name, []).append(-rng.random(size) * 4)
    words = text.split() + ["other", "words", ""]
    generations: dict[str, list[str]] = {}  # random continuations, some empty, of the text's own words and others
    for name, method in methods.items():
        if method.generations is None or len(text.split()) < 2:  # SaMIA refuses a one-word text's requests
            continue
        for _ in method.generations(text, settings, prepared):
            generations.setdefault(name, []).append(" ".join(rng.choice(words, size=int(rng.integers(0, 9)))))
    ceiling = np.maximum(logprobs, np.asarray(mu, dtype=float))
    top1 = np.minimum(0.0, ceiling + np.where(rng.random(logprobs.size) < 0.5, 0.0, rng.random(logprobs.size)))
    grad_norms = rng.random((3, int(rng.integers(1, 6)))) * 3  # p = 1, 2, inf per weight tensor (GradNorm)
    return TextInputs(
        text=text,
        logprobs=logprobs,
        token_ids=np.asarray(token_ids, dtype=np.int64),
        mu=np.asarray(mu, dtype=float),
        sigma=np.asarray(sigma, dtype=float),
        log_reference_freq=np.asarray(log_freq, dtype=float),
        extra_logprobs=extra,
        prepared={name: prepared for name in methods},
        top1=top1,
        generations=generations,
        grad_norms=grad_norms,
    )


def _switched_on(setting: Setting):
    """A value that turns a switch on: true for a flag, a name for a model, 1 for a count."""
    if setting.default is False:
        return True
    return "a-stand-in-model" if setting.default is None else 1


#: Every optional method on: each switch (``switch=True``) off by default set to a value that turns it on.
ALL_ON = {s.name: _switched_on(s) for s in SETTINGS if s.switch and s.default in (False, None, 0)}

#: Settings the checks run under: the defaults, values that move every method's, and every method on.
SETTINGS_CASES = [
    {},
    {"min_k": 0.5, "min_k_pp": 0.29, "dcpdd_a": 10, "con_recall": True, "recall_shots": 2, "con_recall_gamma": 0.1},
    {"min_k": 1.0, "min_k_pp": 0.05, "dcpdd_a": 0.3, "con_recall": True, "recall_shots": 2, "con_recall_gamma": 1.5},
    {"gap_k": 0.29, "gap_k_window": 1, "pac": True, "pac_augmentations": 2, "samia": True, "samia_samples": 3}
    | {"gradnorm": True, "gradnorm_p": 1},
    {"gap_k": 1.0, "gap_k_window": 6, "pac": True, "pac_augmentations": 7, "pac_alpha": 1.0}
    | {"samia": True, "samia_zlib": True, "samia_samples": 1, "samia_prefix_ratio": 0.7}
    | {"gradnorm": True, "gradnorm_p": 2.0},
    ALL_ON,
]

LOG_F = np.log(np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05, 0.05]))
#: Hand-made texts: (text, log p, token ids, mu, sigma).
HAND_MADE = {
    "one token": ("a", [-0.7], [4], [-1.0], [0.5]),
    "ties": (
        "Hello World, hello.",
        [-1.0, -1.0, -2.0, -2.0, -1.0, -0.25],
        [1, 2, 1, 2, 3, 1],
        [-1.5] * 6,
        [1.0, 1.0, 0.5, 0.5, 1.0, 2.0],
    ),
    "sigma 0 (floored)": ("Paris is", [-0.1, -2.0, -3.0], [0, 5, 0], [-0.1, -1.0, -2.0], [0.0, 0.3, 0.0]),
    "p near 1 (DC-PDD cap binds)": ("THE END", [-1e-3, -0.01, -5.0], [7, 6, 7], [-0.5, -0.5, -1.0], [0.2, 0.1, 1.0]),
}

#: Random texts per settings case in :func:`check_scores_match_reference`.
RANDOM_TEXTS = 20


def _methods_with(method: Method) -> Mapping[str, Method]:
    """The registered methods, ``method`` in place of any registered under its name (another method
    may read its requests: Con-ReCall reads ReCaLL's)."""
    return {**METHODS, method.name: method}


def hand_made_cases(settings, methods=None) -> Iterator[tuple[str, TextInputs]]:
    for index, (name, (text, lp, ids, mu, sigma)) in enumerate(HAND_MADE.items()):
        for prefixed in ("paper", "reference-code", "truncated"):
            inputs = text_inputs(text, lp, ids, mu, sigma, LOG_F, settings, index, prefixed, methods)
            yield f"{name}, {prefixed}", inputs


def random_cases(settings, count=RANDOM_TEXTS, methods=None) -> Iterator[tuple[str, TextInputs]]:
    words = "The quick Brown fox jumps over the lazy dog in Paris on a Tuesday".split()
    for seed in range(count):
        rng = np.random.default_rng(100 + seed)
        n = int(rng.integers(1, 40))
        text = " ".join(rng.choice(words, size=int(rng.integers(1, 12))))
        logprobs = -rng.exponential(2.0, n)
        if seed % 3 == 0:  # ties
            logprobs = -rng.integers(0, 4, n).astype(float) - 0.5
        vocabulary = int(rng.integers(2, 30))
        log_freq = np.log(rng.dirichlet(np.ones(vocabulary)))
        prefixed = ("paper", "reference-code", "truncated")[seed % 3]
        mu, sigma = logprobs - rng.random(n), rng.random(n) * 2
        inputs = text_inputs(
            text, logprobs, rng.integers(0, vocabulary, n), mu, sigma, log_freq, settings, seed, prefixed, methods
        )
        yield f"random {seed}", inputs


def _cannot_split(method: Method, inputs: TextInputs) -> bool:
    """A text the method's generation requests refuse (SaMIA: one word), so it has no generations."""
    return method.generations is not None and method.name not in inputs.generations


# -- the checks ----------------------------------------------------------------------------------


def check_names(method: Method) -> None:
    """Its name is a metric prefix (lowercase letters, digits and _) that no dataset-level method uses,
    and it has a citation."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", method.name):
        _fail(method, "its name must be lowercase letters, digits and _ (it is the prefix of its metrics: <name>_auc)")
    if method.name in (BLIND, EM_MIA):
        _fail(method, f"its name is a dataset-level method's metric prefix ({method.name}_auc would be written twice)")
    if not method.citation:
        _fail(method, "it needs a citation (the paper and equation)")


def check_settings(method: Method) -> None:
    """Each setting it reads is declared once (the one of :data:`~pdd_tasks.registry.SETTINGS` by that
    name, so :class:`~pdd_tasks.registry.ScoringSettings` has it), has a doc, a default that passes its
    own check, and a name the tasks do not record on their own (:data:`~pdd_tasks.registry.RECORDED_KEYS`)."""
    names = [setting.name for setting in method.settings]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        _fail(method, f"it declares settings {twice} twice")
    registered = {setting.name: setting for setting in SETTINGS}
    for setting in method.settings:
        if not setting.doc:
            _fail(method, f"setting {setting.name!r} needs a doc (what it does, the paper's value)")
        if setting.default is not None:
            try:
                passed = setting.check(setting.name, setting.default) == setting.default
            except ValueError as error:
                _fail(method, f"the default of setting {setting.name!r} does not pass its own check: {error}")
            if not passed:
                _fail(method, f"the default of setting {setting.name!r} is not what its own check returns for it")
        if setting.name in RECORDED_KEYS:
            _fail(method, f"setting {setting.name!r} is a key the tasks record in the metadata themselves")
        if setting.name not in registered:
            _fail(
                method,
                f"setting {setting.name!r} is not in registry.SETTINGS: ScoringSettings is built from the entries "
                "registered at import (register the entry in a family module that registry/scoring.py imports)",
            )
        if registered[setting.name] is not setting:
            _fail(
                method,
                f"setting {setting.name!r} is declared twice (another Setting of that name is the registry's): "
                "declare it once, a module constant where entries share it",
            )


def check_enabled(method: Method) -> None:
    """``enabled`` gives a bool under every settings case and is true under :data:`ALL_ON`; a method off
    by default declares the setting that turns it on as a switch (``switch=True``)."""
    for case in SETTINGS_CASES:
        enabled = method.enabled(ScoringSettings.from_metadata(case))
        if not isinstance(enabled, bool):
            _fail(method, f"enabled(settings) must be true or false, got {enabled!r} under {case}")
    if not method.enabled(ScoringSettings.from_metadata(ALL_ON)):
        _fail(method, "it is off with every switch on: mark the setting that turns it on with switch=True")
    if not method.enabled(ScoringSettings()) and not any(setting.switch for setting in method.settings):
        _fail(method, "it is off by default but declares no setting with switch=True that turns it on")


def check_label(method: Method) -> None:
    """Its label is one line of text under every settings case."""
    for case in SETTINGS_CASES:
        label = method.label(ScoringSettings.from_metadata(case))
        if not isinstance(label, str) or not label.strip() or "\n" in label:
            _fail(method, f"label(settings) must be one line of text, got {label!r} under {case}")


def _pair(request, second: type) -> bool:
    """Whether ``request`` is a ``(str, second)`` pair."""
    return (
        isinstance(request, tuple)
        and len(request) == 2
        and isinstance(request[0], str)
        and isinstance(request[1], second)
    )


def check_requests(method: Method) -> None:
    """Under every settings case that turns it on: its extra requests are ``(context, continuation)``
    pairs of strings and its generations ``(context, gen_kwargs)`` pairs, and ``requests_per_text``
    (a whole number, what ``max_requests`` is checked against before any request is built) counts them:
    exactly, or at least where a ``prepare`` hook's object decides how many (Neighbor's neighbours)."""
    text = "A text of several words, long enough for every method to ask for its requests."
    prepared = Prepared(np.zeros(3))
    cases = [ScoringSettings.from_metadata(case) for case in SETTINGS_CASES]
    if not any(method.enabled(settings) for settings in cases):
        _fail(method, "it is in effect under no settings case, so its requests cannot be checked")
    for case, settings in zip(SETTINGS_CASES, cases, strict=True):
        if not method.enabled(settings):
            continue
        extra = method.extra_requests(text, settings, prepared) if method.extra_requests else []
        generations = method.generations(text, settings, prepared) if method.generations else []
        if not all(_pair(request, str) and request[1] for request in extra):
            _fail(method, f"extra_requests must give (context, non-empty continuation) strings, got {extra!r}")
        if not all(_pair(request, dict) for request in generations):
            _fail(method, f"generations must give (context, gen_kwargs dict) pairs, got {generations!r}")
        declared, asked = method.requests_per_text(settings), len(extra) + len(generations)
        if not isinstance(declared, int) or isinstance(declared, bool) or declared < 0:
            _fail(method, f"requests_per_text(settings) must be a whole number >= 0, got {declared!r}")
        if asked > declared or (asked != declared and method.prepare is None):
            _fail(
                method,
                f"requests_per_text(settings) is {declared} but it asks for {asked} requests a text under {case} "
                "(max_requests is checked against requests_per_text)",
            )


def check_reference_is_independent(method: Method) -> None:
    """Its reference is a plain function of its own that calls nothing of :mod:`pdd_metrics` (one that
    did would compare the score with itself)."""
    code = getattr(method.reference, "__code__", None)
    if method.reference is method.score or code is None:
        _fail(method, "its reference must be a function of its own, not its score")
    called = (set(code.co_names) | set(code.co_freevars)) & set(pdd_metrics.__all__)
    if called:
        _fail(method, f"its reference calls {sorted(called)} of pdd_metrics: write the equation out plainly")


def check_scores_match_reference(method: Method) -> None:
    """On hand-made texts (one token, ties, sigma 0, a binding cap) and random ones, under every
    settings case, with prefixed requests of n, n + 1 and fewer tokens: the score is a finite number
    equal to the reference's (relative tolerance 1e-12); a text its generation requests refuse (one
    word, SaMIA) raises a ValueError."""
    methods = _methods_with(method)
    checked = 0
    for case in SETTINGS_CASES:
        settings = ScoringSettings.from_metadata(case)
        for name, inputs in [*hand_made_cases(settings, methods), *random_cases(settings, methods=methods)]:
            checked += 1
            if _cannot_split(method, inputs):
                try:
                    method.score(inputs, settings)
                except ValueError:
                    continue
                _fail(method, f"it scored a text its generation requests refuse ({name})")
            score = method.score(inputs, settings)
            if not isinstance(score, float) or not math.isfinite(score):
                _fail(method, f"its score must be a finite float, got {score!r} on {name} under {case}")
            expected = method.reference(inputs, settings)
            if not math.isclose(score, expected, rel_tol=1e-12, abs_tol=1e-15):
                _fail(method, f"score {score!r} differs from its reference's {expected!r} on {name} under {case}")
    if checked != len(SETTINGS_CASES) * (3 * len(HAND_MADE) + RANDOM_TEXTS):
        _fail(method, f"only {checked} cases were checked")


def check_direction(method: Method) -> None:
    """Higher = more likely a member: a text the model fits better scores higher, every reference the
    same. The better fit has each of the text's log-probs halved (each token more likely; the top-1
    raised where the token passes it), the gradient norms of its loss halved, and continuations that
    repeat the text where the first ones share no word with it; its extra requests keep log-probs one
    below the text's mean and its prepared reference stays. At every switch on (:data:`ALL_ON`) with a
    DC-PDD cap that does not bind (``dcpdd_a`` 10: at 0.01 it binds on every token of a short text)."""
    settings = ScoringSettings.from_metadata(ALL_ON | {"dcpdd_a": 10})
    text, lp, ids, mu, sigma = HAND_MADE["ties"]
    inputs = text_inputs(text, lp, ids, mu, sigma, LOG_F, settings, methods=_methods_with(method))
    below = float(np.mean(inputs.logprobs)) - 1.0
    extra = {name: [np.full(values.size, below) for values in lists] for name, lists in inputs.extra_logprobs.items()}
    unrelated = {name: ["nothing alike"] * len(texts) for name, texts in inputs.generations.items()}
    fit = dataclasses.replace(inputs, extra_logprobs=extra, generations=unrelated)
    better = dataclasses.replace(
        fit,
        logprobs=fit.logprobs / 2,
        top1=np.maximum(fit.top1, fit.logprobs / 2),
        grad_norms=fit.grad_norms / 2,
        generations={name: [text] * len(texts) for name, texts in fit.generations.items()},
    )
    if not method.score(better, settings) > method.score(fit, settings):
        _fail(
            method,
            f"a text the model fits better scores {method.score(better, settings)!r}, not above "
            f"{method.score(fit, settings)!r}: orient the score higher = more likely a member (negate it if the "
            "paper's goes the other way)",
        )


#: Bad per-token log-probs and the message each must raise (pdd_metrics' validation).
BAD_LOGPROBS = (
    (np.array([]), "got 0 tokens; an empty text cannot be scored"),
    (np.array([-1.0, np.nan, -2.0]), "token_logprobs has 1 non-finite value"),
    (np.array([-1.0, -np.inf, -2.0]), "token_logprobs has 1 non-finite value"),
    (np.array([[-1.0, -2.0]]), "must be a 1-D array"),
)


def check_refuses_bad_logprobs(method: Method) -> None:
    """An empty text, a NaN, an infinity and a 2-D array of log-probs raise a ValueError with the
    messages of :mod:`pdd_metrics`' validation (a method that scores only generated texts, SaMIA,
    reads no log-probs and is exempt)."""
    if method.generations is not None and method.extra_requests is None:
        return
    settings = ScoringSettings.from_metadata(ALL_ON)
    inputs = text_inputs("Hello", [-1.0, -2.0, -0.5], [1, 2, 3], [-1.0] * 3, [1.0] * 3, LOG_F, settings, methods=_methods_with(method))  # fmt: skip
    for bad, message in BAD_LOGPROBS:
        shape = bad.shape
        broken = dataclasses.replace(inputs, logprobs=bad, token_ids=np.arange(bad.size), mu=np.full(shape, -1.0))
        broken = dataclasses.replace(broken, sigma=np.ones(shape), top1=np.zeros(shape))
        try:
            method.score(broken, settings)
        except ValueError as error:
            if message not in str(error):
                _fail(method, f"log-probs {bad.tolist()} raised {error!r}, not a ValueError saying {message!r}")
            continue
        _fail(method, f"it scored log-probs {bad.tolist()}: validate them with pdd_metrics' helpers")


def check_prepare_hook(method: Method) -> None:
    """Its ``prepare`` hook, where it has one, names a function by its path ``"module:function"``."""
    if method.prepare is None:
        return
    if not isinstance(method.prepare, str):
        _fail(method, "prepare must be the path 'module:function' of its hook, imported when a task runs it")
    try:
        hook = prepare_hook(method.prepare)
    except (ValueError, ImportError, AttributeError) as error:
        _fail(method, f"its prepare hook {method.prepare!r} does not resolve: {error}")
    if not callable(hook):
        _fail(method, f"its prepare hook {method.prepare!r} is not a function")


def check_docs(method: Method, docs: Path = DOCS) -> None:
    """``docs/methods.md`` names it (`` `name` ``) in a heading or a table row, and the settings page
    ``docs/settings.md`` has its row (the page is generated from the registry)."""
    pages = {page: docs / page for page in ("methods.md", "settings.md")}
    missing = [str(path) for path in pages.values() if not path.is_file()]
    if missing:
        _fail(method, f"no {', '.join(missing)} (check_docs reads the docs of a checkout)")
    name = re.escape(method.name)
    if not re.search(rf"^[#|].*`{name}`", pages["methods.md"].read_text(encoding="utf-8"), re.M):
        _fail(method, "docs/methods.md has no heading or table row naming it: add its section under 'Per-text scores'")
    if not re.search(rf"^\| `{name}` \| (yes|no) \| ", pages["settings.md"].read_text(encoding="utf-8"), re.M):
        _fail(
            method, "docs/settings.md has no row for it: regenerate it (python -m pdd_tasks.tools.docs_tables --write)"
        )


#: Every check, in the order :func:`check_method` runs them.
CHECKS: tuple[Callable[[Method], None], ...] = (
    check_names,
    check_settings,
    check_enabled,
    check_label,
    check_requests,
    check_reference_is_independent,
    check_scores_match_reference,
    check_direction,
    check_refuses_bad_logprobs,
    check_prepare_hook,
    check_docs,
)


def check_method(method: str | Method) -> None:
    """Run every check of :data:`CHECKS` on ``method`` (a registered name, or an entry, registered or
    not); the first that fails raises :class:`AssertionError` naming the method and the rule broken."""
    entry = METHODS[method] if isinstance(method, str) else method
    for check in CHECKS:
        check(entry)
