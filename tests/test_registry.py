"""The method registry: every method declared once, settings checked, labels from the settings used."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pdd_metrics import dcpdd_score, loss_score, lowercase_score, min_k_plus_plus_score, min_k_score, zlib_score
from pdd_tasks import registry
from pdd_tasks.registry import DEFAULT_METHODS, METHODS, NEEDS, SETTINGS, ScoringSettings, TextInputs
from pdd_tasks.tools.report import method_table


def inputs(text="Hello World, hello.", extra=None):
    rng = np.random.default_rng(0)
    n = 6
    return TextInputs(
        text=text,
        logprobs=-rng.random(n) * 4,
        token_ids=np.array([3, 1, 4, 1, 5, 9]),
        mu=-rng.random(n) * 3,
        sigma=rng.random(n) + 0.1,
        log_reference_freq=np.log(np.full(10, 0.1)),
        extra_logprobs=extra if extra is not None else {"lowercase": [-rng.random(7) * 5]},
    )


def test_names_are_unique_metric_prefixes_and_needs_are_known():
    assert len(set(METHODS)) == len(METHODS)
    for name, method in METHODS.items():
        assert name == method.name and name.isidentifier() and name == name.lower()
        assert method.needs <= set(NEEDS), name
        assert method.citation


def test_defaults_are_the_six_base_methods_in_table_order():
    assert DEFAULT_METHODS == ("loss", "zlib", "lowercase", "min_k", "min_k_pp", "dcpdd")
    assert ScoringSettings.from_metadata({"dcpdd_ablations": True}).methods == DEFAULT_METHODS + (
        "dcpdd_cld",
        "dcpdd_lup",
    )
    assert "lowercase" not in ScoringSettings.from_metadata({"lowercase": False}).methods


def test_every_setting_is_declared_once_with_a_valid_default():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    defaults = ScoringSettings()
    for setting in SETTINGS:
        assert getattr(defaults, setting.name) == setting.default
        if setting.default is not None:
            assert setting.check(setting.name, setting.default) == setting.default


def test_score_text_calls_the_pure_functions_with_the_settings_in_effect():
    settings = ScoringSettings.from_metadata({"min_k": 0.5, "min_k_pp": 0.4, "dcpdd_a": 0.3, "dcpdd_ablations": True})
    x = inputs()
    scores = registry.score_text(x, settings)
    assert set(scores) == set(settings.methods)
    assert scores["loss"] == loss_score(x.logprobs)
    assert scores["zlib"] == zlib_score(x.logprobs, x.text)
    assert scores["lowercase"] == lowercase_score(x.logprobs, x.extra_logprobs["lowercase"][0])
    assert scores["min_k"] == min_k_score(x.logprobs, k=0.5)
    assert scores["min_k_pp"] == min_k_plus_plus_score(x.logprobs, x.mu, x.sigma, k=0.4)
    assert scores["dcpdd"] == dcpdd_score(x.logprobs, x.token_ids, x.log_reference_freq, a=0.3)
    assert scores["dcpdd_cld"] == dcpdd_score(
        x.logprobs, x.token_ids, x.log_reference_freq, a=None, first_occurrence_only=False
    )
    assert scores["dcpdd_lup"] == dcpdd_score(
        x.logprobs, x.token_ids, x.log_reference_freq, a=0.3, first_occurrence_only=False
    )


def test_extra_requests_follow_the_methods_in_effect():
    on = ScoringSettings()
    assert registry.extra_requests("Hello World", on) == [("lowercase", "", "hello world")]
    assert registry.extra_requests("Hello World", ScoringSettings.from_metadata({"lowercase": False})) == []


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"min_k": True}, r"min_k=True: expected a fraction in \(0, 1\]"),
        ({"min_k_pp": 1.5}, r"min_k_pp=1.5: expected a fraction"),
        ({"dcpdd_a": False}, r"dcpdd_a=False: expected a positive number\. \(paper: 0.01 or 10\)"),
        ({"topk_logprobs": 2.0}, r"topk_logprobs=2.0: expected a whole number >= 1"),
        ({"freq_table": 3}, r"freq_table=3: expected a file path"),
        ({"truncate": 1}, r"truncate=1: expected true or false"),
    ],
)
def test_bad_values_name_the_key_and_what_was_expected(metadata, message):
    with pytest.raises(ValueError, match=message):
        ScoringSettings.from_metadata(metadata)


def test_labels_are_built_from_the_settings_in_effect():
    assert registry.label("min_k", ScoringSettings()) == "Min-K% (k=0.2)"
    assert registry.label("min_k", ScoringSettings.from_metadata({"min_k": 0.1})) == "Min-K% (k=0.1)"
    assert registry.label("dcpdd", ScoringSettings.from_metadata({"dcpdd_a": 10})) == "DC-PDD (a=10)"


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
