"""Reference token-frequency tables for DC-PDD, with the identity of the tokenizer that made them.

DC-PDD (Zhang et al., EMNLP 2024, Section 3, Eq. 4-5) needs count(v) for every token id v of the
**target model's** tokenizer over a reference corpus D'. A table counted with another tokenizer
gives meaningless frequencies without any error, so a :class:`FrequencyTable` carries a fingerprint
of the tokenizer's vocabulary and :meth:`FrequencyTable.check_matches` refuses a table made for
another tokenizer.

File format (``format_version`` 1): one ``.npz`` written with ``np.savez_compressed`` holding
``counts`` (int64, shape ``(tokenizer_vocab_size,)``) and ``meta`` (a 0-d unicode array holding a
JSON object with the other fields). Loading never unpickles (``allow_pickle=False``).

Build one with ``lm-eval-pdd build-table`` (see ``pdd_tasks/cli.py``) or :func:`build_table`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from pdd_metrics.reference import (
    DEFAULT_MAX_TOKENS_PER_DOC,
    count_token_ids,
    log_reference_frequencies,
)
from pdd_tasks.data_loading import iter_jsonl_records

__all__ = [
    "DEFAULT_TABLE_FILENAME",
    "FORMAT_VERSION",
    "FrequencyTable",
    "FrequencyTableError",
    "FrequencyTableMismatchError",
    "build_table",
    "default_table_path",
    "iter_jsonl_texts",
    "tokenizer_fingerprint",
]

#: Version of the on-disk format written by :meth:`FrequencyTable.save`.
FORMAT_VERSION = 1
#: The table shipped with the package (default model's tokenizer, Pile test-split sample).
DEFAULT_TABLE_FILENAME = "smollm2-135m_pile-test-sample.npz"
#: Value of ``meta["kind"]``: tells a table apart from any other ``.npz``.
_KIND = "lm-eval-pdd/frequency-table"
_META_FIELDS = (
    "tokenizer_name",
    "tokenizer_fingerprint",
    "tokenizer_vocab_size",
    "total_tokens",
    "documents",
    "max_tokens_per_doc",
    "corpus",
    "format_version",
)


class FrequencyTableError(ValueError):
    """A file is not a readable frequency table."""


class FrequencyTableMismatchError(ValueError):
    """A frequency table was built with another tokenizer than the model's."""


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """SHA-256 hex digest of a tokenizer's vocabulary (its ids -> tokens mapping).

    The digest is taken over ``json.dumps(sorted(tokenizer.get_vocab().items()))`` (UTF-8, compact
    separators, non-ASCII kept as is), i.e. the sorted ``(token, id)`` pairs including added/special
    tokens. Two tokenizers with the same mapping get the same fingerprint whatever their name or
    path; a different token string, id or vocabulary size gives a different one. (The merges and
    normalizer are not hashed: two tokenizers with equal vocabularies but different merge rules
    would match.)

    Parameters
    ----------
    tokenizer : a transformers tokenizer (anything with ``get_vocab() -> dict[str, int]``)

    Returns
    -------
    str
        64 lowercase hex characters.
    """
    vocab = tokenizer.get_vocab()
    pairs = sorted((str(token), int(idx)) for token, idx in vocab.items())
    payload = json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class FrequencyTable:
    """Token counts over a reference corpus, with the identity of the tokenizer that counted them.

    Attributes
    ----------
    counts : np.ndarray of shape (tokenizer_vocab_size,), int64
        ``counts[v]`` = occurrences of token id ``v`` (count(v) of DC-PDD Eq. 4). Read-only.
    tokenizer_name : str
        Human-readable name of the tokenizer (e.g. its ``name_or_path``); not used for matching.
    tokenizer_fingerprint : str
        :func:`tokenizer_fingerprint` of the tokenizer; what :meth:`check_matches` compares.
    tokenizer_vocab_size : int
        ``len(tokenizer)``, the number of ids it can produce (= ``len(counts)``).
    total_tokens : int
        N' of DC-PDD Eq. 5, ``counts.sum()``.
    documents : int
        Number of corpus documents counted.
    max_tokens_per_doc : int or None
        Only the first this-many tokens of each document were counted (DC-PDD reference code: 1024);
        None = all tokens.
    corpus : str
        Free description of the reference corpus (file name, checksum, ...).
    format_version : int
        On-disk format version (:data:`FORMAT_VERSION`).
    """

    counts: np.ndarray
    tokenizer_name: str
    tokenizer_fingerprint: str
    tokenizer_vocab_size: int
    total_tokens: int
    documents: int
    max_tokens_per_doc: int | None
    corpus: str
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        counts = np.array(self.counts, dtype=np.int64, copy=True)
        if counts.ndim != 1:
            raise ValueError(f"counts must be 1-D, got shape {counts.shape}")
        if counts.size != self.tokenizer_vocab_size:
            raise ValueError(
                f"counts has {counts.size} entries but tokenizer_vocab_size="
                f"{self.tokenizer_vocab_size}: expected one count per tokenizer id"
            )
        if counts.size and counts.min() < 0:
            raise ValueError("counts must be non-negative")
        if int(counts.sum()) != self.total_tokens:
            raise ValueError(
                f"total_tokens={self.total_tokens} but counts sum to {int(counts.sum())}"
            )
        if self.format_version != FORMAT_VERSION:
            raise ValueError(
                f"format_version {self.format_version} is not supported (this version of "
                f"lm-eval-pdd reads version {FORMAT_VERSION})"
            )
        counts.setflags(write=False)
        object.__setattr__(self, "counts", counts)

    # ------------------------------------------------------------------ identity & use

    @property
    def meta(self) -> dict[str, Any]:
        """All fields but ``counts``, as stored in the file's ``meta`` JSON."""
        return {name: getattr(self, name) for name in _META_FIELDS}

    @property
    def coverage(self) -> float:
        """Share of the tokenizer's ids seen at least once (``count > 0``)."""
        return float(np.count_nonzero(self.counts)) / max(1, self.counts.size)

    def check_matches(self, tokenizer_fingerprint: str, model_name: str) -> None:
        """Raise :class:`FrequencyTableMismatchError` unless the table fits the model's tokenizer.

        Parameters
        ----------
        tokenizer_fingerprint : str
            :func:`tokenizer_fingerprint` of the model's tokenizer.
        model_name : str
            The model (or tokenizer) name, used in the error message.
        """
        if tokenizer_fingerprint == self.tokenizer_fingerprint:
            return
        raise FrequencyTableMismatchError(
            f"The DC-PDD frequency table was built with tokenizer {self.tokenizer_name!r} "
            f"(vocabulary fingerprint {self.tokenizer_fingerprint[:16]}..., "
            f"{self.tokenizer_vocab_size} ids), but the model {model_name!r} uses a different "
            f"tokenizer (fingerprint {tokenizer_fingerprint[:16]}...). Token frequencies are "
            f"only meaningful for the tokenizer that counted them. Build a table for this "
            f"tokenizer with `lm-eval-pdd build-table --tokenizer {model_name} "
            f"--input <corpus.jsonl.gz> --output <table.npz>` and pass it with "
            f'`--metadata \'{{"freq_table": "<table.npz>"}}\'`.'
        )

    def log_frequencies(self, vocab_size: int) -> np.ndarray:
        """Laplace-smoothed log f(v) over the model's output vocabulary (DC-PDD Eq. 4-5).

        ``vocab_size`` is the size of the model's next-token distribution, which may exceed
        ``tokenizer_vocab_size`` (padded embeddings); see
        :func:`pdd_metrics.reference.log_reference_frequencies`. Returns float64, shape
        ``(vocab_size,)``.
        """
        return log_reference_frequencies(self.counts, vocab_size)

    # ------------------------------------------------------------------ file I/O

    def save(self, path: str | os.PathLike) -> Path:
        """Write the table to ``path`` (one ``.npz``, exactly that name); returns the path.

        The file is written next to its destination and renamed into place, so a reader never sees
        a half-written table.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = json.dumps({"kind": _KIND, **self.meta}, sort_keys=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez_compressed(fh, counts=np.asarray(self.counts), meta=np.array(meta))
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> FrequencyTable:
        """Read a table written by :meth:`save` (never unpickles).

        Raises
        ------
        FileNotFoundError
            If ``path`` does not exist.
        FrequencyTableError
            If the file is not a frequency table or has an unsupported ``format_version``.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"frequency table {str(path)!r} not found; build one with "
                f"`lm-eval-pdd build-table --tokenizer <model> --input <corpus.jsonl.gz> "
                f"--output <table.npz>`"
            )
        not_a_table = (
            f"{str(path)!r} is not an lm-eval-pdd frequency table (expected an .npz written by "
            f"`lm-eval-pdd build-table`, with arrays 'counts' and 'meta')"
        )
        try:
            with np.load(path, allow_pickle=False) as data:
                if not {"counts", "meta"} <= set(data.files):
                    raise FrequencyTableError(f"{not_a_table}; found arrays {sorted(data.files)}")
                counts = data["counts"]
                meta_raw = data["meta"]
        except FrequencyTableError:
            raise
        except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
            raise FrequencyTableError(f"{not_a_table}: {exc}") from exc
        try:
            meta = json.loads(str(meta_raw[()]))
        except (ValueError, TypeError, IndexError) as exc:
            raise FrequencyTableError(f"{not_a_table}: unreadable 'meta' ({exc})") from exc
        if not isinstance(meta, dict) or meta.get("kind") != _KIND:
            raise FrequencyTableError(f"{not_a_table}: 'meta' lacks kind={_KIND!r}")
        version = meta.get("format_version")
        if version != FORMAT_VERSION:
            raise FrequencyTableError(
                f"{str(path)!r} has format_version {version!r}; this version of lm-eval-pdd reads "
                f"format_version {FORMAT_VERSION}. Upgrade lm-eval-pdd or rebuild the table with "
                f"`lm-eval-pdd build-table`."
            )
        missing = [name for name in _META_FIELDS if name not in meta]
        if missing:
            raise FrequencyTableError(f"{not_a_table}: 'meta' lacks fields {missing}")
        if not np.issubdtype(counts.dtype, np.integer):
            raise FrequencyTableError(f"{not_a_table}: 'counts' has dtype {counts.dtype}")
        try:
            return cls(counts=counts, **{name: meta[name] for name in _META_FIELDS})
        except ValueError as exc:
            raise FrequencyTableError(f"{str(path)!r} is an inconsistent table: {exc}") from exc

    def replace(self, **changes: Any) -> FrequencyTable:
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


