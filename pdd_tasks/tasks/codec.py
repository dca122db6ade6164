"""``pdd_codec``: CoDeC, was a benchmark in the training data? (Zawalski et al., ICLR 2026)

Contamination Detection via Context, "Detecting Data Contamination in LLMs via In-Context Learning"
(Zawalski, Boubdir, Balazy, Nushi, Ribalta; ICLR 2026, arXiv:2510.27055), run as an lm-eval task on
a benchmark's own examples, with no reference set and no labels. The statistic is
:mod:`pdd_metrics.codec`; this module builds the requests.

Examples: any lm-eval task by name (``source_task``) or a local file (``data_files``), read by
:mod:`pdd_tasks.loading.examples` as for ``pdd_exchangeability``; then, as the reference code
(``contamination_detection_pipeline``), each cut to ``max_chars`` characters at a word boundary and, of
more than ``max_examples``, a random subset (seeded) kept.

One document per example long enough to score (more than ``skip_words`` words); two ordinary
``loglikelihood`` requests each, so the task runs on every backend:

- baseline: context = the example's first ``skip_words`` words, continuation = the rest;
- in context: context = its ``context_examples`` in-context examples (drawn at random from the other
  examples, seeded by ``seed`` and the example's index), joined by ``separator``, then ``separator``
  and the same first words; continuation = the same rest.

Both requests score the same continuation after the same words of the example, so Delta is their
difference (summed over the same tokens: the sign of the paper's difference of means). The first words
stay unscored because the reference code scores from the target's 11th token (``token_range=(10, -1)``):
the first tokens of a text say little, and they would follow the start of the sequence in one
request and the separator in the other. Words rather than tokens keep the split tokenizer-free and at a
word boundary, which every backend's ``(context, continuation)`` encoding keeps intact.

    lm_eval --model hf --model_args pretrained=<model> --include_path "$(lm-eval-pdd tasks-path)" \\
      --tasks pdd_codec --metadata '{"source_task": "arc_easy"}' --log_samples --output_path out
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
from lm_eval.api.task import ConfigurableTask

from pdd_metrics.codec import DEFAULT_CONTEXT_EXAMPLES, context_draws
from pdd_tasks import lm_eval_patches
from pdd_tasks.errors import UserError
from pdd_tasks.loading.examples import ExampleSource
from pdd_tasks.registry import whole_number, whole_number_or_zero
from pdd_tasks.tasks.aggregations import CODEC_AGGREGATIONS


logger = logging.getLogger(__name__)

_CITATION = """@inproceedings{zawalski2026codec,
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
#: Unscored first words of each example: about the reference code's first 11 unscored tokens
#: (English BPE text runs at about 1.3 tokens per word).
DEFAULT_SKIP_WORDS = 8


class CodecError(UserError):
    """A setting of ``pdd_codec`` is not usable, or the examples are too few; the message names the fix."""


def _checked(check, name: str, value: Any):
    """``check(name, value)`` of :mod:`pdd_tasks.registry`'s setting vocabulary, its error a :class:`CodecError`."""
    try:
        return check(name, value)
    except ValueError as error:
        raise CodecError(f"pdd_codec: {error}") from None


@dataclass(frozen=True)
class CodecSettings:
    """The task's metadata (YAML ``metadata:`` or ``--metadata``), checked.

    Attributes:
        context_examples: n, in-context examples per target (reference code: 1).
        seed: seeds the subset and the in-context draws (reference code: 42).
        separator: joins the in-context examples and the target (reference code: "\\n\\n").
        skip_words: the target's first words, unscored (in both requests' context).
        max_chars: each example cut to this many characters at a word boundary (reference code: 2048).
        max_examples: a random subset of this many examples of a larger source (reference code: 1000).
        source: where the examples come from (``data_files`` or ``source_task``, with their keys).
    """

    source: ExampleSource
    context_examples: int = DEFAULT_CONTEXT_EXAMPLES
    seed: int = DEFAULT_SEED
    separator: str = DEFAULT_SEPARATOR
    skip_words: int = DEFAULT_SKIP_WORDS
    max_chars: int | None = DEFAULT_MAX_CHARS
    max_examples: int | None = DEFAULT_MAX_EXAMPLES

    @classmethod
    def from_metadata(cls, metadata: dict) -> CodecSettings:
        def setting(name: str, check, default, nullable: bool = False):
            value = metadata.get(name, default)
            return None if value is None and nullable else _checked(check, name, value)

        settings = cls(
            context_examples=setting("context_examples", whole_number, DEFAULT_CONTEXT_EXAMPLES),
            seed=setting("seed", whole_number_or_zero, DEFAULT_SEED),
            separator=metadata.get("separator", DEFAULT_SEPARATOR),
            skip_words=setting("skip_words", whole_number, DEFAULT_SKIP_WORDS),
            max_chars=setting("max_chars", whole_number, DEFAULT_MAX_CHARS, nullable=True),
            max_examples=setting("max_examples", whole_number, DEFAULT_MAX_EXAMPLES, nullable=True),
            source=ExampleSource.from_metadata(metadata, "pdd_codec"),
        )
        if not isinstance(settings.separator, str) or not settings.separator:
            raise CodecError(
                f'pdd_codec: metadata separator={settings.separator!r}: expected a non-empty string, e.g. "\\n\\n".'
            )
        return settings


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


def select_examples(examples: list[str], settings: CodecSettings, source: str) -> list[str]:
    """The examples as scored: each cut at ``max_chars``; of more than ``max_examples``, a random
    subset (seeded, in source order), as the reference code's ``random.sample``."""
    examples = [cut_at_word(example, settings.max_chars) for example in examples]
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


def codec_documents(examples: list[str], settings: CodecSettings, source: str) -> list[dict]:
    """One document per example with a word to score after ``skip_words``; the others serve only as
    in-context examples (the reference code skips targets too short to score, likewise)."""
    n = settings.context_examples
    if len(examples) < n + 1:
        raise CodecError(
            f"pdd_codec ({source}): {len(examples)} example(s) are too few for {n} in-context "
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
    return documents


def codec_arguments(doc: dict) -> list[tuple[str, str]]:
    """The (context, continuation) of a document's two requests: baseline, then in context."""
    return [(doc["prefix"], doc["continuation"]), (doc["context"] + doc["prefix"], doc["continuation"])]


def codec_delta(results: list) -> float:
    """Delta = in-context minus baseline log-likelihood, from the answers to :func:`codec_arguments`."""
    baseline, in_context = (float(result[0]) if isinstance(result, tuple) else float(result) for result in results)
    return in_context - baseline


def codec_summary(examples: list[str], documents: list[dict], source: str) -> dict:
    """What the results JSON says of the examples (``metadata.codec_source``)."""
    return {
        "source": source,
        "examples": len(examples),
        "scored": len(documents),
        "too_short": len(examples) - len(documents),
    }


# -- the task ---------------------------------------------------------------------------------------


class CodecTask(ConfigurableTask):
    """One document per scored example; requests: baseline, then with in-context examples."""

    def __init__(self, config: dict) -> None:
        lm_eval_patches.apply()
        config = dict(config)
        config.pop("class", None)
        self.settings = CodecSettings.from_metadata(dict(config.get("metadata") or {}))
        loaded, self.source = self.settings.source.load()
        self.examples = select_examples(loaded, self.settings, self.source)
        self.documents = codec_documents(self.examples, self.settings, self.source)
        config["metric_list"] = [
            {"metric": name, "aggregation": aggregate, "higher_is_better": higher}
            for name, (aggregate, higher) in CODEC_AGGREGATIONS.items()
        ]
        config["process_results"] = self.process_results
        super().__init__(config=config)
        self.config.metadata["codec_source"] = codec_summary(self.examples, self.documents, self.source)

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        self.dataset = {self.config.test_split: datasets.Dataset.from_list(self.documents)}

    def build_all_requests(self, **kwargs) -> None:
        """lm-eval's request building, after refusing ``--limit 0`` and chat templates (a chat
        template would wrap the examples in a conversation the reference code does not have)."""
        from pdd_tasks.tasks.base import refuse_run_options

        refuse_run_options(self.config.task, **kwargs)
        super().build_all_requests(**kwargs)

    def construct_requests(self, doc: dict, ctx, **kwargs) -> list:
        from pdd_tasks.tasks.base import loglikelihood_requests

        return loglikelihood_requests(self.config.task, doc, doc["example"], codec_arguments(doc), **kwargs)

    def process_results(self, doc: dict, results: list) -> dict:
        return dict.fromkeys(CODEC_AGGREGATIONS, codec_delta(results))
