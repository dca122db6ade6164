"""The method registry: every method registered once and scored as its reference implementation,
settings checked, labels from the settings used, and a catalogue that imports without the harness."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

import pdd_metrics
from pdd_tasks import registry
from pdd_tasks.registry import (
    DEFAULT_METHODS,
    METHOD_NAMES,
    METHODS,
    SETTINGS,
    DuplicateMethodError,
    ScoringSettings,
    TextInputs,
)
from pdd_tasks.tools.report.tables import method_table


# -- inputs of every method ----------------------------------------------------------------------


class Prepared:
    """What the ``prepare`` hooks return, reduced to what scoring reads: ReCaLL's and Con-ReCall's
    prefixes (``recall_prefixes.Prefixes``), Neighbor's neighbours (``NeighborGenerator.neighbors``)
    and Small-Ref's reference log-probs (``ReferenceScores.logprobs``). A method whose prepared
    object offers something else needs it added here; its reference test fails until then."""

    nonmember = "A known non-member text."
    member = "A known member text."

    def __init__(self, reference_logprobs: np.ndarray) -> None:
        self.reference_logprobs = reference_logprobs

    def neighbors(self, text: str) -> list[str]:
        return [f"{text} ({index})" for index in range(3)]

    def logprobs(self, text: str) -> np.ndarray:
        return self.reference_logprobs


def text_inputs(text, logprobs, token_ids, mu, sigma, log_freq, settings, seed=0, prefixed="paper"):
    """TextInputs of one text for every registered method: the extra requests each method asks for
    (random log-probs; a request after a context scores the text's n tokens, n + 1 under
    ``prefixed="reference-code"``, fewer under ``"truncated"``), one prepared object for all, and a
    top-1 log-prob per position at or above both log p_i and mu_i (x_i is the top-1 at about half
    of the positions)."""
    rng = np.random.default_rng(seed)
    logprobs = np.asarray(logprobs, dtype=float)
    prepared = Prepared(-rng.random(int(rng.integers(1, 9))) * 5)
    extra: dict[str, list[np.ndarray]] = {}
    for name, method in METHODS.items():
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
    for name, method in METHODS.items():
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
        prepared={name: prepared for name in METHODS},
        top1=top1,
        generations=generations,
        grad_norms=grad_norms,
    )


#: Settings the reference tests run under: the defaults, and values that move every method's.
SETTINGS_CASES = [
    {},
    {"min_k": 0.5, "min_k_pp": 0.29, "dcpdd_a": 10, "con_recall": True, "recall_shots": 2, "con_recall_gamma": 0.1},
    {"min_k": 1.0, "min_k_pp": 0.05, "dcpdd_a": 0.3, "con_recall": True, "recall_shots": 2, "con_recall_gamma": 1.5},
    {"gap_k": 0.29, "gap_k_window": 1, "pac": True, "pac_augmentations": 2, "samia": True, "samia_samples": 3}
    | {"gradnorm": True, "gradnorm_p": 1},
    {"gap_k": 1.0, "gap_k_window": 6, "pac": True, "pac_augmentations": 7, "pac_alpha": 1.0}
    | {"samia": True, "samia_zlib": True, "samia_samples": 1, "samia_prefix_ratio": 0.7, "gradnorm_p": 2.0},
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


def hand_made_cases(settings):
    for index, (name, (text, lp, ids, mu, sigma)) in enumerate(HAND_MADE.items()):
        for prefixed in ("paper", "reference-code", "truncated"):
            yield f"{name}, {prefixed}", text_inputs(text, lp, ids, mu, sigma, LOG_F, settings, index, prefixed)


def random_cases(settings, count=20):
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
        yield (
            f"random {seed}",
            text_inputs(
                text,
                logprobs,
                rng.integers(0, vocabulary, n),
                logprobs - rng.random(n),
                rng.random(n) * 2,
                log_freq,
                settings,
                seed,
                ("paper", "reference-code", "truncated")[seed % 3],
            ),
        )


# -- the registry keeps its promise --------------------------------------------------------------


def test_a_method_name_registered_twice_is_refused_naming_both_citations():
    """The rule is the registry's (tests/project/test_registries.py); a method's duplicate raises
    DuplicateMethodError, naming both citations and why the name must be unique."""
    twin = dataclasses.replace(METHODS["min_k"], citation="another paper")
    with pytest.raises(
        DuplicateMethodError,
        match=r"method 'min_k' is registered twice \(citation '.+' and citation 'another paper'\).*rename one",
    ):
        registry.register(twin)


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_every_method_scores_as_its_reference_implementation(name):
    """The registered score (a pdd_metrics function) equals the entry's plain reference computation
    on hand-made texts (one token, ties, sigma 0, a binding cap) and random ones, under the default
    settings and two others, with prefixed requests of n, n + 1 and fewer tokens."""
    method = METHODS[name]
    checked = 0
    for metadata in SETTINGS_CASES:
        settings = ScoringSettings.from_metadata(metadata)
        for case, inputs in [*hand_made_cases(settings), *random_cases(settings)]:
            checked += 1
            if method.generations is not None and name not in inputs.generations:  # a text it cannot split
                with pytest.raises(ValueError):
                    method.score(inputs, settings)
                continue
            expected = method.reference(inputs, settings)
            assert method.score(inputs, settings) == pytest.approx(expected, rel=1e-12, abs=1e-15), (case, metadata)
    assert checked == len(SETTINGS_CASES) * (3 * len(HAND_MADE) + 20)


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_reference_implementations_do_not_call_pdd_metrics(name):
    """A reference that called the scoring function would compare it with itself."""
    reference = METHODS[name].reference
    assert reference is not METHODS[name].score
    names = set(reference.__code__.co_names) | set(reference.__code__.co_freevars)
    assert not names & set(pdd_metrics.__all__), name


@pytest.mark.parametrize("name", METHOD_NAMES)
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.array([]), "got 0 tokens; an empty text cannot be scored"),
        (np.array([-1.0, np.nan, -2.0]), "token_logprobs has 1 non-finite value"),
        (np.array([-1.0, -np.inf, -2.0]), "token_logprobs has 1 non-finite value"),
        (np.array([[-1.0, -2.0]]), "must be a 1-D array"),
    ],
)
def test_every_method_refuses_an_empty_text_a_nan_and_a_2d_array(name, bad, message):
    if METHODS[name].generations is not None and METHODS[name].extra_requests is None:
        pytest.skip("scores generated texts, no log-probs (the text itself is still scored and checked)")
    settings = ScoringSettings()
    inputs = text_inputs("Hello", [-1.0, -2.0, -0.5], [1, 2, 3], [-1.0] * 3, [1.0] * 3, LOG_F, settings)
    inputs = dataclasses.replace(inputs, logprobs=bad, token_ids=np.arange(bad.size), mu=np.full(bad.shape, -1.0))
    inputs = dataclasses.replace(inputs, sigma=np.ones(bad.shape), top1=np.zeros(bad.shape))
    with pytest.raises(ValueError, match=message):
        METHODS[name].score(inputs, settings)


def test_the_catalogue_imports_without_the_harness_or_torch():
    """The registry names its prepare hooks by path: importing it loads neither lm-eval nor torch."""
    code = "import sys, pdd_tasks.registry; print(sorted(m for m in ('lm_eval', 'torch') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


@pytest.mark.parametrize("name", [name for name in METHOD_NAMES if METHODS[name].prepare])
def test_every_prepare_hook_resolves_to_a_function(name):
    assert callable(registry.prepare_hook(METHODS[name].prepare))


def test_names_are_metric_prefixes_and_citations_are_given():
    for name, method in METHODS.items():
        assert name.isidentifier() and name == name.lower()
        assert method.citation


def test_the_families_register_their_methods_in_table_order():
    """Registration order is table order: pdd_tasks/registry/scoring.py imports the family modules one
    by one, in table order, so each family's methods follow the previous family's (imports sorted by
    name would put reference_based first)."""
    families = [METHODS[name].reference.__module__.rpartition(".")[2] for name in METHOD_NAMES]
    assert families == sorted(families, key=families.index)  # each family in one run
    assert list(dict.fromkeys(families)) == ["reference_free", "reference_based"]


def test_defaults_are_the_seven_base_methods_in_table_order():
    assert DEFAULT_METHODS == ("loss", "zlib", "lowercase", "min_k", "min_k_pp", "gap_k", "dcpdd")
    assert ScoringSettings.from_metadata({"dcpdd_ablations": True}).methods == DEFAULT_METHODS + (
        "dcpdd_cld",
        "dcpdd_lup",
    )
    assert "lowercase" not in ScoringSettings.from_metadata({"lowercase": False}).methods


def test_every_default_passes_its_own_check():
    for setting in SETTINGS:
        if setting.default is not None:
            assert setting.check(setting.name, setting.default) == setting.default, setting.name


def test_a_setting_declared_twice_is_refused():
    twice = registry.Setting("min_k", 0.5, registry.fraction, "another k")
    with METHODS.added("other", dataclasses.replace(METHODS["loss"], name="other", settings=(twice,))):
        with pytest.raises(RuntimeError, match="setting 'min_k' is declared twice"):
            registry.scoring._all_settings()


def test_score_text_scores_the_methods_in_effect_with_their_settings():
    settings = ScoringSettings.from_metadata({"min_k": 0.5, "min_k_pp": 0.4, "dcpdd_a": 0.3, "dcpdd_ablations": True})
    inputs = text_inputs("Hello World, hello.", [-1.0, -2.5, -0.5], [3, 1, 3], [-1.0] * 3, [1.0] * 3, LOG_F, settings)
    scores = registry.score_text(inputs, settings)
    assert list(scores) == list(settings.methods) == [*DEFAULT_METHODS, "dcpdd_cld", "dcpdd_lup"]
    assert scores == {name: METHODS[name].score(inputs, settings) for name in settings.methods}
    assert scores["min_k"] == pytest.approx(-2.5)  # k = 0.5 of 3 tokens: the lowest one


def test_extra_requests_follow_the_methods_in_effect():
    on = ScoringSettings()
    assert registry.extra_requests("Hello World", on) == [("lowercase", "", "hello world")]
    assert registry.extra_requests("Hello World", ScoringSettings.from_metadata({"lowercase": False})) == []


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"min_k": True}, r"min_k=True: expected a fraction in \(0, 1\]"),
        ({"min_k_pp": 1.5}, r"min_k_pp=1.5: expected a fraction"),
        ({"gap_k_window": 0}, r"gap_k_window=0: expected a whole number >= 1\. \(e\.g\. 3\)"),
        ({"dcpdd_a": False}, r"dcpdd_a=False: expected a positive number\. \(paper: 0.01 or 10\)"),
        ({"topk_logprobs": 2.5}, r"topk_logprobs=2.5: expected a whole number >= 1"),
        ({"samia_samples": 1e-3}, r"samia_samples=0.001: expected a whole number >= 1"),
        ({"pac_augmentations": float("inf")}, r"pac_augmentations=inf: expected a whole number >= 1"),
        ({"freq_table": 3}, r"freq_table=3: expected a file path"),
        ({"truncate": 1}, r"truncate=1: expected true or false"),
    ],
)
def test_bad_values_name_the_key_and_what_was_expected(metadata, message):
    with pytest.raises(ValueError, match=message):
        ScoringSettings.from_metadata(metadata)


def test_whole_numbers_written_with_an_exponent_are_whole_numbers():
    # issue 43, item 7: JSON and YAML read 1e9 as 1000000000.0, which was refused as "not a whole number"
    settings = ScoringSettings.from_metadata(
        {"pac": True, "pac_augmentations": 1e1, "max_requests": 1e9, "pac_seed": 0.0}
    )
    assert (settings.pac_augmentations, settings.max_requests, settings.pac_seed) == (10, 10**9, 0)
    assert all(type(value) is int for value in (settings.pac_augmentations, settings.max_requests, settings.pac_seed))
    assert registry.whole_number("permutations", 1e15) == 10**15


def test_labels_are_built_from_the_settings_in_effect():
    assert registry.label("min_k", ScoringSettings()) == "Min-K% (k=0.2)"
    assert registry.label("min_k", ScoringSettings.from_metadata({"min_k": 0.1})) == "Min-K% (k=0.1)"
    assert registry.label("dcpdd", ScoringSettings.from_metadata({"dcpdd_a": 10})) == "DC-PDD (a=10)"
    assert registry.label("gap_k", ScoringSettings.from_metadata({"gap_k_window": 6})) == "Gap-K% (k=0.2, w=6)"


def test_the_table_labels_a_method_with_the_k_the_task_ran_with():
    metrics = {f"{m}_{x},none": 0.5 for m in DEFAULT_METHODS for x in ("auc", "tpr@fpr<5%")}
    results = {
        "results": {"pdd_a": metrics, "pdd_b": metrics},
        "configs": {"pdd_a": {"metadata": {"min_k": 0.1}}, "pdd_b": {"metadata": {}}},
    }
    table = method_table(json.loads(json.dumps(results)))
    assert "| Min-K% (k=0.1) / Min-K% (k=0.2) |" in table
    assert "| Min-K%++ (k=0.2) |" in table


def test_settings_of_methods_that_are_off_are_named(caplog):
    """A setting only an off method reads (neighbor_count without neighbor_model) has no effect:
    the task warns; a switch set to off (lowercase: false, recall_shots: 0) is no mistake."""
    with caplog.at_level("WARNING", logger="pdd_tasks.registry"):
        ScoringSettings.from_metadata({"neighbor_count": 5, "recall_seed": 2, "min_k": 0.1})
    assert "'neighbor_count', 'recall_seed' given, but only read by method(s) that are off" in caplog.text
    assert (
        registry.settings_of_methods_off({"neighbor_count": 5}, ScoringSettings.from_metadata({"neighbor_model": "m"}))
        == []
    )
    off = {"lowercase": False, "recall_shots": 0, "con_recall": False, "small_ref_model": None}
    assert registry.settings_of_methods_off(off, ScoringSettings.from_metadata(off)) == []


@pytest.mark.parametrize("case", SETTINGS_CASES)
def test_requests_per_text_counts_what_each_method_asks_for(case):
    settings = ScoringSettings.from_metadata(case)
    prepared = Prepared(np.zeros(3))
    text = "A text of several words, long enough for every method to ask for its requests."
    for name in settings.methods:
        method = METHODS[name]
        asked = len(method.extra_requests(text, settings, prepared)) if method.extra_requests else 0
        asked += len(method.generations(text, settings, prepared)) if method.generations else 0
        if name == "neighbor":  # the stand-in's neighbours are 3; the real generator's, neighbor_count at most
            continue
        assert asked == method.requests_per_text(settings), name
    planned, extra = registry.planned_requests(7, settings)
    assert planned == 7 * (1 + sum(count for _, count in extra))
