"""The sharded likelihood comparison test: was a benchmark seen in its published order? (Oren et al., ICLR 2024)
-- the registry entry.

"Proving Test Set Contamination in Black Box Language Models" (Oren, Meister, Chatterji, Ladhak,
Hashimoto; ICLR 2024), on a benchmark's own examples, with no reference set. The statistic is
:func:`pdd_metrics.exchangeability.sharded_comparison_test`; this entry builds the shards and their
orders. Run alone as ``pdd_exchangeability``, and inside ``pdd_contamination``
(:mod:`pdd_tasks.tasks.dataset_level`).

Documents: the examples in their **canonical order**: a local file in file order or any lm-eval
task's evaluation documents in the task's order, rendered as the model sees them there
(:mod:`pdd_tasks.loading.examples`). Repeats are kept (the object of the test is the file as
published) and reported.

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
"""

from __future__ import annotations

import logging

import numpy as np

from pdd_metrics.combine import fisher_combined_pvalue
from pdd_metrics.exchangeability import (
    DEFAULT_NUM_SHARDS,
    DEFAULT_PERMUTATIONS,
    MIN_EXAMPLES_PER_SHARD,
    TooFewExamples,
    shard_bounds,
    shard_permutations,
    sharded_comparison_test,
)
from pdd_metrics.verdict import Evidence
from pdd_tasks.dataset_tests.core import DatasetTest, NotApplicable, Reading, or_null, register, string
from pdd_tasks.registry import Setting, as_whole, whole_number, whole_number_or_zero


logger = logging.getLogger(__name__)

CITATION = """@inproceedings{oren2024proving,
  title={Proving Test Set Contamination in Black-Box Language Models},
  author={Oren, Yonatan and Meister, Nicole and Chatterji, Niladri S. and Ladhak, Faisal and Hashimoto, Tatsunori B.},
  booktitle={The Twelfth International Conference on Learning Representations},
  year={2024}
}"""


class ExchangeabilityError(NotApplicable):
    """The test cannot run on these examples (too few for the shards, a shard longer than the context
    window, fewer than 2 shards scored); the message names the fix."""


def _at_least(minimum: int):
    def check(name: str, value) -> int:
        whole = as_whole(value)
        if whole is None or whole < minimum:
            raise ValueError(f"metadata {name}={value!r}: expected a whole number >= {minimum}.")
        return whole

    check.__doc__ = f"A whole number >= {minimum}."
    return check


SETTINGS = (
    Setting(
        "num_shards", DEFAULT_NUM_SHARDS, _at_least(2), "r, shards of consecutive examples (reference code: 50)."
    ),  # fmt: skip
    Setting(
        "permutations", DEFAULT_PERMUTATIONS, whole_number, "P, random orders scored per shard (reference code: 250)."
    ),  # fmt: skip
    Setting("seed", 0, whole_number_or_zero, "seeds the random orders (reference code: 0)."),
    Setting("separator", "\n", string(non_empty=False), 'joins a shard\'s examples into one text (default "\\n").'),
    Setting(
        "max_examples",
        None,
        or_null(_at_least(2 * MIN_EXAMPLES_PER_SHARD)),
        "score only the first N examples (default: all; the reference code: 5000).",
    ),
)


def unchanged(examples: list[str], settings, source: str) -> list[str]:
    return examples


def first_examples(examples: list[str], settings, source: str) -> list[str]:
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


def planned_requests(examples: int, settings) -> tuple[int, str]:
    """One request per order of each shard: the canonical one and ``permutations`` random ones."""
    return (
        settings.num_shards * (settings.permutations + 1),
        f"num_shards {settings.num_shards:,} x (permutations {settings.permutations:,} + 1)",
    )


