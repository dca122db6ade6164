"""The battery every dataset-level test must pass, exported as scikit-learn exports
``check_estimator`` (``sklearn/utils/estimator_checks.py``): :func:`check_dataset_test` runs every check
of :data:`CHECKS` on one registry entry, and ``tests/tasks/test_dataset_tests_registry.py`` runs it
on every registered test (and on a toy test registered by the test file, to show that one entry is
all a test needs).

Each check is a function of the entry that raises :class:`AssertionError` naming the test and what is
wrong. They need neither a model nor lm-eval: the entry's documents, requests and items are built from
a few hand-made examples and hand-made answers, its reading from hand-made result values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from pdd_metrics.verdict import Evidence
from pdd_tasks.dataset_tests.core import DatasetTest, read_settings
from pdd_tasks.results_schema import reference_metric


WORDS = ("level", "colour", "noise", "speed", "smell", "temperature", "width", "depth")
DIRECTIONS = ("north", "south", "east", "west", "hills", "sea")

#: Examples enough for any test's defaults to build documents from (the exchangeability test's 50
#: shards need 100): 128 distinct sentences of two dozen words.
EXAMPLES = tuple(
    f"Example {i}: the {WORDS[i % 8]} of the river rose by {i + 3} centimetres after the storm that came from the "
    f"{DIRECTIONS[i % 6]} on day {i % 28 + 1} of the month, and the village council met the next morning."
    for i in range(128)
)


def _fail(test: DatasetTest, what: str) -> None:
    raise AssertionError(f"dataset-level test {test.name!r}: {what}")


def check_names(test: DatasetTest) -> None:
    """Its name is lowercase (a task, a settings block and a metric prefix), its metrics carry it as
    their prefix, and it has a title and a citation."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", test.name):
        _fail(test, "its name must be lowercase letters, digits and _ (it names pdd_<name> and its metrics)")
    if not test.title or not test.citation:
        _fail(test, "it needs a title and a citation")
    bad = [metric for metric in test.metrics if not metric.startswith(f"{test.name}_")]
    if bad:
        _fail(test, f"metrics {bad} do not start with {test.name}_ (two tests' metrics would collide)")


def check_settings(test: DatasetTest) -> None:
    """Every default passes its own check, and the defaults read from empty metadata are the defaults."""
    for setting in test.all_settings:
        if setting.default is not None and setting.check(setting.name, setting.default) != setting.default:
            _fail(test, f"the default of {setting.name} does not pass its own check")
    read_settings(test, {}, test.task)


def check_documents(test: DatasetTest) -> None:
    """On :data:`EXAMPLES` at its defaults: a whole, non-negative planned request count, at least as many
    as the requests built; each request a ``(context, continuation)`` pair of strings; an item from
    hand-made answers that every metric aggregates to a number."""
    settings = read_settings(test, {}, test.task)
    examples = test.select(test.normalise(list(EXAMPLES), settings, "checks"), settings, "checks")
    planned, how = test.planned_requests(len(examples), settings)
    if not isinstance(planned, int) or planned < 0 or not isinstance(how, str):
        _fail(test, f"planned_requests must give (a whole number >= 0, a string), got {(planned, how)!r}")
    documents, summary = test.documents(examples, settings, "checks", None)
    if not documents or not isinstance(summary, dict):
        _fail(test, "no documents from 128 distinct examples at its defaults, or a summary that is not a dict")
    requests = [test.requests(document, settings) for document in documents]
    if sum(map(len, requests)) > planned:
        _fail(test, f"it built {sum(map(len, requests))} requests where it planned {planned}")
    for pairs in requests:
        if not all(isinstance(c, str) and isinstance(x, str) and x for c, x in pairs):
            _fail(test, "each request must be a (context, non-empty continuation) pair of strings")
    items = [
        test.item(document, [(-float(i + 1), False) for i in range(len(pairs))])
        for document, pairs in zip(documents, requests, strict=True)
    ]
    for metric, (aggregate, _) in test.metrics.items():
        value = aggregate(items)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            _fail(test, f"metric {metric} aggregates to {value!r}, not a number")


def check_reading(test: DatasetTest) -> None:
    """Its reading (what the verdict, ``table``, the report and the board read): a label, what it
    detects, a docs anchor, result keys among its metrics; from values its metrics can take, an
    :class:`~pdd_metrics.verdict.Evidence` (or None) and a short decisive number."""
    reading = test.reading
    if not reading.label or not reading.detects:
        _fail(test, "its reading needs a label and what it detects")
    if not re.fullmatch(r"[a-z0-9-]+\.md#[a-z0-9-]+", reading.evidence_anchor):
        _fail(test, f"evidence_anchor {reading.evidence_anchor!r} is not a docs page#anchor")
    values = _values(test)
    for reference in [None] + ([values] if test.compares_to_reference else []):
        evidence = reading.evidence(values, reference)
        if evidence is not None and not isinstance(evidence, Evidence):
            _fail(test, f"its reading's evidence must be an Evidence or None, got {evidence!r}")
        shown = reading.shown(values, reference)
        if not isinstance(shown, str) or not shown or len(shown) > 80:
            _fail(test, f"its reading's shown must be a few words (at most 80 characters), got {shown!r}")
        if not isinstance(reading.advice(values, reference), str):
            _fail(test, "its reading's advice must be a string")
    if test.compares_to_reference and reference_metric(reading.result_keys[0]) == reading.result_keys[0]:
        _fail(test, "its reference keys must differ from its own")


def _values(test: DatasetTest) -> dict[str, float]:
    """Result values as a run could give them: each metric aggregated over hand-made items."""
    settings = read_settings(test, {}, test.task)
    examples = test.select(test.normalise(list(EXAMPLES), settings, "checks"), settings, "checks")
    documents, _ = test.documents(examples, settings, "checks", None)
    items = [
        test.item(document, [(-float(i + 1), i % 2 == 0) for i in range(len(test.requests(document, settings)))])
        for document in documents
    ]
    values = {metric: float(aggregate(items)) for metric, (aggregate, _) in test.metrics.items()}
    bad = [key for key in test.reading.result_keys if not math.isfinite(values[key])]
    if bad:
        _fail(test, f"result keys {bad} are not finite on hand-made items")
    return values


#: Every check, in the order :func:`check_dataset_test` runs them.
CHECKS: tuple[Callable[[DatasetTest], None], ...] = (check_names, check_settings, check_documents, check_reading)


def check_dataset_test(test: DatasetTest) -> None:
    """Run every check of :data:`CHECKS` on ``test``; the first that fails raises :class:`AssertionError`
    naming the test and what is wrong."""
    for check in CHECKS:
        check(test)
