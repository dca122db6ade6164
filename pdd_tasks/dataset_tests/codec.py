"""CoDeC: was a benchmark in the training data? (Zawalski et al., ICLR 2026) -- the registry entry.

Contamination Detection via Context, "Detecting Data Contamination in LLMs via In-Context Learning"
(Zawalski, Boubdir, Balazy, Nushi, Ribalta; ICLR 2026, arXiv:2510.27055), on a benchmark's own
examples, with no reference set and no labels. The statistic is :mod:`pdd_metrics.codec`; this entry
says which examples are scored and what each request holds. Run alone as ``pdd_codec``, and inside
``pdd_contamination`` (:mod:`pdd_tasks.tasks.dataset_level`).

Examples (:mod:`pdd_tasks.loading.examples`), as the reference code
(``contamination_detection_pipeline``): each cut to ``max_chars`` characters at a word boundary and, of
more than ``max_examples``, a random subset (seeded) kept. Repeats are scored once (a copy in front of
its own text would be copied, not a context; ``keep_duplicates`` to score every copy).

One document per example long enough to score (more than ``skip_words`` words); two ordinary
``loglikelihood`` requests each, so the test runs on every backend:

- baseline: context = the example's first ``skip_words`` words, continuation = the rest;
- in context: context = its ``context_examples`` in-context examples (drawn at random from the other
  examples, seeded by ``seed`` and the example's index), joined by ``separator``, then ``separator``
  and the same first words; continuation = the same rest.

Both requests score the same continuation after the same words of the example, so Delta is their
difference (summed over the same tokens: the sign of the paper's difference of means). What is
scored: every token of the continuation, i.e. after the first ``skip_words`` words (8 by default, about
11 tokens of English text), the last token included. The first words stay unscored because the
reference code leaves the target's first tokens unscored: its ``CoDeC.detect_contamination`` averages
the slice ``[10:-1]`` (``token_range=(10, -1)``) of per-token log-probabilities whose entry ``i`` is the
log-probability of token ``i + 1`` (``ModelHandler.get_logprobs``: the sequence's first token gets none), so it
scores the target from its 12th token (the 11th where the tokenizer prepends a start token) to its
second-to-last. The first tokens of a text say little, and they would follow the start of the sequence
in one request and the separator in the other. Words rather than tokens keep the split tokenizer-free and at a
word boundary, which every backend's ``(context, continuation)`` encoding keeps intact.

Where the run's model is known (``--model_args pretrained=...``), an example whose baseline request
alone is longer than the model's context window is not scored and serves as no context (counted in
``too_long``, named in a warning): the backend could not score it, and cut from the left its in-context
request would lose the context it tests.
"""

from __future__ import annotations

import logging
import math
import re

import numpy as np

from pdd_metrics import codec
from pdd_metrics.codec import DEFAULT_CONTEXT_EXAMPLES, context_draws, fewest_examples_to_reject
from pdd_metrics.combine import pooled_codec
from pdd_metrics.verdict import ALPHA, CODEC_NULL_SCORE, Evidence, codec_evidence, codec_examples_needed
from pdd_tasks.dataset_tests.core import DatasetTest, NotApplicable, Reading, or_null, register, string
from pdd_tasks.registry import Setting, flag, whole_number, whole_number_or_zero, with_stderr


logger = logging.getLogger(__name__)

CITATION = """@inproceedings{zawalski2026codec,
  title={Detecting Data Contamination in {LLMs} via In-Context Learning},
  author={Zawalski, Micha{\\l} and Boubdir, Meriem and Ba{\\l}azy, Klaudia and Nushi, Besmira and Ribalta, Pablo},
  booktitle={The Fourteenth International Conference on Learning Representations},
  year={2026}
}"""

#: Defaults of the reference code (``contamination_detection_pipeline``): ``seed=42``,
#: ``max_dataset_size=1000``, ``max_sample_length=2048`` characters, examples joined by ``"\\n\\n"``.
DEFAULT_SEED = 42
DEFAULT_MAX_EXAMPLES = 1000
DEFAULT_MAX_CHARS = 2048
DEFAULT_SEPARATOR = "\n\n"
#: Unscored first words of each example: about the 11 first tokens the reference code leaves unscored
#: (``token_range=(10, -1)``: see the module docstring; English BPE text runs at about 1.3 tokens per word).
DEFAULT_SKIP_WORDS = 8

#: The fewest scored examples CoDeC runs on: below it its binomial test against 1/2 cannot reject at
#: the verdict's alpha even at a score of 1.000 (4 examples: 0.5**4 = 0.0625 > 0.05;
#: :func:`pdd_metrics.codec.fewest_examples_to_reject`), so no score it gives means anything.
MIN_SCORED = fewest_examples_to_reject(ALPHA)


