"""The one task class of the dataset-level tests (:mod:`pdd_tasks.dataset_tests`): ``pdd_codec``,
``pdd_exchangeability`` and ``pdd_contamination``.

- ``pdd_<test>`` (:class:`CodecTask`, :class:`ExchangeabilityTask`) runs one test on one source of
  examples, named in its flat metadata (``source_task`` or ``data_files``, with the test's settings);
  its metrics are the test's (``codec_score``), and the results JSON's task metadata says what was
  scored (``codec_source``). A test that cannot apply (too few examples) is an error.
- ``pdd_contamination`` (:class:`ContaminationTask`) runs each test of ``tests`` (default: every
  registered one) on each leaf task of ``source_tasks`` (tasks, groups and tags:
  :mod:`pdd_tasks.loading.task_groups`), or without it on each other task of its own run
  (:meth:`ContaminationTask.see_run_tasks`), in the same ``lm_eval`` run as those tasks' own evals.
  The results JSON records the groups (``contamination_groups``: group -> direct children) and each
  leaf's group; a leaf that cannot be loaded is reported with the reason, the others are checked.
  Each test's settings are its block (``"codec": {...}``), checked as strictly as a test's own task
  checks them. Its metrics are suffixed with the source task
  (``codec_score/arc_easy``); a test that cannot apply to a task is left out for it with a warning and
  the reason in ``configs.pdd_contamination.metadata.contamination``. ``references`` maps a source
  task to an lm-eval task of known-unseen examples of its kind and format (freshly written, or dated
  after the model's data; e.g. a copy of the task's YAML pointed at them): each test that compares to a
  reference (CoDeC) scores it too, with the same settings, into ``reference_<metric>/<source task>``,
  and the verdict tests the benchmark against it (:func:`pdd_metrics.verdict.codec_reference_pvalue`).

For each (source, test), before any document is built: the examples are read once per source
(:mod:`pdd_tasks.loading.examples`, rendered as in the source task), normalised as the test reads
them, their repeats handled (:func:`pdd_tasks.dataset_tests.core.distinct`), selected, and the planned
request count checked against ``max_requests`` and logged (``pdd_contamination``, once every document is
built, with the requests' tokens where the run's model is known: :func:`planned_line`).

    lm_eval --model hf --model_args pretrained=<model> --include_path "$(lm-eval-pdd tasks-path)" \\
      --tasks arc_easy,gsm8k,pdd_contamination
"""

from __future__ import annotations

import json
import logging

import datasets
from lm_eval.api.task import ConfigurableTask

from pdd_tasks import lm_eval_patches
from pdd_tasks.dataset_tests import DATASET_TESTS, DatasetTest, NotApplicable
from pdd_tasks.dataset_tests.codec import MIN_SCORED, CodecError, too_few_scored
from pdd_tasks.dataset_tests.core import (
    check_cost,
    distinct,
    model_window,
    read_settings,
    source_keys,
)
from pdd_tasks.errors import UserError, excerpt
from pdd_tasks.loading import task_groups
from pdd_tasks.loading.examples import ExampleSource, examples_from_task, examples_of_task
from pdd_tasks.registry import SettingError, check_metadata_keys
from pdd_tasks.results_schema import reference_metric, source_metric
from pdd_tasks.tasks.base import loglikelihood_requests, refuse_run_options


logger = logging.getLogger(__name__)


class ContaminationError(UserError):
    """A setting of ``pdd_contamination`` is not usable; the message names the fix."""


def prepare(test: DatasetTest, settings, examples: list[str], source: str, model, where: str):
    """``(documents, summary, planned requests)`` of ``test`` on ``examples`` of ``source``: normalised,
    repeats handled, selected, the cost checked (:class:`~pdd_tasks.dataset_tests.TooCostly`), then built
    (:class:`~pdd_tasks.dataset_tests.NotApplicable` where the test cannot apply)."""
    examples = test.normalise(examples, settings, source)
    examples, repeats = distinct(examples, test, settings, source)
    examples = test.select(examples, settings, source)
    planned = check_cost(test, len(examples), settings, where)
    documents, summary = test.documents(examples, settings, source, model)
    if repeats.get("repeats"):
        summary["repeats"] = repeats
    return documents, summary, planned


