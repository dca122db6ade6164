"""Frequency tables without a corpus: estimates from word-frequency lists, and the uniform table.

DC-PDD needs token frequencies of a reference corpus (Eq. 4-5). Where no corpus is at hand, a table
can be **estimated** from a word-frequency list: every word is tokenized in running-text context
with the target tokenizer, and each token of the word is counted ``count(word)`` times. The result
is labelled ``counts_from="estimate"`` and its ``corpus`` field starts with ``ESTIMATE``;
``lm-eval-pdd inspect-table`` and the tasks' log say so.

Sources:

- ``wordfreq`` (Speer, 2022; the ``best`` list of a language): frequencies per word, scaled to a
  nominal corpus of ``scale`` words (default 1e9), rounded. English words are tokenized as
  ``"the <word> the"`` and the tokens overlapping ``" <word>"`` are counted (the space-prefixed form
  of running text); Chinese words between
  full-width commas (``"，<word>，"``).
- ``jieba``'s dictionary (``dict.txt``): counts per Chinese word from jieba's own corpus, used as is.
- ``uniform``: every id counted once, so f(v) = 1/|V| for all v (no calibration by frequency).

What an estimate lacks: the lists hold words only, so punctuation, digits, whitespace and markup
tokens get count 0 (the smoothed minimum), and words appear lowercase (wordfreq) as listed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any

import numpy as np

from pdd_tasks.freq.tables import (
    FrequencyTable,
    tokenizer_fingerprint,
    tokenizer_parallelism,
)


__all__ = [
    "CONTEXTS",
    "estimate_table",
    "jieba_word_counts",
    "uniform_table",
    "wordfreq_word_counts",
]

#: (left, right) context a word is tokenized in, per language; other languages use English's.
CONTEXTS = {"en": ("the ", " the"), "zh": ("，", "，")}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def wordfreq_word_counts(
    language: str = "en", wordlist: str = "best", scale: float = 1e9
) -> tuple[list[tuple[str, int]], str]:
    """``([(word, count), ...], description)`` from wordfreq: frequency x ``scale``, rounded;
    words whose rounded count is 0 are dropped."""
    import wordfreq

    try:
        freqs = wordfreq.get_frequency_dict(language, wordlist)
    except (LookupError, ValueError) as exc:
        raise ValueError(
            f"wordfreq has no {wordlist!r} list for language {language!r} ({exc}); languages: "
            f"{sorted(wordfreq.available_languages(wordlist))}"
        ) from None
    pairs = [(word, int(round(freq * scale))) for word, freq in freqs.items()]
    pairs = [(word, count) for word, count in pairs if count > 0]
    desc = (
        f"wordfreq {_version('wordfreq')} {language!r} {wordlist!r} list, {len(pairs):,} words, "
        f"frequencies x {scale:.0e} (a nominal {scale:.0e}-word corpus)"
    )
    return pairs, desc


def jieba_word_counts(dict_path: str | os.PathLike | None = None) -> tuple[list[tuple[str, int]], str]:
    """``([(word, count), ...], description)`` from jieba's dictionary (``word count tag`` lines)."""
    if dict_path is None:
        import jieba

        dict_path = os.path.join(os.path.dirname(jieba.__file__), "dict.txt")
    pairs = []
    with open(dict_path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 2 or not parts[1].isdigit():
                raise ValueError(f"{dict_path}:{lineno}: expected 'word count [tag]', got {line.strip()!r}")
            if int(parts[1]) > 0:
                pairs.append((parts[0], int(parts[1])))
    desc = f"jieba {_version('jieba')} dictionary {os.path.basename(str(dict_path))}, {len(pairs):,} words with their counts"
    return pairs, desc


def _word_token_ids(
    tokenizer: Any, words: Sequence[str], left: str, right: str, batch: int = 4096
) -> Iterable[list[int]]:
    """Per word: the ids of the tokens overlapping the word in ``left + word + right``."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("word-frequency estimates need a fast tokenizer (character offsets)")
    # The word's region starts right after the left context's last non-space character, so the
    # space before an English word (its own token in some tokenizers, e.g. " " + "naïve") counts
    # with the word, as it does in running text; the right context's tokens start after the word.
    start = len(left.rstrip())
    for i in range(0, len(words), batch):
        chunk = list(words[i : i + batch])
        enc = tokenizer(
            [left + w + right for w in chunk],
            add_special_tokens=False,
            return_offsets_mapping=True,
            verbose=False,
        )
        for word, ids, offsets in zip(chunk, enc["input_ids"], enc["offset_mapping"], strict=True):
            end = len(left) + len(word)
            yield [tid for tid, (a, b) in zip(ids, offsets, strict=True) if a < end and b > start]


def estimate_table(
    word_counts: Sequence[tuple[str, int]],
    tokenizer: Any,
    description: str,
    language: str = "en",
    tokenizer_name: str | None = None,
) -> FrequencyTable:
    """A table estimated from ``(word, count)`` pairs: each token of each word (tokenized in the
    language's :data:`CONTEXTS`) counted ``count`` times. Labelled ``counts_from="estimate"``."""
    left, right = CONTEXTS.get(language, CONTEXTS["en"])
    vocab_size = len(tokenizer)
    words = [w for w, _ in word_counts]
    weights = np.array([c for _, c in word_counts], dtype=np.int64)
    if weights.size and weights.min() < 0:
        raise ValueError("word counts must be non-negative")
    counts = np.zeros(vocab_size, dtype=np.int64)
    with tokenizer_parallelism(True):
        id_lists = list(_word_token_ids(tokenizer, words, left, right))
    lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(id_lists))
    flat = np.fromiter((t for ids in id_lists for t in ids), dtype=np.int64, count=int(lengths.sum()))
    np.add.at(counts, flat, np.repeat(weights, lengths))
    return FrequencyTable(
        counts=counts,
        tokenizer_name=tokenizer_name or str(getattr(tokenizer, "name_or_path", "") or "unknown"),
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        tokenizer_vocab_size=vocab_size,
        total_tokens=int(counts.sum()),
        documents=0,
        max_tokens_per_doc=None,
        corpus=(
            f"ESTIMATE from a word-frequency list, not corpus counts: {description}; each word "
            f"tokenized as {left + '<word>' + right!r}, its tokens weighted by the word's count; "
            f"punctuation, digits and whitespace are missing"
        ),
        counts_from="estimate",
    )


def uniform_table(tokenizer: Any, tokenizer_name: str | None = None) -> FrequencyTable:
    """Every id counted once: f(v) = 2 / (2|V|) = 1/|V| after smoothing, i.e. no calibration."""
    vocab_size = len(tokenizer)
    return FrequencyTable(
        counts=np.ones(vocab_size, dtype=np.int64),
        tokenizer_name=tokenizer_name or str(getattr(tokenizer, "name_or_path", "") or "unknown"),
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        tokenizer_vocab_size=vocab_size,
        total_tokens=vocab_size,
        documents=0,
        max_tokens_per_doc=None,
        corpus="UNIFORM: every token id counted once, f(v) = 1/|V| (no calibration by frequency)",
        counts_from="uniform",
    )
