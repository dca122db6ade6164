"""``pdd_contamination``: CoDeC and the exchangeability test on each of several lm-eval tasks, in one run.

Beside ``lm_eval --tasks arc_easy,gsm8k``, ``--tasks arc_easy,gsm8k,pdd_contamination`` with
``--metadata '{"source_tasks": ["arc_easy", "gsm8k"]}'`` asks of each named task whether the model
has seen it, with two tests that need no reference set:

- CoDeC (:mod:`pdd_tasks.tasks.codec`, Zawalski et al., ICLR 2026): ``codec_*/<task>`` metrics;
- the sharded likelihood comparison test (:mod:`pdd_tasks.tasks.exchangeability`, Oren et al.,
  ICLR 2024): ``exchangeability_*/<task>`` metrics.

Each task's examples are read once (:mod:`pdd_tasks.loading.examples`, rendered as in that task) and
each test builds its documents and requests exactly as its own task does, with its own settings
(``codec: {...}``, ``exchangeability: {...}`` in the metadata, the keys of ``pdd_codec`` and
``pdd_exchangeability``). Where a test cannot apply to a task (too few examples for the shards or
the in-context examples; a shard longer than the model's context window, checked as
``pdd_exchangeability`` checks it) it is left out for that task with a warning, and the results JSON's
``configs.pdd_contamination.metadata.contamination`` says why.

    lm_eval --model hf --model_args pretrained=<model> --include_path "$(lm-eval-pdd tasks-path)" \\
      --tasks arc_easy,gsm8k,pdd_contamination --metadata '{"source_tasks": ["arc_easy", "gsm8k"]}'
"""

from __future__ import annotations

import logging

import datasets
from lm_eval.api.task import ConfigurableTask

from pdd_metrics.exchangeability import TooFewExamples, shard_bounds
from pdd_tasks import lm_eval_patches
from pdd_tasks.errors import UserError
from pdd_tasks.loading.examples import ExampleSource
from pdd_tasks.tasks import codec, exchangeability
from pdd_tasks.tasks.aggregations import CODEC_AGGREGATIONS


logger = logging.getLogger(__name__)

#: The tests ``pdd_contamination`` runs on each source task, by the name of their settings key.
TESTS = ("codec", "exchangeability")


class ContaminationError(UserError):
    """A setting of ``pdd_contamination`` is not usable; the message names the fix."""


def _source_tasks(metadata: dict) -> list[str]:
    names = metadata.get("source_tasks")
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    if not isinstance(names, list) or not names or not all(isinstance(name, str) and name for name in names):
        raise ContaminationError(
            f"pdd_contamination: metadata source_tasks={names!r}: expected the lm-eval tasks to test, e.g. "
            '--metadata \'{"source_tasks": ["arc_easy", "gsm8k"]}\'.'
        )
    if len(set(names)) != len(names):
        raise ContaminationError(f"pdd_contamination: source_tasks={names!r} names a task twice; name each once.")
    return names


def _test_settings(metadata: dict) -> dict[str, dict]:
    tests = metadata.get("tests", list(TESTS))
    if not isinstance(tests, list) or not tests or any(test not in TESTS for test in tests):
        raise ContaminationError(
            f"pdd_contamination: metadata tests={tests!r}: expected a non-empty list of {', '.join(TESTS)}."
        )
    settings = {}
    for test in tests:
        own = metadata.get(test) or {}
        if not isinstance(own, dict):
            raise ContaminationError(
                f"pdd_contamination: metadata {test}={own!r}: expected the settings of pdd_{test} as an object, "
                f'e.g. {{"{test}": {{"seed": 1}}}}.'
            )
        settings[test] = own
    return settings


def metric_name(metric: str, source_task: str) -> str:
    """A test's metric for one source task, e.g. ``codec_score/arc_easy``."""
    return f"{metric}/{source_task}"