def request_tokens(test: DatasetTest, settings, documents: list[dict], model) -> int:
    """Tokens of the requests of ``documents`` as ``model`` (a :class:`~pdd_tasks.dataset_tests.core.ModelWindow`)
    encodes them: each request's context and continuation together after the start token
    (:meth:`~pdd_tasks.dataset_tests.core.ModelWindow.length`), before any forward pass is shared."""
    return sum(
        sum(model.lengths([context + continuation for context, continuation in test.requests(doc, settings)]))
        for doc in documents
    )


def planned_line(planned: dict[tuple[str, str], int], tokens: int | None) -> str:
    """The line ``pdd_contamination`` logs before scoring: the requests planned, with their tokens where the
    run's model is known (``tokens`` not None), then the requests of each (task, test)."""
    about = f", about {tokens:,} tokens" if tokens is not None else ""
    each = ", ".join(f"{test} on {name}: {count:,}" for (name, test), count in planned.items())
    return f"pdd_contamination: {sum(planned.values())} requests planned{about} ({each})."


def document_rows(documents: list[dict]) -> list[dict]:
    """The documents as rows of one table (every key in each, None where a document lacks it), numbered."""
    keys = sorted({key for doc in documents for key in doc})
    return [{key: doc.get(key) for key in keys} | {"doc_index": i} for i, doc in enumerate(documents)]


def metric_list(metrics: list[tuple]) -> list[dict]:
    """lm-eval's ``metric_list`` of ``(name, aggregation, higher_is_better)`` triples."""
    return [
        {"metric": name, "aggregation": aggregate, "higher_is_better": higher} for name, aggregate, higher in metrics
    ]


def dataset_test_named_by(task: str) -> str:
    """The registered test that task ``pdd_<test>`` runs alone."""
    name = task.removeprefix("pdd_")
    if name not in DATASET_TESTS:
        raise ValueError(
            f"task {task!r}: no dataset-level test {name!r} is registered ({', '.join(DATASET_TESTS)}); a task of class "
            "DatasetTestTask is named pdd_<test>, or a subclass names its TEST."
        )
    return name


class DatasetTestTask(ConfigurableTask):
    """Documents of every (source, test) of the run; each document's requests and item are its test's."""

    #: The test the task runs alone on one source (``pdd_codec``: ``"codec"``); None: the test whose
    #: task name is the task's (``pdd_<test>``), so a new test's YAML needs no class of its own.
    TEST: str | None = None

    def __init__(self, config: dict) -> None:
        lm_eval_patches.apply()
        config = dict(config)
        config.pop("class", None)
        self.run_metadata = dict(config.get("metadata") or {})
        self.test_task_name = config.get("task", type(self).__name__)
        #: (source task or None, test name) -> the test's settings.
        self.settings: dict[tuple[str | None, str], object] = {}
        documents, metrics, recorded = self.build()
        self.documents = document_rows(documents)
        config["metric_list"] = metric_list(metrics)
        config["process_results"] = self.process_results
        super().__init__(config=config)
        self.config.metadata.update(recorded)

    # -- what the run holds ------------------------------------------------------------------------

    def build(self) -> tuple[list[dict], list[tuple], dict]:
        """(documents, metrics as (name, aggregation, higher_is_better), what the results JSON records)."""
        test = DATASET_TESTS[self.TEST or dataset_test_named_by(self.test_task_name)]
        metadata = self.run_metadata
        refuse_contamination_keys(metadata, self.test_task_name)
        settings = read_settings(test, metadata, self.test_task_name, extra_keys=source_keys())
        examples, source = ExampleSource.from_metadata(metadata, self.test_task_name).load()
        documents, summary, planned = prepare(
            test, settings, examples, source, model_window(metadata), self.test_task_name
        )
        logger.info("%s: %s on %s: %d documents, at most %d requests.", self.test_task_name, test.title, source, len(documents), planned)  # fmt: skip
        self.settings[(None, test.name)] = settings
        documents = [{"test": test.name, "source_task": None, **doc} for doc in documents]
        metrics = [(name, aggregate, higher) for name, (aggregate, higher) in test.metrics.items()]
        return documents, metrics, {f"{test.name}_source": summary}

    # -- lm-eval's hooks ---------------------------------------------------------------------------

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        self.dataset = {self.config.test_split: datasets.Dataset.from_list(self.documents)}

    def build_all_requests(self, **kwargs) -> None:
        """lm-eval's request building, after refusing ``--limit 0`` and chat templates (each request is
        plain text after the start token, as in the reference code)."""
        refuse_run_options(self.config.task, **kwargs)
        super().build_all_requests(**kwargs)

    def construct_requests(self, doc: dict, ctx, **kwargs) -> list:
        test = DATASET_TESTS[doc["test"]]
        settings = self.settings[(doc["source_task"], doc["test"])]
        arguments = test.requests(doc, settings)
        share = getattr(settings, "share_passes", True)
        return loglikelihood_requests(self.config.task, doc, doc["doc_index"], arguments, share_passes=share, **kwargs)

    def process_results(self, doc: dict, results: list) -> dict:
        test = DATASET_TESTS[doc["test"]]
        item = test.item(doc, results)
        named = reference_metric if doc.get("role") == "reference" else str
        return {source_metric(named(metric), doc["source_task"]): item for metric in test.metrics}