class CodecError(NotApplicable):
    """CoDeC cannot run on these examples (too few, none long enough); the message names the fix."""


SETTINGS = (
    Setting(
        "context_examples",
        DEFAULT_CONTEXT_EXAMPLES,
        whole_number,
        "n, in-context examples per target (reference code: 1, 'we found that 1 is sufficient').",
    ),
    Setting(
        "seed", DEFAULT_SEED, whole_number_or_zero, "seeds the subset and the in-context draws (reference code: 42)."
    ),
    Setting(
        "separator",
        DEFAULT_SEPARATOR,
        string(non_empty=True),
        'joins the in-context examples and the target (reference code: "\\n\\n").',
    ),  # fmt: skip
    Setting(
        "skip_words",
        DEFAULT_SKIP_WORDS,
        whole_number,
        "the target's first words, unscored (in both requests' context; the reference code leaves the first 11 tokens unscored).",
    ),
    Setting(
        "max_chars",
        DEFAULT_MAX_CHARS,
        or_null(whole_number),
        "each example cut to this many characters at a word boundary (reference code: 2048); null: no cut.",
    ),
    Setting(
        "max_examples",
        DEFAULT_MAX_EXAMPLES,
        or_null(whole_number),
        "a random subset of this many examples of a larger source (reference code: 1000); null: all.",
    ),
    Setting(
        "share_passes",
        True,
        flag,
        "the requests may share forward passes with the eval of the same run (a request is answered from the "
        "longest pass of its call that holds its tokens, patches hf-shared-passes and vllm-shared-passes: the "
        "eval's question with its gold answer is CoDeC's no-context request); false: sent in a call of their own, "
        "as if run alone.",
    ),
)


# -- the examples and what each request scores -----------------------------------------------------


