"""``pdd_exchangeability``: was a benchmark seen in its published order? (Oren et al., ICLR 2024)

The sharded likelihood comparison test of "Proving Test Set Contamination in Black Box Language
Models" (Oren, Meister, Chatterji, Ladhak, Hashimoto; ICLR 2024), run as an lm-eval task on a
benchmark's own examples, with no reference set. The statistic is
:func:`pdd_metrics.exchangeability.sharded_comparison_test`; this module builds the requests.

Documents: the examples in their **canonical order**: a local file in file order or any lm-eval
task's evaluation documents in the task's order, rendered as the model sees them there
(:mod:`pdd_tasks.loading.examples`).

What is scored, and why: the reference code tokenizes each example, concatenates a shard's examples
in the given order into **one token sequence** and sums the log-probabilities of that sequence, so
every example is scored with the examples before it *in that order* as context. That context is what
a model that memorised the file exploits (after example k it predicts example k+1); scoring examples
one by one would give the same sum for every order and test nothing. Here each order of a shard is
one ordinary ``loglikelihood`` request: empty context, continuation = the shard's examples in that
order joined by ``separator`` (default ``"\\n"``: the reference reads one example per line and keeps
the line ends). The harness scores it after the model's start token, so the first example's first
token is scored too (the reference code skips it); the test stays valid because every order of a
shard is scored the same way. Each shard (in any order) must fit the model's context window (the
reference code slides a window instead); where the command names an HF model
(``--model_args pretrained=...``) this is checked before any model work.

One document per shard; its requests are the canonical order then ``permutations`` random orders
(:func:`pdd_metrics.exchangeability.shard_permutations`, seeded by ``seed`` and the shard index).
``--limit N`` scores the first N shards.

    lm_eval --model hf --model_args pretrained=<model> --include_path "$(lm-eval-pdd tasks-path)" \\
      --tasks pdd_exchangeability --metadata '{"source_task": "arc_easy", "num_shards": 50}'
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
from lm_eval.api.task import ConfigurableTask

from pdd_metrics.exchangeability import (
    DEFAULT_NUM_SHARDS,
    DEFAULT_PERMUTATIONS,
    TooFewExamples,
    shard_bounds,
    shard_permutations,
    sharded_comparison_test,
)
from pdd_tasks import lm_eval_patches
from pdd_tasks.errors import UserError
from pdd_tasks.loading.examples import ExampleSource


logger = logging.getLogger(__name__)

_CITATION = """@inproceedings{oren2024proving,
  title={Proving Test Set Contamination in Black-Box Language Models},
  author={Oren, Yonatan and Meister, Nicole and Chatterji, Niladri S. and Ladhak, Faisal and Hashimoto, Tatsunori B.},
  booktitle={The Twelfth International Conference on Learning Representations},
  year={2024}
}"""


class ExchangeabilityError(UserError):
    """A setting is not usable; the message names the fix (a source of examples that is not:
    :class:`pdd_tasks.loading.examples.ExampleSourceError`).

    pdd_metrics' own errors (``TooFewExamples``) reach the user as this class, with their message."""