class CodecTask(DatasetTestTask):
    """``pdd_codec``: CoDeC on one source of examples (:mod:`pdd_tasks.dataset_tests.codec`)."""

    TEST = "codec"

    def build_all_requests(self, **kwargs) -> None:
        """As every dataset-level test's, and a ``--limit`` that leaves fewer than
        :data:`~pdd_tasks.dataset_tests.codec.MIN_SCORED` examples refused, as the same file would be."""
        super().build_all_requests(**kwargs)
        scored = len({instance.doc_id for instance in self.instances})
        if scored < MIN_SCORED:
            why = f"--limit {kwargs.get('limit')} of {len(self.documents)} examples"
            raise CodecError(too_few_scored(scored, self.config.task, why))


class ExchangeabilityTask(DatasetTestTask):
    """``pdd_exchangeability``: the exchangeability test on one source (:mod:`pdd_tasks.dataset_tests.exchangeability`)."""

    TEST = "exchangeability"


# -- pdd_contamination: every test on each of several tasks --------------------------------------------

#: The keys of ``pdd_contamination``'s metadata besides the tests' blocks.
CONTAMINATION_KEYS = ("source_tasks", "source_include_path", "tests", "references")


def refuse_contamination_keys(metadata: dict, task: str) -> None:
    """Refuse, in a one-source test's task (``pdd_codec``), the keys only ``pdd_contamination`` reads
    (``source_tasks``, ``tests``, ``references``, a test's settings block such as ``"codec": {...}``):
    ignored, the run would complete without what they ask for (``references``: the comparison with a
    reference, the test's null in its place)."""
    blocks = [key for key in DATASET_TESTS if isinstance(metadata.get(key), dict)]
    if blocks:
        raise ContaminationError(
            f"{task}: metadata {blocks[0]}={json.dumps(metadata[blocks[0]])} is a settings block of pdd_contamination; "
            f"{task} takes its settings at the top level, e.g. --metadata "
            f"'{json.dumps({**{k: v for k, v in metadata.items() if k not in blocks}, **metadata[blocks[0]]})}'."
        )
    keys = [key for key in CONTAMINATION_KEYS if key in metadata and key not in source_keys()]
    if keys:
        source = metadata.get("source_task") or "arc_easy"
        raise ContaminationError(
            f"{task}: metadata {', '.join(keys)} {'is a setting' if len(keys) == 1 else 'are settings'} of "
            f"pdd_contamination, not of {task}, which would ignore {'it' if len(keys) == 1 else 'them'}. Run "
            f'--tasks pdd_contamination --metadata \'{{"source_tasks": ["{source}"], '
            + (f'"references": {json.dumps(metadata["references"])}}}\'' if "references" in keys else "...}'")
            + f" instead, or remove {' and '.join(keys)}."
        )