def iter_jsonl_texts(path: str | os.PathLike, text_field: str = "text") -> Iterator[str]:
    """Yield ``record[text_field]`` of each line of a ``.jsonl`` or ``.jsonl.gz`` file.

    Gzip is detected from the file's magic bytes, so the suffix does not matter. Blank lines are
    skipped. A line that is not JSON, lacks ``text_field`` or holds a non-string there raises
    ``ValueError`` naming the file and the 1-based line number.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {str(path)!r} not found")
    for lineno, record in iter_jsonl_records(path):
        if text_field not in record:
            raise ValueError(
                f"{path}:{lineno}: no field {text_field!r} (found {sorted(record)}); "
                f"choose the text field with --text-field"
            )
        text = record[text_field]
        if not isinstance(text, str):
            raise ValueError(
                f"{path}:{lineno}: field {text_field!r} is {type(text).__name__}, expected str"
            )
        yield text


def _batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def build_table(
    texts: Iterable[str],
    tokenizer: Any,
    corpus: str,
    max_tokens_per_doc: int | None = DEFAULT_MAX_TOKENS_PER_DOC,
    batch_size: int = 256,
    progress: bool = True,
    tokenizer_name: str | None = None,
) -> FrequencyTable:
    """Count the tokens of a reference corpus with a model's tokenizer (DC-PDD Eq. 4).

    Each text is tokenized with ``tokenizer(batch, add_special_tokens=False)["input_ids"]``: the
    text's own tokens only, no BOS/EOS added (special-token strings written literally in the text
    are matched as the tokenizer always does). The first ``max_tokens_per_doc`` tokens of each
    document are counted (DC-PDD reference code: 1024; None = all).

    Parameters
    ----------
    texts : iterable of str
        The documents (consumed once; e.g. :func:`iter_jsonl_texts`).
    tokenizer : transformers tokenizer
        The target model's tokenizer (a fast one makes the batch call parallel).
    corpus : str
        Description of the corpus, stored in the table.
    max_tokens_per_doc : int or None, default 1024
    batch_size : int, default 256
        Documents per tokenizer call.
    progress : bool, default True
        Show a tqdm bar (documents, tokens/s) on stderr.
    tokenizer_name : str, optional
        Name stored in the table; default ``tokenizer.name_or_path``.
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    from tqdm.auto import tqdm

    vocab_size = len(tokenizer)
    counts = np.zeros(vocab_size, dtype=np.int64)
    documents = 0
    start = time.perf_counter()
    bar = tqdm(
        desc="counting tokens",
        unit="doc",
        total=len(texts) if hasattr(texts, "__len__") else None,
        disable=not progress,
        file=sys.stderr,
    )
    try:
        for batch in _batches(texts, batch_size):
            ids = tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"]
            counts += count_token_ids(ids, vocab_size, max_tokens_per_doc)
            documents += len(batch)
            bar.update(len(batch))
            elapsed = max(time.perf_counter() - start, 1e-9)
            total = int(counts.sum())
            bar.set_postfix(tokens=f"{total:,}", tok_per_s=f"{total / elapsed:,.0f}")
    finally:
        bar.close()
    return FrequencyTable(
        counts=counts,
        tokenizer_name=tokenizer_name or str(getattr(tokenizer, "name_or_path", "") or "unknown"),
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        tokenizer_vocab_size=vocab_size,
        total_tokens=int(counts.sum()),
        documents=documents,
        max_tokens_per_doc=max_tokens_per_doc,
        corpus=corpus,
    )


def default_table_path() -> Path:
    """Path of the table shipped in the package (:data:`DEFAULT_TABLE_FILENAME`).

    Built with the default model's tokenizer (``lm-eval-pdd default-model``) on the Pile test-split
    sample; see ``pdd_tasks/data/freq_tables/README.md``.
    """
    ref = resources.files("pdd_tasks").joinpath("data", "freq_tables", DEFAULT_TABLE_FILENAME)
    path = Path(str(ref))
    if not path.is_file():
        raise FileNotFoundError(
            f"the shipped frequency table {DEFAULT_TABLE_FILENAME} is missing from the installed "
            f"package (looked at {path}); reinstall lm-eval-pdd"
        )
    return path
