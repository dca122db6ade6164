"""The method registry: every method registered once and passing the battery of
pdd_tasks/registry/checks.py (scored as its reference implementation, settings, requests, direction,
docs), a broken toy entry per rule caught by it, settings checked, labels from the settings used,
and a catalogue that imports without the harness."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

import pdd_metrics
from pdd_metrics import min_k_score
from pdd_tasks import registry
from pdd_tasks.registry import (
    DEFAULT_METHODS,
    METHOD_NAMES,
    METHODS,
    DuplicateMethodError,
    Method,
    ScoringSettings,
)
from pdd_tasks.registry.checks import CHECKS, LOG_F, check_docs, check_method, text_inputs
from pdd_tasks.tools.report.tables import method_table


# -- the battery every entry passes (pdd_tasks/registry/checks.py) --------------------------------


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_every_registered_method_passes_the_battery(name):
    check_method(name)


def _toy_reference(inputs, settings) -> float:
    lowest = sorted(float(value) for value in inputs.logprobs)[: max(1, len(inputs.logprobs) // 2)]
    return sum(lowest) / len(lowest)  # the mean of the lower half, written out


#: A toy method: the mean of the lowest half of the log-probs (Min-K% at k = 0.5).
TOY = Method(
    name="toy_half",
    score=lambda inputs, settings: pdd_metrics.min_k_score(inputs.logprobs, k=0.5),
    reference=_toy_reference,
    label=lambda settings: "Toy half",
    citation="this test file",
)


def test_a_toy_method_registered_in_a_test_passes_every_check_but_its_docs(tmp_path):
    """One entry is all the battery needs: the toy passes every check before the docs one, which names
    the page it lacks, and passes that too once docs name it."""
    assert CHECKS[-1] is check_docs
    with METHODS.added(TOY.name, TOY):
        with pytest.raises(AssertionError, match="method 'toy_half': docs/methods.md has no heading or table row"):
            check_method("toy_half")
    (tmp_path / "methods.md").write_text("### Toy half (`toy_half`; this test file)\n")
    (tmp_path / "settings.md").write_text("| `toy_half` | yes | none | no | no | this test file |\n")
    check_docs(TOY, docs=tmp_path)


def _unvalidated(inputs, settings) -> float:
    return _toy_reference(inputs, settings) if len(inputs.logprobs) else float("nan")


#: One broken entry per rule: (what is changed in the toy, the message naming the rule).
BROKEN = {
    "name": ({"name": "Toy-Half"}, "its name must be lowercase letters"),
    "name of a dataset-level method": ({"name": "blind"}, "a dataset-level method's metric prefix"),
    "citation": ({"citation": ""}, "it needs a citation"),
    "a setting the registry lacks": (
        {"settings": (registry.Setting("toy_gamma", 0.5, registry.fraction, "gamma"),)},
        "setting 'toy_gamma' is not in registry.SETTINGS",
    ),
    "a setting declared twice": (
        {"settings": (dataclasses.replace(registry.MIN_K, doc="another k"),)},
        "setting 'min_k' is declared twice",
    ),
    "a default its check refuses": (
        {"settings": (registry.Setting("toy_gamma", 2.0, registry.fraction, "gamma"),)},
        "the default of setting 'toy_gamma' does not pass its own check: metadata toy_gamma=2.0: expected a fraction",
    ),
    "a setting named as a recorded key": (
        {"settings": (registry.Setting("repeats", 1, registry.whole_number, "repeats"),)},
        "setting 'repeats' is a key the tasks record",
    ),
    "never in effect": ({"enabled": lambda settings: False}, "it is off with every switch on"),
    "off by default without a switch": (
        {"enabled": lambda settings: settings.pac},
        "off by default but declares no setting with switch=True",
    ),
    "enabled not a bool": ({"enabled": lambda settings: "yes"}, "enabled\\(settings\\) must be true or false"),
    "label": ({"label": lambda settings: ""}, "label\\(settings\\) must be one line of text"),
    "requests not counted": (
        {"extra_requests": lambda text, settings, prepared: [("", text)]},
        "requests_per_text\\(settings\\) is 0 but it asks for 1 requests",
    ),
    "requests not pairs": (
        {"generations": lambda text, settings, prepared: [text], "requests_per_text": lambda settings: 1},
        "generations must give \\(context, gen_kwargs dict\\) pairs",
    ),
    "reference is the score": ({"reference": TOY.score}, "its reference must be a function of its own"),
    "reference calls pdd_metrics": (
        {"reference": lambda inputs, settings: min_k_score(inputs.logprobs, k=0.5)},
        "its reference calls \\['min_k_score'\\] of pdd_metrics",
    ),
    "score differs from its reference": (
        {"reference": lambda inputs, settings: float(np.mean(inputs.logprobs))},
        "differs from its reference's",
    ),
    "score not a float": (
        {"score": lambda inputs, settings: np.array([_toy_reference(inputs, settings)])},
        "its score must be a finite float",
    ),
    "direction": (
        {
            "score": lambda inputs, settings: -pdd_metrics.min_k_score(inputs.logprobs, k=0.5),
            "reference": lambda inputs, settings: -_toy_reference(inputs, settings),
        },
        "orient the score higher = more likely a member",
    ),
    "bad log-probs scored": ({"score": _unvalidated}, "it scored log-probs \\[\\]: validate them"),
    "prepare hook": ({"prepare": "pdd_tasks.prepare.nowhere:prepare"}, "its prepare hook .* does not resolve"),
}


@pytest.mark.parametrize("rule", BROKEN)
def test_the_battery_names_the_rule_a_broken_entry_breaks(rule):
    changes, message = BROKEN[rule]
    broken = dataclasses.replace(TOY, **changes)
    with pytest.raises(AssertionError, match=f"method '{broken.name}': .*{message}"):
        check_method(broken)


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


def test_the_catalogue_imports_without_the_harness_or_torch():
    """The registry names its prepare hooks by path: importing it loads neither lm-eval nor torch."""
    code = "import sys, pdd_tasks.registry; print(sorted(m for m in ('lm_eval', 'torch') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


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


def test_every_default_of_the_scoring_path_and_em_mia_passes_its_own_check():
    """The methods' own settings are check_method's (check_settings)."""
    for setting in (*registry.GENERAL_SETTINGS, *registry.EM_MIA_SETTINGS):
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


def test_planned_requests_are_the_texts_times_one_plus_each_method_s_requests():
    settings = ScoringSettings.from_metadata({"pac": True, "pac_augmentations": 3, "samia": True, "samia_samples": 2})
    planned, extra = registry.planned_requests(7, settings)
    assert extra == [("lowercase", 1), ("pac", 3), ("samia", 2)]
    assert planned == 7 * (1 + 1 + 3 + 2)