def source_task_names(metadata: dict) -> list[str] | None:
    """``source_tasks``: the lm-eval tasks, groups and tags to test, or None where it is not given (the
    run's other tasks are tested: :meth:`ContaminationTask.see_run_tasks`)."""
    names = metadata.get("source_tasks")
    if names is None:
        return None
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    if not isinstance(names, list) or not names or not all(isinstance(name, str) and name for name in names):
        raise ContaminationError(
            f"pdd_contamination: metadata source_tasks={names!r}: expected the lm-eval tasks, groups or tags to test, "
            'e.g. --metadata \'{"source_tasks": ["arc_easy", "mmlu"]}\', or leave it out to test the run\'s other tasks.'
        )
    if len(set(names)) != len(names):
        raise ContaminationError(f"pdd_contamination: source_tasks={names!r} names a task twice; name each once.")
    return names


def settings_per_test(metadata: dict) -> dict[str, dict]:
    """The tests to run, each with its settings block (``{}`` where none is given), checked."""
    tests = metadata.get("tests", list(DATASET_TESTS))
    if not isinstance(tests, list) or not tests or any(test not in DATASET_TESTS for test in tests):
        raise ContaminationError(
            f"pdd_contamination: metadata tests={tests!r}: expected a non-empty list of {', '.join(DATASET_TESTS)}."
        )
    for key in metadata:
        readers = [name for name, test in DATASET_TESTS.items() if key in {s.name for s in test.all_settings}]
        if readers and key not in CONTAMINATION_KEYS:
            raise ContaminationError(
                f"pdd_contamination: metadata {key!r} is a setting of {' and '.join(readers)}, not of "
                f"pdd_contamination: give it in the test's block, e.g. --metadata "
                f'\'{{"source_tasks": [...], "{readers[0]}": {{"{key}": {json.dumps(metadata[key])}}}}}\'.'
            )
    blocks = {}
    for test in tests:
        own = metadata.get(test) or {}
        if not isinstance(own, dict):
            raise ContaminationError(
                f"pdd_contamination: metadata {test}={own!r}: expected the settings of pdd_{test} as an object, "
                f'e.g. {{"{test}": {{"seed": 1}}}}.'
            )
        blocks[test] = own
    for name in DATASET_TESTS:
        if name not in blocks and metadata.get(name):
            logger.warning("pdd_contamination: settings of %s given, but %s is not in tests=%s.", name, name, tests)
    return blocks


def reference_tasks(metadata: dict, names: list[str], tests: list[str]) -> dict[str, str]:
    """``references``: source task -> the lm-eval task of its known-unseen examples, checked."""
    references = metadata.get("references") or {}
    example = '--metadata \'{"source_tasks": ["arc_easy"], "references": {"arc_easy": "arc_easy_fresh"}}\''
    if not isinstance(references, dict) or not all(
        isinstance(task, str) and isinstance(reference, str) and reference for task, reference in references.items()
    ):
        raise ContaminationError(
            f"pdd_contamination: metadata references={references!r}: expected an object mapping a source task to the "
            f"lm-eval task of known-unseen examples of its kind, e.g. {example}."
        )
    unknown = [task for task in references if task not in names]
    if unknown:
        raise ContaminationError(
            f"pdd_contamination: references names {unknown}, not in source_tasks {names}: a reference belongs to a "
            f"tested task; e.g. {example}."
        )
    tested = [reference for reference in references.values() if reference in names]
    if tested:
        raise ContaminationError(
            f"pdd_contamination: {tested} is both a source task and a reference: a reference holds examples the "
            "model has not seen, so it is not tested itself. Take it out of source_tasks or references."
        )
    takers = [test for test in tests if DATASET_TESTS[test].compares_to_reference]
    if references and not takers:
        raise ContaminationError(
            f"pdd_contamination: references are given but none of tests={tests} compares to a reference "
            f"({', '.join(n for n, t in DATASET_TESTS.items() if t.compares_to_reference)} does): add it to tests."
        )
    return references


#: The one-line message where pdd_contamination has nothing to check.
NOTHING_TO_CHECK = (
    "pdd_contamination: no task to check: source_tasks is not given and the run has no other task. Add the tasks "
    "to check to the run (lm_eval --tasks arc_easy,gsm8k,pdd_contamination) or name them: "
    '--metadata \'{"source_tasks": ["arc_easy", "gsm8k"]}\'.'
)