def _whole(name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ExchangeabilityError(f"metadata {name}={value!r}: expected a whole number >= {minimum}.")
    return value


@dataclass(frozen=True)
class ExchangeabilitySettings:
    """The task's metadata (YAML ``metadata:`` or ``--metadata``), checked.

    Attributes:
        num_shards: r, shards of consecutive examples (reference code: 50).
        permutations: P, random orders scored per shard (reference code: 250).
        seed: seeds the random orders (reference code: 0).
        separator: joins a shard's examples into one text (default "\\n").
        max_examples: score only the first N examples (default: all; the reference code: 5000).
        source: where the examples come from (``data_files`` or ``source_task``, with their keys).
    """

    source: ExampleSource
    num_shards: int = DEFAULT_NUM_SHARDS
    permutations: int = DEFAULT_PERMUTATIONS
    seed: int = 0
    separator: str = "\n"
    max_examples: int | None = None

    @classmethod
    def from_metadata(cls, metadata: dict) -> ExchangeabilitySettings:
        settings = cls(
            num_shards=_whole("num_shards", metadata.get("num_shards", DEFAULT_NUM_SHARDS), 2),
            permutations=_whole("permutations", metadata.get("permutations", DEFAULT_PERMUTATIONS), 1),
            seed=_whole("seed", metadata.get("seed", 0), 0),
            separator=metadata.get("separator", "\n"),
            max_examples=(
                None if metadata.get("max_examples") is None else _whole("max_examples", metadata["max_examples"], 4)
            ),
            source=ExampleSource.from_metadata(metadata, "pdd_exchangeability"),
        )
        if not isinstance(settings.separator, str):
            raise ExchangeabilityError(f'metadata separator={settings.separator!r}: expected a string, e.g. "\\n".')
        return settings


# -- the examples, in canonical order (pdd_tasks.loading.examples) ---------------------------------


def first_examples(examples: list[str], settings: ExchangeabilitySettings, source: str) -> list[str]:
    """The first ``max_examples`` of the examples (all of them by default)."""
    if settings.max_examples is not None and len(examples) > settings.max_examples:
        logger.warning(
            "pdd_exchangeability: scoring the first %d of the %d examples of %s (max_examples).",
            settings.max_examples,
            len(examples),
            source,
        )
        return examples[: settings.max_examples]
    return examples


# -- metrics: aggregations over the per-shard items ------------------------------------------------
# Every metric's per-document value is the same item: (canonical log-likelihood, the permuted
# log-likelihoods, number of examples in the shard).


def _test(items):
    if len(items) < 2:
        raise ExchangeabilityError(
            f"pdd_exchangeability: {len(items)} shard(s) were scored, but the test compares at least 2. "
            "Drop --limit, or give a --limit of at least 2 (it counts shards)."
        )
    canonical = [item[0] for item in items]
    permuted = [item[1] for item in items]
    return sharded_comparison_test(canonical, permuted)


def exchangeability_pvalue(items) -> float:
    return _test(items).p_value


def exchangeability_t(items) -> float:
    return _test(items).t_statistic


def exchangeability_mean_difference(items) -> float:
    return _test(items).mean_difference


def exchangeability_shards(items) -> int:
    return len(items)


def exchangeability_permutations(items) -> int:
    return len(items[0][1])


def exchangeability_examples(items) -> int:
    return int(sum(item[2] for item in items))


METRICS = {
    "exchangeability_pvalue": (exchangeability_pvalue, False),
    "exchangeability_t": (exchangeability_t, True),
    "exchangeability_mean_difference": (exchangeability_mean_difference, True),
    "exchangeability_shards": (exchangeability_shards, True),
    "exchangeability_permutations": (exchangeability_permutations, True),
    "exchangeability_examples": (exchangeability_examples, True),
}


# -- documents and requests -------------------------------------------------------------------------


def shard_documents(
    examples: list[str], bounds: list[tuple[int, int]], settings: ExchangeabilitySettings
) -> list[dict]:
    """One document per shard: its index, first example, examples and their joined text."""
    return [
        {
            "shard": shard,
            "start": start,
            "examples": examples[start:stop],
            "text": settings.separator.join(examples[start:stop]),
        }
        for shard, (start, stop) in enumerate(bounds)
    ]


def shard_orders(doc: dict, settings: ExchangeabilitySettings) -> list[list[int]]:
    """The canonical order of a shard, then its random orders (indices into its examples)."""
    size = len(doc["examples"])
    permuted = shard_permutations(size, settings.permutations, settings.seed, doc["shard"])
    return [list(range(size))] + permuted.tolist()


def exchangeability_arguments(doc: dict, settings: ExchangeabilitySettings) -> list[tuple[str, str]]:
    """The (context, continuation) of a shard's requests: empty context, the shard's examples joined in
    each order of :func:`shard_orders`."""
    return [("", settings.separator.join(doc["examples"][i] for i in order)) for order in shard_orders(doc, settings)]


def exchangeability_item(doc: dict, results: list) -> tuple:
    """A shard's item of every metric: (canonical log-likelihood, the permuted ones, examples in it)."""
    logprobs = [float(result[0]) if isinstance(result, tuple) else float(result) for result in results]
    return (logprobs[0], tuple(logprobs[1:]), len(doc["examples"]))


def check_context_window(
    examples: list[str], bounds: list[tuple[int, int]], settings: ExchangeabilitySettings, metadata: dict
) -> int | None:
    """Where ``--model_args pretrained=...`` names an HF model whose tokenizer and config load here,
    refuse a shard longer than the model's context window before any model work; the longest shard's
    length in tokens (None where there is no such model to check with)."""
    name = metadata.get("tokenizer") or metadata.get("pretrained")
    if not isinstance(name, str):
        return None
    try:
        from transformers import AutoConfig, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name)
        config = AutoConfig.from_pretrained(metadata.get("pretrained") or name)
    except Exception as error:  # a Hub name offline, a GGUF directory, another backend's name
        logger.debug("pdd_exchangeability: no context-window check for %r: %s", name, error)
        return None
    window = metadata.get("max_length") or next(
        (getattr(config, key) for key in ("max_position_embeddings", "n_positions") if hasattr(config, key)),
        None,
    )
    if not isinstance(window, int):
        return None
    lengths = [len(tokenizer(settings.separator.join(examples[a:b])).input_ids) + 1 for a, b in bounds]
    longest = int(np.argmax(lengths))
    if lengths[longest] > window:
        raise ExchangeabilityError(
            f"pdd_exchangeability: shard {longest} ({bounds[longest][1] - bounds[longest][0]} "
            f"examples) is {lengths[longest]} tokens, more than the model's context window of {window}: "
            "each shard, in every order, is scored as one sequence. Use more shards "
            f"(--metadata '{{\"num_shards\": {settings.num_shards * (lengths[longest] // window + 1)}}}') "
            "or fewer examples (max_examples)."
        )
    return max(lengths)


