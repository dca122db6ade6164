"""The registry of dataset-level tests: was a benchmark, as a whole, in the training data?

A dataset-level test reads a benchmark's examples (no labels, no reference set) and gives one answer
for the whole set. Each is one :class:`DatasetTest` entry, registered once (:func:`register`), as the
per-text methods are entries of :data:`pdd_tasks.registry.METHODS`:

- its settings (:class:`pdd_tasks.registry.Setting`, read and checked by :func:`read_settings`, the
  same machinery as the methods' settings; a key that is no setting of the test is refused);
- the examples it scores (``select``: e.g. cut, subset) and what that costs (``planned_requests``,
  checked against the setting ``max_requests`` before anything is built: :func:`check_cost`);
- its documents and each document's ``(context, continuation)`` requests, ordinary ``loglikelihood``
  requests that every backend answers;
- the per-document item its metrics aggregate, and the metrics: aggregations of :mod:`pdd_metrics`
  functions, each carrying its standard error where it has one (:func:`pdd_tasks.registry.with_stderr`).

One task class runs any of them (:mod:`pdd_tasks.tasks.dataset_level`): ``pdd_<name>`` runs one test
on one source of examples, ``pdd_contamination`` every test named in its ``tests`` on each task of
its ``source_tasks``. Adding a test: a pure function in :mod:`pdd_metrics`, one entry here, one docs
section (docs/adding-a-method.md, "Adding a dataset-level test").

This module imports neither lm-eval nor torch.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pdd_metrics.repeats import find_repeats
from pdd_metrics.verdict import Evidence
from pdd_tasks.errors import UserError
from pdd_tasks.loading.examples import ExampleSource
from pdd_tasks.registries import DuplicateNameError, Registry
from pdd_tasks.registry import (
    BYTES_PER_REQUEST,
    REQUEST_CEILING,
    Setting,
    SettingError,
    check_metadata_keys,
    flag,
    refuse_misspelt_keys,
    request_ceiling,
    whole_number,
)


logger = logging.getLogger(__name__)


class NotApplicable(UserError):
    """A test cannot run on these examples (too few for its shards or in-context examples, a shard
    longer than the model's context window): an error where the test runs alone (``pdd_codec``), a
    warning and the test left out for that source in ``pdd_contamination``."""


class TooCostly(UserError):
    """The settings ask for more requests than ``max_requests`` allows; refused before anything is built."""


#: The most requests a test may send for one source of examples before it is refused (the defaults:
#: the exchangeability test's 50 shards x 251 orders = 12,550; CoDeC's 1,000 examples x 2 = 2,000).
DEFAULT_MAX_REQUESTS = 20_000

MAX_REQUESTS = Setting(
    "max_requests",
    DEFAULT_MAX_REQUESTS,
    whole_number,
    "the most requests the test may send for one source of examples; settings that ask for more are refused "
    "before anything is built (the default fits every test's defaults: 12,550 for the exchangeability test, 2,000 "
    "for CoDeC). Raise it knowingly: each request is a forward pass. No value lets through more than "
    f"{REQUEST_CEILING:,} requests (fewer on a machine whose memory cannot hold that many at {BYTES_PER_REQUEST} bytes "
    "each): such a count is refused naming the settings that make it.",
    hint="(e.g. 50000)",
)

KEEP_DUPLICATES = Setting(
    "keep_duplicates",
    False,
    flag,
    "score repeated examples (the same text after the test's own cut) once each time they occur; by default a "
    "test that assumes distinct examples scores each distinct text once and says how many repeats it dropped.",
)


def or_null(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    """``check``, with null (None) accepted as "no limit"."""

    def nullable(name: str, value: Any) -> Any:
        return None if value is None else check(name, value)

    nullable.__doc__ = f"{(check.__doc__ or '').rstrip('.')}, or null for none."
    return nullable


def string(non_empty: bool) -> Callable[[str, Any], str]:
    """A check of a text setting (a separator); ``non_empty``: "" is refused."""

    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or (non_empty and not value):
            kind = "a non-empty string" if non_empty else "a string"
            raise ValueError(f'metadata {name}={value!r}: expected {kind}, e.g. "\\n".')
        return value

    check.__doc__ = "A non-empty string." if non_empty else "A string."
    return check


#: One test's values from a results JSON: its result key (``codec_score``) -> the value for one task.
Values = Mapping[str, float]


@dataclass(frozen=True)
class Reading:
    """How the verdict, ``lm-eval-pdd table``, the report and its contamination board read a test's
    results (:mod:`pdd_tasks.tools.results.contamination`): declared on the test's entry, so a test added
    by one entry is read, decided and shown with the others.

    Attributes:
        label: its column and its name in a verdict line ("CoDeC").
        detects: what its rejection means, as the verdict line says it ("seen example by example").
        result_keys: the metrics (of :attr:`DatasetTest.metrics`) it is read from, the first its own
            value; a task's reading is left out of the verdict, as damaged, where one is missing or
            damaged. A test that :attr:`~DatasetTest.compares_to_reference` reads the same keys of the
            reference (:func:`pdd_tasks.results_schema.reference_metric`).
        evidence: ``evidence(values, reference)`` -> its :class:`pdd_metrics.verdict.Evidence` (the
            p-value, and where it has one the p-value against a weaker null), or None where the values
            give none (no example scored); ``reference``: the reference's values, or None.
        shown: ``shown(values, reference)`` -> its decisive number in a few words ("0.994 [0.987,
            0.997] of 1000"), for a verdict line, a table cell and the board.
        evidence_anchor: the docs page and anchor of its measured level and power, cited by every
            verdict line it decides ("controls-examples.md#codec-null").
        advice: ``advice(values, reference)`` -> what would decide a task whose verdict is
            "inconclusive" by this test's weaker null (a reference, more examples); "" for a test without one.
        group: ``group(readings)`` -> a group's ``(values, reference)`` from its leaves' ``(values,
            reference)`` (those where the test applied; at least :data:`MIN_GROUP_LEAVES`), with no new
            request, then read by ``evidence``, ``shown`` and ``advice`` as a leaf's: CoDeC pools the
            leaves' drops, the exchangeability test combines their p-values
            (:mod:`pdd_metrics.combine`). None: the test gives a group no verdict (no group row of its
            own; the group's verdict then rests on the other tests).
    """

    label: str
    detects: str
    result_keys: tuple[str, ...]
    evidence: Callable[[Values, Values | None], Evidence | None]
    shown: Callable[[Values, Values | None], str]
    evidence_anchor: str
    advice: Callable[[Values, Values | None], str] = lambda values, reference: ""
    group: Callable[[list[tuple[Values, Values | None]]], tuple[Values, Values | None]] | None = None


#: The fewest leaves a test must have applied to for a group's test (one leaf's group test would be
#: the leaf's own, counted twice in Holm's family).
MIN_GROUP_LEAVES = 2

#: The docs anchor of the measured level and power of the group-level tests, cited by a group's verdict line.
GROUP_EVIDENCE_ANCHOR = "controls.md#group-verdict"


@dataclass(frozen=True)
class DatasetTest:
    """One dataset-level test.

    Attributes:
        name: ``codec`` gives the task ``pdd_codec``, the settings block ``"codec": {...}`` of
            ``pdd_contamination`` and the metric prefix ``codec_``; lowercase, registered once.
        title: its name in tables and messages ("CoDeC").
        citation: the paper and its section.
        settings: what it reads from the metadata (``max_requests`` is added to every test).
        metrics: metric name -> (aggregation over the per-document items, higher_is_better); an
            aggregation with a standard error carries it (:func:`pdd_tasks.registry.with_stderr`).
        normalise: ``normalise(examples, settings, source)`` -> the examples as it reads them (e.g. cut
            at a length); repeats are found after it (:func:`distinct`).
        select: ``select(examples, settings, source)`` -> the examples it scores (a subset, the first
            N), after repeats are handled and before any request is built.
        planned_requests: ``planned_requests(number of selected examples, settings)`` -> (the requests
            it will send, how that number comes about), checked against ``max_requests``
            (:func:`check_cost`) before any document is built.
        cost_fix: the settings that bring the request count down, for the message that refuses it.
        documents: ``documents(examples, settings, source, model)`` -> (its documents, a summary for the
            results JSON); ``model`` is what :func:`model_window` found
            of the run's model (tokenizer and context window) or None. Raises :class:`NotApplicable`.
        requests: ``requests(document, settings)`` -> its ``(context, continuation)`` pairs, in order.
        item: ``item(document, results)`` -> the value every metric aggregates, from the answers to
            ``requests`` (lm-eval's ``(log-likelihood, is_greedy)`` pairs).
        reading: how its results are read into the verdict, the table, the report and the board
            (:class:`Reading`).
        distinct_examples: it assumes distinct examples (a repeat changes its answer): repeats are
            scored once unless ``keep_duplicates`` is set (the setting is added where this is true).
            Where false, repeats are counted and reported but kept (e.g. the exchangeability test,
            whose object is the file in its published order).
        compares_to_reference: its score means most beside the same score of a reference of
            known-unseen examples of the benchmark's kind (CoDeC): in ``pdd_contamination`` a task's
            ``references`` entry is scored by it with the same settings, into the metrics
            ``reference_<metric>`` (:func:`pdd_tasks.results_schema.reference_metric`).
        contamination_defaults: defaults of its settings inside ``pdd_contamination`` where they
            differ from its own task's: the check beside an eval should cost about the eval (issue 33;
            docs/performance.md, "What a check costs"); a block's own value wins.
    """

    name: str
    title: str
    citation: str
    settings: tuple[Setting, ...]
    metrics: dict[str, tuple[Callable, bool]]
    normalise: Callable[[list[str], Any, str], list[str]]
    select: Callable[[list[str], Any, str], list[str]]
    planned_requests: Callable[[int, Any], tuple[int, str]]
    cost_fix: str
    documents: Callable[[list[str], Any, str, Any], tuple[list[dict], dict]]
    requests: Callable[[dict, Any], list[tuple[str, str]]]
    item: Callable[[dict, list], Any]
    reading: Reading
    distinct_examples: bool = False
    compares_to_reference: bool = False
    contamination_defaults: dict = field(default_factory=dict)
    settings_class: type = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        every = self.all_settings
        names = [setting.name for setting in every]
        if len(set(names)) != len(names):
            raise RuntimeError(f"dataset-level test {self.name!r} declares a setting twice: {names}")
        missing = [key for key in self.reading.result_keys if key not in self.metrics]
        if not self.reading.result_keys or missing:
            raise RuntimeError(
                f"dataset-level test {self.name!r}: its reading's result_keys {missing or '()'} are none of its metrics"
            )
        unknown = set(self.contamination_defaults) - set(names)
        if unknown:
            raise RuntimeError(
                f"dataset-level test {self.name!r}: contamination_defaults {sorted(unknown)} are no settings"
            )
        settings_class = dataclasses.make_dataclass(
            f"{self.name.title().replace('_', '')}Settings",
            [(setting.name, Any, field(default=setting.default)) for setting in every],
            frozen=True,
        )
        settings_class.__doc__ = f"The settings of the dataset-level test {self.name!r} (pdd_tasks.dataset_tests)."
        object.__setattr__(self, "settings_class", settings_class)

    @property
    def all_settings(self) -> tuple[Setting, ...]:
        """Its own settings, then those every test has (``max_requests``, and ``keep_duplicates`` where
        it assumes distinct examples)."""
        return self.settings + (MAX_REQUESTS,) + ((KEEP_DUPLICATES,) if self.distinct_examples else ())

    @property
    def task(self) -> str:
        """The task that runs it alone."""
        return f"pdd_{self.name}"


class DuplicateTestError(DuplicateNameError):
    """A test name registered twice (a programming error, as in lm-eval's registry)."""


#: Every registered dataset-level test by name, in registration order (= table order).
DATASET_TESTS: Registry[DatasetTest] = Registry(
    "dataset-level test",
    duplicate_error=DuplicateTestError,
    describe=lambda test: f"citation {test.citation!r}",
    unique_because="its name is its task's and its metrics' prefix and must be unique.",
)


def register(test: DatasetTest) -> DatasetTest:
    """Add ``test`` to :data:`DATASET_TESTS` under its name; a name registered twice raises
    :class:`DuplicateTestError` (its metrics and its task would replace the other's silently)."""
    return DATASET_TESTS.register(test.name, test)


def read_settings(test: DatasetTest, metadata: dict, where: str, extra_keys=(), strict: bool = False):
    """``test``'s settings from ``metadata`` (absent keys take their defaults), each checked by its
    :class:`~pdd_tasks.registry.Setting`.

    ``extra_keys``: other keys the task reads from the same metadata (the source of the examples).
    ``strict``: every other key is refused (a settings block of ``pdd_contamination``, where nothing
    else belongs); otherwise a key close to a known one is refused and the others warned about, as for
    the membership tasks (:func:`pdd_tasks.registry.check_metadata_keys`: ``--model_args`` reach the
    task metadata too).

    Raises:
        SettingError: naming the key, what was expected and the fix.
    """
    known = {setting.name for setting in test.all_settings} | set(extra_keys)
    if strict:
        unknown = [key for key in metadata if key not in known]
        if unknown:
            refuse_misspelt_keys(unknown, known, where)  # a close match: "did you mean"; no "ignored" warning
            raise SettingError(
                f"{where}: {', '.join(map(repr, unknown))} is no setting of {test.title}. Its settings: "
                f"{', '.join(sorted(known))} (docs/dataset-tests.md)."
            )
    else:
        check_metadata_keys(metadata, known, where)
    try:
        values = {setting.name: setting.read(metadata) for setting in test.all_settings}
    except SettingError as error:
        raise SettingError(f"{where}: {error}") from None
    return test.settings_class(**values)


def source_keys() -> tuple[str, ...]:
    """The metadata keys that name where a test's examples come from."""
    return tuple(field.name for field in dataclasses.fields(ExampleSource))


def check_cost(test: DatasetTest, examples: int, settings, where: str) -> int:
    """The number of requests ``test`` will send for ``examples`` selected examples, refused with
    :class:`TooCostly` (before anything is built) where it is more than ``settings.max_requests``, or
    more than any run may send whatever ``max_requests`` says (:func:`pdd_tasks.registry.request_ceiling`;
    that refusal names the settings that make the count, not the cap)."""
    planned, how = test.planned_requests(examples, settings)
    ceiling, why = request_ceiling()
    if planned > ceiling:
        raise TooCostly(
            f"{where}: {test.title} on {examples:,} examples would send {planned:,} requests ({how}), more than "
            f"{ceiling:,}, {why}, whatever max_requests says. Lower the settings that make the count "
            f"({test.cost_fix})."
        )
    if planned > settings.max_requests:
        raise TooCostly(
            f"{where}: {test.title} on {examples:,} examples would send {planned:,} requests ({how}), more than "
            f"max_requests={settings.max_requests:,}. Ask for fewer ({test.cost_fix}), or raise max_requests if the "
            f"run is meant to be this large (each request is a forward pass)."
        )
    return planned


def distinct(examples: list[str], test: DatasetTest, settings, source: str) -> tuple[list[str], dict]:
    """The examples as ``test`` scores them with respect to repeats (exact, after its own cut): a test
    that assumes distinct examples keeps each text's first occurrence (unless ``keep_duplicates``);
    another keeps them all. Either way a warning and the summary (``repeats``) say how many there were
    and where (0-based example indices of the first few)."""
    found = find_repeats(examples)
    summary = {"distinct": found.n_distinct, "repeats": found.n_extra_copies}
    if not found.n_extra_copies:
        return examples, summary
    where = "; ".join(
        f"example {group[0]} x {len(group)} (at {', '.join(map(str, group[:5]))}{', ...' if len(group) > 5 else ''})"
        for group in found.groups[:3]
    )
    summary["examples_of_repeats"] = [list(group[:5]) for group in found.groups[:3]]
    drop = test.distinct_examples and not getattr(settings, "keep_duplicates", False)
    logger.warning(
        "%s on %s: %d of the %d examples repeat an earlier one (%d distinct; %s). %s",
        test.title,
        source,
        found.n_extra_copies,
        len(examples),
        found.n_distinct,
        where,
        "Each distinct example is scored once (a repeat would be its own in-context example); keep_duplicates: "
        "true scores every copy."
        if drop
        else "They are kept: the test reads the examples in their published order, repeats included.",
    )
    summary["repeats_dropped"] = drop
    return ([examples[i] for i in found.first] if drop else examples), summary


@dataclass(frozen=True)
class ModelWindow:
    """The run's model as the tests' window checks need it: its tokenizer and its context window in tokens."""

    tokenizer: Any
    window: int

    def length(self, text: str) -> int:
        """Tokens of ``text`` scored after the start token: its encoding plus one (the start token
        or, for a tokenizer that adds it, the one the encoding already holds)."""
        return len(self.tokenizer(text).input_ids) + 1

    def lengths(self, texts: list[str]) -> list[int]:
        """:meth:`length` of each of ``texts``, encoded as one batch."""
        return [len(ids) + 1 for ids in self.tokenizer(texts).input_ids] if texts else []


def model_window(metadata: dict) -> ModelWindow | None:
    """Where ``--model_args pretrained=...`` (merged into the task metadata by ``lm_eval``) names an HF
    model whose tokenizer and config load here: its tokenizer and context window (``max_length`` if
    given); None otherwise (a Hub name offline, a GGUF directory, another backend's model name), and
    the tests then run without their window checks."""
    name = metadata.get("tokenizer") or metadata.get("pretrained")
    if not isinstance(name, str):
        return None
    try:
        from transformers import AutoConfig, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name)
        config = AutoConfig.from_pretrained(metadata.get("pretrained") or name)
    except Exception as error:  # noqa: BLE001 - any model this check cannot read: no check, as documented
        logger.debug("no context-window check for %r: %s", name, error)
        return None
    window = metadata.get("max_length") or next(
        (getattr(config, key) for key in ("max_position_embeddings", "n_positions") if hasattr(config, key)),
        None,
    )
    return ModelWindow(tokenizer, window) if isinstance(window, int) else None