class ContaminationTask(DatasetTestTask):
    """``pdd_contamination``: each test of ``tests`` on each leaf task of ``source_tasks`` (tasks, groups and
    tags: :mod:`pdd_tasks.loading.task_groups`), or without it, on each other task of the run
    (:meth:`see_run_tasks`, before the run's evaluation starts)."""

    def build(self) -> tuple[list[dict], list[tuple], dict]:
        metadata = self.run_metadata
        names = source_task_names(metadata)
        blocks = settings_per_test(metadata)
        check_metadata_keys(metadata, set(CONTAMINATION_KEYS) | set(DATASET_TESTS), self.test_task_name)
        self.test_settings = {}
        for test, own in blocks.items():
            if any(key in own for key in source_keys()):
                raise SettingError(
                    f"pdd_contamination: {test}: the source of the examples ({', '.join(k for k in source_keys() if k in own)}) "
                    "is not a setting of one test: name the tasks in source_tasks (and source_include_path) at the top level."
                )
            defaults = DATASET_TESTS[test].contamination_defaults
            self.test_settings[test] = read_settings(
                DATASET_TESTS[test], {**defaults, **own}, f"pdd_contamination: {test}", strict=True
            )
        self.include = metadata.get("source_include_path") or None
        #: Whether the sources are the run's tasks, still to be seen (:meth:`see_run_tasks`).
        self.pending = names is None
        self.run_tasks: dict = {}
        if self.pending:
            return [{"test": None, "source_task": None}], [], {}
        reference_tasks(metadata, names, list(blocks))  # the settings checked before anything is loaded
        return self.build_sources(task_groups.from_names(names, self.include))

    def see_run_tasks(self, tasks: dict, groups: dict[str, list[str]]) -> None:
        """Without ``source_tasks``: the sources are the run's leaf tasks (``tasks``, name -> built task; its
        groups as group -> direct children), but the pdd tasks and the references; called by patch
        ``run-tasks-to-contamination`` before the run's evaluation starts. With ``source_tasks``, nothing."""
        if not self.pending:
            return
        references = self.run_metadata.get("references")
        leave_out = set(references.values()) if isinstance(references, dict) else set()
        sources = task_groups.from_run(tasks, groups, leave_out)
        if not sources.leaves:
            raise ContaminationError(NOTHING_TO_CHECK)
        self.run_tasks = tasks
        documents, metrics, recorded = self.build_sources(sources)
        self.documents = document_rows(documents)
        self.download()
        self.task_docs = self.eval_docs
        self.features = list(self.task_docs.features.keys())
        self.config.metric_list = metric_list(metrics)
        for name, aggregate, higher in metrics:  # as ConfigurableTask.__init__ reads a metric_list with process_results
            self._metric_fn_list[name], self._metric_fn_kwargs[name] = None, {}
            self._aggregation_list[name], self._higher_is_better[name] = aggregate, higher
        self.config.metadata.update(recorded)
        self.pending = False

    def build_sources(self, sources: task_groups.SourceTasks) -> tuple[list[dict], list[tuple], dict]:
        """(documents, metrics, what the results JSON records) of every test on every leaf of ``sources``;
        a leaf that could not be loaded is recorded with the reason, each test "not applicable" to it."""
        metadata = self.run_metadata
        names = list(sources.leaves)
        references = reference_tasks(metadata, names, list(self.test_settings))
        model = model_window(metadata)
        documents, metrics, summary, planned, tokens = [], [], {}, {}, 0
        for name, leaf in sources.leaves.items():
            summary[name] = {"examples": len(leaf.examples or [])} | ({"group": leaf.group} if leaf.group else {})
            if leaf.problem is not None:
                logger.warning("pdd_contamination: %s is not tested: %s", name, leaf.problem)
                summary[name]["not_loaded"] = leaf.problem
                for test_name in self.test_settings:
                    summary[name][test_name] = {"not_applicable": f"the task could not be loaded: {leaf.problem}"}
                continue
            examples, source = leaf.examples, f"lm-eval task {name}"
            for test_name, own in self.test_settings.items():
                test = DATASET_TESTS[test_name]
                where = f"pdd_contamination: {test_name} on {name}"
                try:
                    built, summary[name][test_name], planned[(name, test_name)] = prepare(
                        test, own, examples, source, model, where
                    )
                    tokens += request_tokens(test, own, built, model) if model is not None else 0
                except NotApplicable as error:
                    logger.warning("pdd_contamination: %s is not tested on %s: %s", test_name, name, error)
                    summary[name][test_name] = {"not_applicable": str(error)}
                    continue
                self.settings[(name, test_name)] = own
                documents += [{"test": test_name, "source_task": name, **doc} for doc in built]
                metrics += [(source_metric(m, name), aggregate, higher) for m, (aggregate, higher) in test.metrics.items()]  # fmt: skip
                if test.compares_to_reference and name in references:
                    built, summary[name][test_name]["reference"], planned[(name, f"{test_name} reference")] = (
                        self.reference(test, own, references[name], model, where, examples, name)
                    )
                    documents += [{"test": test_name, "source_task": name, "role": "reference", **doc} for doc in built]
                    tokens += request_tokens(test, own, built, model) if model is not None else 0
                    metrics += [
                        (source_metric(reference_metric(m), name), aggregate, higher)
                        for m, (aggregate, higher) in test.metrics.items()
                    ]
        if not documents:
            problems = [leaf.problem for leaf in sources.leaves.values() if leaf.problem]
            if len(problems) == len(names):
                raise ContaminationError(f"pdd_contamination: no task of {names} could be loaded: {problems[0]}")
            raise ContaminationError(
                f"pdd_contamination: no test applies to any of {names} (see the warnings above); "
                "give tasks with more examples, or fewer shards / in-context examples."
            )
        if sources.groups:
            logger.info("pdd_contamination: %d tasks from the groups %s.", len(names), ", ".join(sources.groups))
        logger.info("%s", planned_line(planned, tokens if model is not None else None))
        return documents, metrics, {"contamination": summary, "contamination_groups": sources.groups}

    def reference_examples(self, reference: str, source: str) -> tuple[list[str], str]:
        """The examples of reference task ``reference`` (of source task ``source``: the messages name the
        reference and its ``references`` entry): the run's own task of that name where the run has one, else
        loaded by name (with ``source_include_path``)."""
        if reference in self.run_tasks:
            examples = examples_of_task(self.run_tasks[reference], reference, reference_of=source)
        else:
            examples = examples_from_task(reference, self.include, reference_of=source)
        return examples, f"lm-eval task {reference}"

    def reference(self, test: DatasetTest, settings, reference: str, model, where: str, tested: list[str], source: str):
        """``(documents, summary, planned requests)`` of ``test`` on the reference task ``reference``, with the
        source task's settings. A test that cannot apply to it is an error, and so is an example it shares
        with the ``tested`` examples: the run asked for a comparison with examples the model has not seen."""
        examples, description = self.reference_examples(reference, source)
        shared = set(examples) & set(tested)
        if shared:
            raise ContaminationError(
                f"{where}: {len(shared)} example(s) of the reference {reference} are also examples of the task tested "
                f"(e.g. {excerpt(next(iter(shared)))}); a reference holds examples the model cannot have seen. "
                "Remove them from the reference."
            )
        try:
            documents, summary, planned = prepare(
                test, settings, examples, description, model, f"{where} (reference {reference})"
            )
        except NotApplicable as error:
            raise ContaminationError(
                f"{where}: the reference {reference} cannot be scored: {error} Give a reference with more examples."
            ) from None
        return documents, {"task": reference, **summary}, planned

    def build_all_requests(self, **kwargs) -> None:
        """As every dataset-level test's, and ``--limit`` refused: it would cut the one list of every
        test's documents, leaving some tasks and tests out."""
        if self.pending:
            raise ContaminationError(
                "pdd_contamination: source_tasks is not given and the run's tasks never reached it (its evaluation was "
                "started without lm-eval's evaluator.evaluate, patched by pdd_tasks.lm_eval_patches.apply()). Name the "
                'tasks to check: --metadata \'{"source_tasks": ["arc_easy", "gsm8k"]}\'.'
            )
        if kwargs.get("limit") is not None:
            raise ContaminationError(
                "pdd_contamination: --limit would cut the documents of all source tasks and tests as one list. Remove "
                'it, and make the tests smaller with their settings: --metadata \'{"source_tasks": [...], "codec": '
                '{"max_examples": 200}, "exchangeability": {"num_shards": 10, "permutations": 10}}\'.'
            )
        super().build_all_requests(**kwargs)