def check_context_window(examples: list[str], bounds: list[tuple[int, int]], settings, model) -> int | None:
    """Where the run's model is known, refuse a shard longer than its context window before any model
    work, naming an example that alone does not fit; the longest shard's length in tokens (None where
    the model is unknown)."""
    if model is None:
        return None
    lengths = [model.length(settings.separator.join(examples[a:b])) for a, b in bounds]
    longest = int(np.argmax(lengths))
    if lengths[longest] <= model.window:
        return max(lengths)
    start, stop = bounds[longest]
    alone = [(index, model.length(examples[index])) for index in range(start, stop)]
    too_long = [(index, tokens) for index, tokens in alone if tokens > model.window]
    if too_long:
        index, tokens = too_long[0]
        raise ExchangeabilityError(
            f"pdd_exchangeability: example {index} alone is {tokens:,} tokens, more than the model's context "
            f"window of {model.window:,}, so no shard that holds it can be scored as one sequence. Remove it from "
            f"the examples (or render them shorter with a template); more shards cannot help."
        )
    needed = settings.num_shards * (lengths[longest] // model.window + 1)
    most = len(examples) // MIN_EXAMPLES_PER_SHARD
    fix = (
        f"Use more shards (--metadata '{{\"num_shards\": {needed}}}') or fewer examples (max_examples)"
        if needed <= most
        else f"Use fewer examples (max_examples) or shorter ones: even {most} shards of {MIN_EXAMPLES_PER_SHARD} "
        "examples may not fit"
    )
    raise ExchangeabilityError(
        f"pdd_exchangeability: shard {longest} ({stop - start} examples) is {lengths[longest]:,} tokens, more than "
        f"the model's context window of {model.window:,}: each shard, in every order, is scored as one sequence. "
        f"{fix}."
    )


def check_orders_differ(examples: list[str], bounds: list[tuple[int, int]], source: str) -> None:
    """Refuse examples where fewer than 2 shards hold two different texts: a shard of copies of one text
    reads the same in every order, so its canonical log-likelihood equals every permuted one and it
    carries no evidence either way (the t-test would report p = 1 as if the order had been tested); warn
    where some shards are such copies, as they pull the mean difference towards 0."""
    degenerate = [shard for shard, (start, stop) in enumerate(bounds) if len(set(examples[start:stop])) < 2]
    usable = len(bounds) - len(degenerate)
    if usable < 2:
        raise ExchangeabilityError(
            f"pdd_exchangeability ({source}): {len(degenerate)} of the {len(bounds)} shards hold copies of one text, so "
            "every order of them is the same text and the test has no order to compare: it does not apply (a p-value "
            "here would be 1 whatever the model saw). Give examples that differ (at least 2 shards with two different "
            "texts each), or fewer shards."
        )
    if degenerate:
        logger.warning(
            "pdd_exchangeability (%s): %d of the %d shards hold copies of one text (shards %s); every order of such a "
            "shard is the same text, so it adds no evidence and draws the mean difference towards 0.",
            source,
            len(degenerate),
            len(bounds),
            ", ".join(map(str, degenerate[:10])) + (", ..." if len(degenerate) > 10 else ""),
        )


def shard_documents(examples: list[str], settings, source: str, model=None) -> tuple[list[dict], dict]:
    """One document per shard (its index, first example, examples and their joined text), and the summary."""
    try:
        bounds = shard_bounds(len(examples), settings.num_shards)
    except TooFewExamples as error:
        raise ExchangeabilityError(f"pdd_exchangeability ({source}): {error}") from None
    check_orders_differ(examples, bounds, source)
    longest = check_context_window(examples, bounds, settings, model)
    documents = [
        {
            "shard": shard,
            "start": start,
            "examples": examples[start:stop],
            "text": settings.separator.join(examples[start:stop]),
        }
        for shard, (start, stop) in enumerate(bounds)
    ]
    summary = {"source": source, "examples": len(examples), "shards": len(bounds)}
    if longest is not None:
        summary["longest_shard_tokens"] = longest
    return documents, summary


def shard_orders(doc: dict, settings) -> list[list[int]]:
    """The canonical order of a shard, then its random orders (indices into its examples)."""
    size = len(doc["examples"])
    permuted = shard_permutations(size, settings.permutations, settings.seed, doc["shard"])
    return [list(range(size))] + permuted.tolist()


def exchangeability_arguments(doc: dict, settings) -> list[tuple[str, str]]:
    """The (context, continuation) of a shard's requests: empty context, the shard's examples joined in
    each order of :func:`shard_orders`."""
    return [("", settings.separator.join(doc["examples"][i] for i in order)) for order in shard_orders(doc, settings)]


def exchangeability_item(doc: dict, results: list) -> tuple:
    """A shard's item of every metric: (canonical log-likelihood, the permuted ones, examples in it)."""
    logprobs = [float(result[0]) if isinstance(result, tuple) else float(result) for result in results]
    return (logprobs[0], tuple(logprobs[1:]), len(doc["examples"]))


# -- metrics: aggregations over the per-shard items ------------------------------------------------


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


def exchangeability_group(readings) -> tuple[dict, None]:
    """A group's exchangeability values from its leaves' ``(values, reference)``: their p-values
    combined by Fisher's method (:func:`pdd_metrics.combine.fisher_combined_pvalue`: the leaves are
    disjoint files, each with its own seeded permutations, so their p-values are independent), the
    shards summed, and the number of leaves combined (``leaves``)."""
    values = [values for values, _ in readings]
    return {
        "exchangeability_pvalue": fisher_combined_pvalue(v["exchangeability_pvalue"] for v in values),
        "exchangeability_shards": sum(int(v["exchangeability_shards"]) for v in values),
        "leaves": len(values),
    }, None


def exchangeability_shown(values, reference) -> str:
    """``p 0.0012 over 50 shards``; a group's ``Fisher p 0.0012 of 3 leaves, 150 shards``."""
    p_value, shards = values["exchangeability_pvalue"], int(values["exchangeability_shards"])
    if "leaves" in values:
        return f"Fisher p {p_value:.2g} of {values['leaves']} leaves, {shards} shards"
    return f"p {p_value:.2g} over {shards} shards"


READING = Reading(
    label="exchangeability",
    detects="seen in its published order",
    result_keys=("exchangeability_pvalue", "exchangeability_shards"),
    evidence=lambda values, reference: Evidence(float(values["exchangeability_pvalue"])),
    shown=exchangeability_shown,
    evidence_anchor="controls-ordered.md#exchangeability-power",
    group=exchangeability_group,
)


EXCHANGEABILITY = register(
    DatasetTest(
        name="exchangeability",
        title="the exchangeability test",
        citation="Oren et al., Proving Test Set Contamination in Black-Box Language Models, ICLR 2024, Sec. 3",
        settings=SETTINGS,
        metrics=METRICS,
        normalise=unchanged,
        select=first_examples,
        planned_requests=planned_requests,
        cost_fix='e.g. {"num_shards": 20, "permutations": 100}; the reference code uses 50 x 250',
        documents=shard_documents,
        requests=exchangeability_arguments,
        item=exchangeability_item,
        reading=READING,
        # beside an eval, 1 permutation a shard: the check then costs about the eval (its cost is
        # (permutations + 1) passes over the file, whatever the shards), and the t-test holds its level
        # there (docs/performance.md, "What a check costs")
        contamination_defaults={"permutations": 1},
    )
)