def cut_at_word(text: str, max_chars: int | None) -> str:
    """``text`` cut to ``max_chars`` characters, less the last (possibly cut) space-separated word, as
    the reference code's ``trim_sample``; a text within the limit is unchanged.

    >>> cut_at_word("one two three", 9)
    'one two'
    >>> cut_at_word("short", 9)
    'short'
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    return " ".join(text[:max_chars].split(" ")[:-1])


def split_after_words(text: str, words: int) -> tuple[str, str] | None:
    """``(first words, rest)`` of ``text``, split where the whitespace after its ``words``-th word
    begins, so the first part ends with a word and the rest starts with whitespace; None where
    ``text`` has no word after them (nothing to score).

    >>> split_after_words("Question: What is 2 + 2?\\nAnswer: 4", 3)
    ('Question: What is', ' 2 + 2?\\nAnswer: 4')
    >>> split_after_words("too short", 2) is None
    True
    """
    ends = [match.end() for match in re.finditer(r"\S+", text)]
    if len(ends) <= words:
        return None
    return text[: ends[words - 1]], text[ends[words - 1] :]


def cut_examples(examples: list[str], settings, source: str) -> list[str]:
    """Each example cut at ``max_chars`` (the test's normalisation: repeats are found after it)."""
    return [cut_at_word(example, settings.max_chars) for example in examples]


def subset(examples: list[str], settings, source: str) -> list[str]:
    """Of more than ``max_examples``, a random subset (seeded, in source order), as the reference
    code's ``random.sample``."""
    if settings.max_examples is not None and len(examples) > settings.max_examples:
        logger.warning(
            "pdd_codec: scoring a random %d of the %d examples of %s (max_examples; seed %d).",
            settings.max_examples,
            len(examples),
            source,
            settings.seed,
        )
        keep = np.random.default_rng(settings.seed).choice(len(examples), settings.max_examples, replace=False)
        examples = [examples[i] for i in sorted(keep.tolist())]
    return examples


def planned_requests(examples: int, settings) -> tuple[int, str]:
    """Two requests per example (at most; an example too short to score sends none)."""
    return 2 * examples, f"{examples:,} examples x 2 requests"


def too_long(examples: list[str], settings, model) -> list[tuple[int, int]]:
    """``(index, tokens)`` of the examples whose baseline request alone (start token and the whole
    example) is longer than the model's context window; none where the model is unknown."""
    if model is None:
        return []
    lengths = [(index, model.length(example)) for index, example in enumerate(examples)]
    return [(index, tokens) for index, tokens in lengths if tokens > model.window]


def codec_documents(examples: list[str], settings, source: str, model=None) -> tuple[list[dict], dict]:
    """One document per example with a word to score after ``skip_words``; the others serve only as
    in-context examples (the reference code skips targets too short to score, likewise). Examples longer
    than the model's window are left out first (:func:`too_long`). Returns the documents and the summary."""
    given = len(examples)
    long_ones = too_long(examples, settings, model)
    if long_ones:
        named = ", ".join(f"example {index} ({tokens:,} tokens)" for index, tokens in long_ones[:5])
        logger.warning(
            "pdd_codec (%s): %d example(s) are longer than the model's context window of %d tokens on their own "
            "and are neither scored nor used as context: %s%s. Lower max_chars (now %s) to score a cut of them.",
            source,
            len(long_ones),
            model.window,
            named,
            ", ..." if len(long_ones) > 5 else "",
            settings.max_chars,
        )
        left_out = {index for index, _ in long_ones}
        examples = [example for index, example in enumerate(examples) if index not in left_out]
    n = settings.context_examples
    if len(examples) < n + 1:
        why = (
            f" (of {given}: {len(long_ones)} longer than the model's context window of {model.window} tokens left "
            f"out; lower max_chars, now {settings.max_chars}, to score a cut of them)"
            if long_ones
            else ""
        )
        raise CodecError(
            f"pdd_codec ({source}): {len(examples)} example(s){why} are too few for {n} in-context "
            f"example(s) each: CoDeC needs at least {n + 1} (and, per the paper, about 100 for a stable score). "
            f"Give more examples, or fewer in-context ones (--metadata '{{\"context_examples\": 1}}')."
        )
    draws = context_draws(len(examples), n, settings.seed)
    documents = []
    for index, example in enumerate(examples):
        split = split_after_words(example, settings.skip_words)
        if split is None:
            continue
        documents.append(
            {
                "example": index,
                "prefix": split[0],
                "continuation": split[1],
                "context_examples": draws[index].tolist(),
                "context": settings.separator.join(examples[i] for i in draws[index]) + settings.separator,
            }
        )
    if not documents:
        raise CodecError(
            f"pdd_codec ({source}): none of the {len(examples)} examples has more than skip_words="
            f"{settings.skip_words} words, so no token is left to score. Lower skip_words "
            f"(--metadata '{{\"skip_words\": 2}}'), or render the examples with more of their fields (template)."
        )
    if len(documents) < MIN_SCORED:
        raise CodecError(
            too_few_scored(len(documents), f"pdd_codec ({source})", f"of the {len(examples)} distinct example(s) given")
        )
    if len(documents) < len(examples):
        logger.warning(
            "pdd_codec: %d of the %d examples of %s have at most %d words (skip_words) and are not scored; they "
            "still serve as in-context examples. Scored: %d.",
            len(examples) - len(documents),
            len(examples),
            source,
            settings.skip_words,
            len(documents),
        )
    summary = {
        "source": source,
        "examples": given,
        "scored": len(documents),
        "too_short": len(examples) - len(documents),
    }
    if long_ones:
        summary["too_long"] = len(long_ones)
    return documents, summary


def too_few_scored(scored: int, where: str, why: str) -> str:
    """The message refusing CoDeC on fewer than :data:`MIN_SCORED` scored examples: what such a score
    could and could not mean, and the fix."""
    return (
        f"{where}: {scored} example(s) would be scored ({why}), too few for CoDeC: below {MIN_SCORED} "
        f"even a score of 1.000 (every example's likelihood dropping with context) is as likely on a benchmark "
        f"the model has not seen (p = 0.5^{MIN_SCORED - 1} = {0.5 ** (MIN_SCORED - 1):.4f} at best against 1/2, "
        f"above alpha {ALPHA}), so the score could mean nothing. Score at least {MIN_SCORED} examples (the paper: "
        "about 100 for a stable score)."
    )


def codec_arguments(doc: dict, settings=None) -> list[tuple[str, str]]:
    """The (context, continuation) of a document's two requests: baseline, then in context."""
    return [(doc["prefix"], doc["continuation"]), (doc["context"] + doc["prefix"], doc["continuation"])]


def codec_delta(doc: dict, results: list) -> float:
    """Delta = in-context minus baseline log-likelihood, from the answers to :func:`codec_arguments`."""
    baseline, in_context = (float(result[0]) if isinstance(result, tuple) else float(result) for result in results)
    return in_context - baseline


# -- metrics: aggregations over the per-example deltas -----------------------------------------------


def codec_score_stderr(items, iters: int) -> float:
    """Binomial standard error (closed form; ``iters`` is not used)."""
    return codec.codec_score_stderr(items)


@with_stderr(codec_score_stderr)
def codec_score(items) -> float:
    """Share of examples whose log-likelihood drops with in-context examples (:func:`pdd_metrics.codec.codec_score`)."""
    return codec.codec_score(items)


def codec_score_ci95_low(items) -> float:
    """Lower end of the 95% Wilson interval of the CoDeC score."""
    return codec.wilson_interval(items, 0.95)[0]


def codec_score_ci95_high(items) -> float:
    """Upper end of the 95% Wilson interval of the CoDeC score."""
    return codec.wilson_interval(items, 0.95)[1]


def codec_mean_delta_stderr(items, iters: int) -> float:
    """Standard error of the mean Delta, std (ddof=1) / sqrt(N); NaN for one example."""
    return float(np.std(items, ddof=1) / math.sqrt(len(items))) if len(items) > 1 else math.nan


@with_stderr(codec_mean_delta_stderr)
def codec_mean_delta(items) -> float:
    """Mean Delta over the examples, in nats (negative = the context lowers the likelihood on average)."""
    return float(np.mean(items))


def codec_examples(items) -> int:
    return len(items)


#: Metric name -> (aggregation over the per-example deltas, higher_is_better).
METRICS = {
    "codec_score": (codec_score, True),
    "codec_score_ci95_low": (codec_score_ci95_low, True),
    "codec_score_ci95_high": (codec_score_ci95_high, True),
    "codec_mean_delta": (codec_mean_delta, False),
    "codec_examples": (codec_examples, True),
}


def _drops(values) -> tuple[int, int] | None:
    """``(drops, examples)`` from CoDeC's score and example count; None where no example was scored."""
    examples = int(values["codec_examples"])
    return (round(values["codec_score"] * examples), examples) if examples > 0 else None


def codec_reading_evidence(values, reference) -> Evidence | None:
    """CoDeC's evidence (:func:`pdd_metrics.verdict.codec_evidence`): against the reference's share of
    drops where one was scored, else against the calibrated null with 1/2 as the weaker null."""
    own = _drops(values)
    against = None if reference is None else _drops(reference)
    if own is None or (reference is not None and against is None):
        return None
    return codec_evidence(*own, against)


def codec_shown(values, reference) -> str:
    """``0.994 [0.987, 0.997] of 1000``, and the reference's score where there is one."""
    shown = (
        f"{values['codec_score']:.3f} [{values['codec_score_ci95_low']:.3f}, {values['codec_score_ci95_high']:.3f}] "
        f"of {int(values['codec_examples'])}"
    )
    if reference is not None:
        shown += f" vs reference {reference['codec_score']:.3f} of {int(reference['codec_examples'])}"
    return shown


def codec_advice(values, reference) -> str:
    """What would decide a score above 1/2 that its calibrated null does not reject: where the score is
    above the null, more examples (:func:`pdd_metrics.verdict.codec_examples_needed`), else a reference."""
    if reference is not None:
        return ""
    needed = codec_examples_needed(values["codec_score"])
    if needed is not None and needed > values["codec_examples"]:
        return f"needs about {needed:,} examples at this score, or a reference of known-unseen examples"
    return (
        f"above 1/2, not above {CODEC_NULL_SCORE:g} (unseen data of its kind): give a reference of known-unseen "
        "examples"
    )


def codec_group(readings) -> tuple[dict, dict | None]:
    """A group's CoDeC values from its leaves' ``(values, reference)``: the drops and examples summed
    (:func:`pdd_metrics.combine.pooled_codec`; each example's context was drawn from its own leaf, so
    the pooled binomial test is the leaves' examples counted together), and the references pooled the
    same way where every leaf has one (else none: the group is read against the calibrated null)."""

    def pooled(values: list) -> dict:
        score, low, high, n = pooled_codec((v["codec_score"], int(v["codec_examples"])) for v in values)
        return {"codec_score": score, "codec_score_ci95_low": low, "codec_score_ci95_high": high, "codec_examples": n}

    references = [reference for _, reference in readings]
    both = all(reference is not None for reference in references)
    return pooled([values for values, _ in readings]), pooled(references) if both else None


READING = Reading(
    label="CoDeC",
    detects="seen example by example",
    result_keys=("codec_score", "codec_score_ci95_low", "codec_score_ci95_high", "codec_examples"),
    evidence=codec_reading_evidence,
    shown=codec_shown,
    evidence_anchor="controls-examples.md#codec-null",
    advice=codec_advice,
    group=codec_group,
)


CODEC = register(
    DatasetTest(
        name="codec",
        title="CoDeC",
        citation="Zawalski et al., Detecting Data Contamination in LLMs via In-Context Learning, ICLR 2026, Sec. 3",
        settings=SETTINGS,
        metrics=METRICS,
        normalise=cut_examples,
        select=subset,
        planned_requests=planned_requests,
        cost_fix='e.g. {"max_examples": 1000}, the reference code\'s subset',
        documents=codec_documents,
        requests=codec_arguments,
        item=codec_delta,
        reading=READING,
        distinct_examples=True,
        compares_to_reference=True,
    )
)