class ContaminationTask(ConfigurableTask):
    """Documents of every (source task, test): CoDeC's examples and the exchangeability test's shards."""

    def __init__(self, config: dict) -> None:
        lm_eval_patches.apply()
        config = dict(config)
        config.pop("class", None)
        metadata = self.run_metadata = dict(config.get("metadata") or {})
        self.source_tasks = _source_tasks(metadata)
        tests = _test_settings(metadata)
        include = metadata.get("source_include_path") or None
        self.documents, self.settings, self.summary, metrics = [], {}, {}, []
        for name in self.source_tasks:
            examples, source = ExampleSource(source_task=name, source_include_path=include).load()
            self.summary[name] = {"examples": len(examples)}
            for test, own in tests.items():
                built = self._build(test, name, examples, source, {**own, "source_task": name})
                if built is None:
                    continue
                documents, aggregations = built
                self.documents += [{"test": test, "source_task": name, **doc} for doc in documents]
                metrics += [(metric_name(metric, name), aggregate, higher) for metric, (aggregate, higher) in aggregations.items()]  # fmt: skip
        if not self.documents:
            raise ContaminationError(
                f"pdd_contamination: no test applies to any of {self.source_tasks} (see the warnings above); "
                "give tasks with more examples, or fewer shards / in-context examples."
            )
        keys = sorted({key for doc in self.documents for key in doc})
        self.documents = [
            {key: doc.get(key) for key in keys} | {"doc_index": i} for i, doc in enumerate(self.documents)
        ]
        config["metric_list"] = [
            {"metric": name, "aggregation": aggregate, "higher_is_better": higher}
            for name, aggregate, higher in metrics
        ]
        config["process_results"] = self.process_results
        super().__init__(config=config)
        self.config.metadata["contamination"] = self.summary

    def _build(self, test: str, name: str, examples: list[str], source: str, own: dict):
        """(documents, aggregations) of ``test`` on source task ``name``, or None where it cannot apply
        (too few examples; a shard longer than the model's context window). A bad setting is an error."""
        if test == "codec":
            settings = codec.CodecSettings.from_metadata(own)
        else:
            settings = exchangeability.ExchangeabilitySettings.from_metadata(own)
        try:
            if test == "codec":
                selected = codec.select_examples(examples, settings, source)
                documents = codec.codec_documents(selected, settings, source)
                self.summary[name]["codec"] = codec.codec_summary(selected, documents, source)
                aggregations = CODEC_AGGREGATIONS
            else:
                first = exchangeability.first_examples(examples, settings, source)
                bounds = shard_bounds(len(first), settings.num_shards)
                longest = exchangeability.check_context_window(first, bounds, settings, self.run_metadata)
                documents = exchangeability.shard_documents(first, bounds, settings)
                self.summary[name]["exchangeability"] = {"examples": len(first), "shards": len(bounds)}
                if longest is not None:
                    self.summary[name]["exchangeability"]["longest_shard_tokens"] = longest
                aggregations = exchangeability.METRICS
        except (codec.CodecError, exchangeability.ExchangeabilityError, TooFewExamples) as error:
            logger.warning("pdd_contamination: %s is not tested on %s: %s", test, name, error)
            self.summary[name][test] = {"not_applicable": str(error)}
            return None
        self.settings[(name, test)] = settings
        return documents, aggregations

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        self.dataset = {self.config.test_split: datasets.Dataset.from_list(self.documents)}

    def build_all_requests(self, **kwargs) -> None:
        """lm-eval's request building, after refusing chat templates and ``--limit`` (it would cut the
        one list of every test's documents, leaving some tasks and tests out)."""
        from pdd_tasks.tasks.base import refuse_run_options

        refuse_run_options(self.config.task, **kwargs)
        if kwargs.get("limit") is not None:
            raise ContaminationError(
                "pdd_contamination: --limit would cut the documents of all source tasks and tests as one list. Remove "
                'it, and make the tests smaller with their settings: --metadata \'{"source_tasks": [...], "codec": '
                '{"max_examples": 200}, "exchangeability": {"num_shards": 10, "permutations": 10}}\'.'
            )
        super().build_all_requests(**kwargs)

    def construct_requests(self, doc: dict, ctx, **kwargs) -> list:
        from pdd_tasks.tasks.base import loglikelihood_requests

        settings = self.settings[(doc["source_task"], doc["test"])]
        if doc["test"] == "codec":
            arguments = codec.codec_arguments(doc)
        else:
            arguments = exchangeability.exchangeability_arguments(doc, settings)
        return loglikelihood_requests(self.config.task, doc, doc["doc_index"], arguments, **kwargs)

    def process_results(self, doc: dict, results: list) -> dict:
        name = doc["source_task"]
        if doc["test"] == "codec":
            return {metric_name(metric, name): codec.codec_delta(results) for metric in CODEC_AGGREGATIONS}
        item = exchangeability.exchangeability_item(doc, results)
        return {metric_name(metric, name): item for metric in exchangeability.METRICS}