# -- the task ---------------------------------------------------------------------------------------


class ExchangeabilityTask(ConfigurableTask):
    """One document per shard; requests: the shard in canonical order, then in P random orders."""

    def __init__(self, config: dict) -> None:
        lm_eval_patches.apply()
        config = dict(config)
        config.pop("class", None)
        metadata = dict(config.get("metadata") or {})
        self.settings = ExchangeabilitySettings.from_metadata(metadata)
        loaded, self.source = self.settings.source.load()
        self.examples = first_examples(loaded, self.settings, self.source)
        try:
            self.bounds = shard_bounds(len(self.examples), self.settings.num_shards)
        except TooFewExamples as error:
            raise ExchangeabilityError(f"pdd_exchangeability ({self.source}): {error}") from None
        config["metric_list"] = [
            {"metric": name, "aggregation": aggregate, "higher_is_better": higher}
            for name, (aggregate, higher) in METRICS.items()
        ]
        config["process_results"] = self.process_results
        super().__init__(config=config)
        self.config.metadata["exchangeability_source"] = {"source": self.source, "examples": len(self.examples)}
        longest = check_context_window(self.examples, self.bounds, self.settings, metadata)
        if longest is not None:
            self.config.metadata["exchangeability_source"]["longest_shard_tokens"] = longest

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        self.dataset = {
            self.config.test_split: datasets.Dataset.from_list(
                shard_documents(self.examples, self.bounds, self.settings)
            )
        }

    def build_all_requests(self, **kwargs) -> None:
        """lm-eval's request building, after refusing ``--limit 0`` and chat templates (each order of a
        shard is scored as plain text after the start token, like the reference code)."""
        from pdd_tasks.tasks.base import refuse_run_options

        refuse_run_options(self.config.task, **kwargs)
        super().build_all_requests(**kwargs)

    def construct_requests(self, doc: dict, ctx, **kwargs) -> list:
        from pdd_tasks.tasks.base import loglikelihood_requests

        return loglikelihood_requests(
            self.config.task, doc, doc["shard"], exchangeability_arguments(doc, self.settings), **kwargs
        )

    def process_results(self, doc: dict, results: list) -> dict:
        return dict.fromkeys(METRICS, exchangeability_item(doc, results))
