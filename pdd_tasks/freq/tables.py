"""Reference token-frequency tables for DC-PDD, with the identity of the tokenizer that made them.

DC-PDD (Zhang et al., EMNLP 2024, Section 3, Eq. 4-5) needs count(v) for every token id v of the
**target model's** tokenizer over a reference corpus D'. A table counted with another tokenizer
gives meaningless frequencies without any error, so a :class:`FrequencyTable` carries a fingerprint
of the tokenizer's vocabulary and :meth:`FrequencyTable.check_matches` refuses a table made for
another tokenizer.

File format (``format_version`` 1): one ``.npz`` written with ``np.savez_compressed`` holding
``counts`` (int64, shape ``(tokenizer_vocab_size,)``) and ``meta`` (a 0-d unicode array holding a
JSON object with the other fields). Loading never unpickles (``allow_pickle=False``). The optional
meta fields ``counts_from`` (``"corpus"``, ``"estimate"`` or ``"uniform"``) and ``text_bytes`` were
added later; a file without them reads as ``"corpus"`` / unknown, and older readers ignore them.

Build one with ``lm-eval-pdd build-table`` (:mod:`pdd_tasks.tools.commands.build_table`,
:mod:`pdd_tasks.freq.build`) or :func:`build_table`; add tables of corpus shards with
:func:`merge_tables`. Tables are found without a path through a cache keyed by the tokenizer
fingerprint (:func:`find_table`), with the shipped table as the fallback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import queue
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
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
from pdd_tasks.errors import UserError, excerpt
from pdd_tasks.loading.files import iter_jsonl_records
from pdd_tasks.paths import pdd_home


__all__ = [
    "COUNTS_FROM",
    "DEFAULT_TABLE_FILENAME",
    "FORMAT_VERSION",
    "BuildLimits",
    "FrequencyTable",
    "FrequencyTableError",
    "FrequencyTableMismatchError",
    "FrequencyTableNotFoundError",
    "FrequencyTableOverflowError",
    "build_table",
    "cached_table_path",
    "default_table_path",
    "find_table",
    "install_table",
    "iter_jsonl_texts",
    "merge_tables",
    "table_cache_dir",
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
#: Meta fields added after format_version 1 was first written: (name, value when absent).
_OPTIONAL_META_FIELDS = (("counts_from", "corpus"), ("text_bytes", None))
#: What a table's counts are: counted in a corpus, estimated (e.g. from a word-frequency list), or
#: all equal (no calibration by frequency).
COUNTS_FROM = ("corpus", "estimate", "uniform")


class FrequencyTableError(UserError):
    """A file is not a readable frequency table."""


class FrequencyTableNotFoundError(FrequencyTableError, FileNotFoundError):
    """A path given as a frequency table names no file (nothing there, or a folder)."""


class EmptyFrequencyTableError(FrequencyTableError):
    """A table that counted no token (an empty corpus, a --where that matched nothing)."""


class FrequencyTableMismatchError(UserError):
    """A frequency table was built with another tokenizer than the model's."""


class FrequencyTableOverflowError(FrequencyTableError):
    """Counts that would not fit an int64 (tables whose sum overflows)."""


#: The largest count (and total) a table holds: its counts are int64.
INT64_MAX = int(np.iinfo(np.int64).max)


def exact_sum(counts: np.ndarray) -> int:
    """The sum of non-negative int64 ``counts`` as a Python int, without the wrap-around of
    ``counts.sum()`` past :data:`INT64_MAX` (exact Python ints where the sum might overflow)."""
    counts = np.asarray(counts)
    if not counts.size:
        return 0
    if int(counts.max()) <= INT64_MAX // counts.size:  # cannot overflow
        return int(counts.sum())
    return sum(counts.tolist())


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
    counts_from : str
        ``"corpus"`` (counted), ``"estimate"`` (estimated without a corpus, e.g. from a
        word-frequency list; :mod:`pdd_tasks.freq.estimates`) or ``"uniform"`` (all counts equal).
    text_bytes : int or None
        UTF-8 bytes of the counted documents' text, where known.
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
    counts_from: str = "corpus"
    text_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.counts_from not in COUNTS_FROM:
            raise ValueError(f"counts_from must be one of {COUNTS_FROM}, got {self.counts_from!r}")
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
        exact = exact_sum(counts)
        if exact > INT64_MAX:
            raise ValueError(
                f"counts sum to {exact:,}, more than an int64 holds ({INT64_MAX:,}): the counts overflowed "
                f"(a table added to itself too often, or a damaged file); build the table again"
            )
        if exact != self.total_tokens:
            raise ValueError(f"total_tokens={self.total_tokens} but counts sum to {exact}")
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
        names = _META_FIELDS + tuple(name for name, _ in _OPTIONAL_META_FIELDS)
        return {name: getattr(self, name) for name in names}

    @property
    def is_estimate(self) -> bool:
        """True unless the counts were counted in a corpus (an estimate or a uniform table)."""
        return self.counts_from != "corpus"

    @property
    def description(self) -> str:
        """One line naming the table's kind, corpus and size, for messages and ``inspect``."""
        kind = {
            "corpus": "counted in a corpus",
            "estimate": "ESTIMATE (not counted in a corpus)",
            "uniform": "UNIFORM (all counts equal: no calibration by frequency)",
        }[self.counts_from]
        return f"{kind}: {self.corpus}; {self.total_tokens:,} tokens, tokenizer {self.tokenizer_name}"

    @property
    def coverage(self) -> float:
        """Share of the tokenizer's ids seen at least once (``count > 0``)."""
        return float(np.count_nonzero(self.counts)) / max(1, self.counts.size)

    def check_matches(
        self,
        tokenizer_fingerprint: str,
        model_name: str,
        tokenizer_size: int | None = None,
        output_vocab_size: int | None = None,
    ) -> None:
        """Raise :class:`FrequencyTableMismatchError` unless the table fits the model's tokenizer.

        Parameters
        ----------
        tokenizer_fingerprint : str
            :func:`tokenizer_fingerprint` of the model's tokenizer.
        model_name : str
            The model (or tokenizer) name, used in the error message.
        tokenizer_size : int, optional
            ``len(tokenizer)`` of the model's tokenizer: a table of the same fingerprint holds one
            count per id, exactly this many (another number: an edited or damaged table).
        output_vocab_size : int, optional
            The size of the model's next-token distribution (|V| of DC-PDD Eq. 5): at least the
            table's size (larger where the model pads its embeddings, e.g. Pythia; those ids get the
            smoothed frequency of an unseen token).
        """
        if tokenizer_fingerprint == self.tokenizer_fingerprint:
            fix = (
                f"Build the table again with `lm-eval-pdd build-table --tokenizer {model_name} --input "
                f"<corpus.jsonl.gz> --output <table.npz>`."
            )
            if tokenizer_size is not None and tokenizer_size != self.tokenizer_vocab_size:
                raise FrequencyTableMismatchError(
                    f"The DC-PDD frequency table holds {self.tokenizer_vocab_size} counts, but the tokenizer of "
                    f"{model_name!r} (the same fingerprint {tokenizer_fingerprint[:16]}...) has {tokenizer_size} "
                    f"ids: the table must hold one count per id of the tokenizer that counted it (an edited or "
                    f"damaged table). {fix}"
                )
            if output_vocab_size is not None and output_vocab_size < self.tokenizer_vocab_size:
                raise FrequencyTableMismatchError(
                    f"The DC-PDD frequency table holds {self.tokenizer_vocab_size} counts, but the model "
                    f"{model_name!r} gives a next-token distribution over {output_vocab_size} ids: the table is "
                    f"for a larger vocabulary than the model's. {fix}"
                )
            return
        raise FrequencyTableMismatchError(
            f"The DC-PDD frequency table was built with tokenizer {self.tokenizer_name!r} "
            f"(vocabulary fingerprint {self.tokenizer_fingerprint[:16]}..., "
            f"{self.tokenizer_vocab_size} ids), but the model {model_name!r} uses a different "
            f"tokenizer (fingerprint {tokenizer_fingerprint[:16]}...). Token frequencies are "
            f"only meaningful for the tokenizer that counted them. Build a table for this "
            f"tokenizer with `lm-eval-pdd build-table --tokenizer {model_name} "
            f"--input <corpus.jsonl.gz> --output <table.npz>` and pass it with "
            f'`--metadata \'{{"freq_table": "<table.npz>"}}\'`, or add `--install` to the '
            f"build to have every run with this tokenizer find it."
        )

    def log_frequencies(self, vocab_size: int) -> np.ndarray:
        """Laplace-smoothed log f(v) over the model's output vocabulary (DC-PDD Eq. 4-5).

        ``vocab_size`` is the size of the model's next-token distribution, which may exceed
        ``tokenizer_vocab_size`` (padded embeddings); see
        :func:`pdd_metrics.reference.log_reference_frequencies`. Returns float64, shape
        ``(vocab_size,)``.
        """
        if self.total_tokens == 0:
            raise EmptyFrequencyTableError(
                f"the frequency table ({self.description}) counted no token at all: with it, DC-PDD would "
                f"calibrate by nothing but the smoothing. Build it again from a corpus with texts (check "
                f"--input, --text-field and --where of build-table), or use another table."
            )
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
        FrequencyTableNotFoundError
            If ``path`` does not exist or is a folder (a :class:`FrequencyTableError` and a
            ``FileNotFoundError``).
        FrequencyTableError
            If the file is not a frequency table or has an unsupported ``format_version``.
        """
        path = Path(path)
        if not path.is_file():
            where = "" if path.is_absolute() else f" (looked at {path.absolute()})"
            problem = "is a folder, not a table file" if path.is_dir() else "not found"
            raise FrequencyTableNotFoundError(
                f"frequency table {str(path)!r} {problem}{where}. Give the path of a table's .npz file "
                f"(`lm-eval-pdd inspect-table <table.npz>` shows one), or build one with "
                f"`lm-eval-pdd build-table --tokenizer <model> --input <corpus.jsonl.gz> --output <table.npz>`"
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
        fields = {name: meta[name] for name in _META_FIELDS}
        fields.update({name: meta.get(name, default) for name, default in _OPTIONAL_META_FIELDS})
        try:
            return cls(counts=counts, **fields)
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
                f"{path}:{lineno}: no field {text_field!r} (found {excerpt(sorted(record))}); "
                f"choose the text field with --text-field"
            )
        text = record[text_field]
        if not isinstance(text, str):
            raise ValueError(f"{path}:{lineno}: field {text_field!r} is {type(text).__name__}, expected str")
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


def _prefetched_batches(texts: Iterable[str], size: int, depth: int = 4) -> Iterator[list[str]]:
    """:func:`_batches` read ahead by a thread (reading/decompressing/parsing overlaps with the
    tokenizer, which releases the GIL). Exceptions of the reader are raised here; closing the
    generator stops the reader."""
    out: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def reader() -> None:
        try:
            for batch in _batches(texts, size):
                if not put(batch):
                    return
            put(done)
        except BaseException as exc:  # handed to the consumer
            put(exc)

    thread = threading.Thread(target=reader, name="freq-table-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = out.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def batch_encoder(tokenizer: Any) -> Callable[[list[str]], list[list[int]]]:
    """A function ``texts -> token ids per text``: the text's own tokens, no BOS/EOS added.

    For a transformers fast tokenizer this calls its ``tokenizers.Tokenizer`` directly
    (``encode_batch_fast``, which skips the character offsets that counting does not need; the ids
    are those of ``tokenizer(texts, add_special_tokens=False)``, tested); otherwise
    ``tokenizer(texts, add_special_tokens=False)["input_ids"]``.
    """
    backend = getattr(tokenizer, "_tokenizer", None)
    fast = getattr(backend, "encode_batch_fast", None) or getattr(backend, "encode_batch", None)
    if getattr(tokenizer, "is_fast", False) and fast is not None:

        def encode(texts: list[str]) -> list[list[int]]:
            return [enc.ids for enc in fast(texts, add_special_tokens=False)]

        return encode

    def encode_slow(texts: list[str]) -> list[list[int]]:
        return tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]

    return encode_slow


@contextlib.contextmanager
def tokenizer_parallelism(enabled: bool = True) -> Iterator[None]:
    """Set ``TOKENIZERS_PARALLELISM`` for the duration (the Rust tokenizers read it at every batch
    call: ``true`` spreads a batch over all cores), then restore it."""
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if enabled else "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous


@dataclass
class BuildLimits:
    """Stop counting after this many documents, counted tokens or UTF-8 text bytes (None = no
    limit). Documents are taken whole and in order: the document that reaches the token or byte
    limit is still counted, the next is not. One object is shared by the parts of one build."""

    documents: int | None = None
    tokens: int | None = None
    text_bytes: int | None = None
    used_documents: int = 0
    used_tokens: int = 0
    used_text_bytes: int = 0

    def __post_init__(self) -> None:
        for name in ("documents", "tokens", "text_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"limit {name} must be a positive integer or None, got {value}")

    @property
    def reached(self) -> bool:
        return (
            (self.documents is not None and self.used_documents >= self.documents)
            or (self.tokens is not None and self.used_tokens >= self.tokens)
            or (self.text_bytes is not None and self.used_text_bytes >= self.text_bytes)
        )

    def describe(self) -> str:
        parts = [
            f"{value:,} {name.replace('_', ' ')}"
            for name, value in (
                ("documents", self.documents),
                ("tokens", self.tokens),
                ("text_bytes", self.text_bytes),
            )
            if value is not None
        ]
        return " / ".join(parts)


@dataclass
class CountResult:
    """Counts of a stretch of documents (one part of a build)."""

    counts: np.ndarray
    documents: int = 0
    text_bytes: int = 0

    @property
    def total_tokens(self) -> int:
        return int(self.counts.sum())


def _progress_bar(progress: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(desc="counting tokens", unit="doc", disable=not progress, file=sys.stderr)


class _Throughput:
    """Updates a tqdm bar with documents, counted tokens and tokens/s."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.start = time.perf_counter()
        self.tokens = 0

    def update(self, documents: int, tokens: int) -> None:
        self.tokens += tokens
        self.bar.update(documents)
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        self.bar.set_postfix(tokens=f"{self.tokens:,}", tok_per_s=f"{self.tokens / elapsed:,.0f}")


def count_texts(
    texts: Iterable[str],
    encode: Callable[[list[str]], list[list[int]]],
    vocab_size: int,
    max_tokens_per_doc: int | None,
    limits: BuildLimits | None = None,
    batch_size: int = 256,
    meter: _Throughput | None = None,
) -> CountResult:
    """Count the first ``max_tokens_per_doc`` tokens of each text (DC-PDD Eq. 4) until ``texts``
    ends or ``limits`` is reached (its ``used_*`` fields are advanced)."""
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    limits = limits if limits is not None else BuildLimits()
    result = CountResult(counts=np.zeros(vocab_size, dtype=np.int64))
    if limits.reached:
        return result
    cap = max_tokens_per_doc
    batches = _prefetched_batches(texts, batch_size)
    try:
        for batch in batches:
            if limits.documents is not None:
                batch = batch[: limits.documents - limits.used_documents]
            sizes = [len(text.encode("utf-8")) for text in batch]
            if limits.text_bytes is not None:
                keep, used = 0, limits.used_text_bytes
                while keep < len(batch) and used < limits.text_bytes:
                    used += sizes[keep]
                    keep += 1
                batch, sizes = batch[:keep], sizes[:keep]
            ids = encode(batch)
            if cap is not None:
                ids = [doc[:cap] for doc in ids]
            if limits.tokens is not None:
                keep, used = 0, limits.used_tokens
                while keep < len(ids) and used < limits.tokens:
                    used += len(ids[keep])
                    keep += 1
                ids, sizes = ids[:keep], sizes[:keep]
            flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64)
            if flat.size and (flat.min() < 0 or flat.max() >= vocab_size):
                count_token_ids(ids, vocab_size, cap)  # raises, naming the document and the id
            if flat.size:
                result.counts += np.bincount(flat, minlength=vocab_size)
            result.documents += len(ids)
            result.text_bytes += sum(sizes)
            limits.used_documents += len(ids)
            limits.used_tokens += int(flat.size)
            limits.used_text_bytes += sum(sizes)
            if meter is not None:
                meter.update(len(ids), int(flat.size))
            if limits.reached:
                break
    finally:
        batches.close()
    return result


def build_table(
    texts: Iterable[str],
    tokenizer: Any,
    corpus: str,
    max_tokens_per_doc: int | None = DEFAULT_MAX_TOKENS_PER_DOC,
    batch_size: int = 256,
    progress: bool = True,
    tokenizer_name: str | None = None,
    limits: BuildLimits | None = None,
    parallel: bool = True,
) -> FrequencyTable:
    """Count the tokens of a reference corpus with a model's tokenizer (DC-PDD Eq. 4).

    Each text is tokenized without BOS/EOS (:func:`batch_encoder`: the text's own tokens;
    special-token strings written literally in the text are matched as the tokenizer always does).
    The first ``max_tokens_per_doc`` tokens of each document are counted (DC-PDD reference code:
    1024; None = all). For sharded, resumable builds from files or the HF Hub see
    :func:`pdd_tasks.freq.build.build`.

    Parameters
    ----------
    texts : iterable of str
        The documents (consumed once; e.g. :func:`iter_jsonl_texts`); read ahead by a thread.
    tokenizer : transformers tokenizer
        The target model's tokenizer (a fast one encodes each batch on all cores).
    corpus : str
        Description of the corpus, stored in the table.
    max_tokens_per_doc : int or None, default 1024
    batch_size : int, default 256
        Documents per tokenizer call.
    progress : bool, default True
        Show a tqdm bar (documents, tokens, tokens/s) on stderr.
    tokenizer_name : str, optional
        Name stored in the table; default ``tokenizer.name_or_path``.
    limits : BuildLimits, optional
        Stop after this many documents, tokens or bytes.
    parallel : bool, default True
        Let the fast tokenizer use all cores (``TOKENIZERS_PARALLELISM=true`` during the build).
    """
    vocab_size = len(tokenizer)
    bar = _progress_bar(progress)
    try:
        with tokenizer_parallelism(parallel):
            result = count_texts(
                texts,
                batch_encoder(tokenizer),
                vocab_size,
                max_tokens_per_doc,
                limits=limits,
                batch_size=batch_size,
                meter=_Throughput(bar),
            )
    finally:
        bar.close()
    return FrequencyTable(
        counts=result.counts,
        tokenizer_name=tokenizer_name or str(getattr(tokenizer, "name_or_path", "") or "unknown"),
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        tokenizer_vocab_size=vocab_size,
        total_tokens=result.total_tokens,
        documents=result.documents,
        max_tokens_per_doc=max_tokens_per_doc,
        corpus=corpus,
        text_bytes=result.text_bytes,
    )


def merge_tables(tables: Sequence[FrequencyTable], corpus: str | None = None) -> FrequencyTable:
    """Sum the counts of tables built on parts of a corpus (DC-PDD Eq. 4 is additive).

    All tables must share the tokenizer fingerprint (else :class:`FrequencyTableMismatchError`),
    the per-document cap and ``counts_from`` (else ``ValueError``): the merge of shards then equals
    one build over the whole corpus exactly. ``corpus`` describes the result (default: the parts'
    descriptions, deduplicated, joined with " + ").
    """
    tables = list(tables)
    if not tables:
        raise ValueError("merge_tables needs at least one table")
    first = tables[0]
    for index, table in enumerate(tables[1:], start=1):
        if table.tokenizer_fingerprint != first.tokenizer_fingerprint:
            raise FrequencyTableMismatchError(
                f"cannot merge tables of different tokenizers: table 0 was counted with "
                f"{first.tokenizer_name!r} (fingerprint {first.tokenizer_fingerprint[:16]}...), "
                f"table {index} with {table.tokenizer_name!r} (fingerprint "
                f"{table.tokenizer_fingerprint[:16]}...); build every part with the same tokenizer"
            )
        if table.max_tokens_per_doc != first.max_tokens_per_doc:
            raise ValueError(
                f"cannot merge tables counted with different per-document caps: table 0 counted "
                f"the first {first.max_tokens_per_doc} tokens of each document, table {index} "
                f"{table.max_tokens_per_doc} (None = all); rebuild with the same "
                f"--max-tokens-per-doc"
            )
        if table.counts_from != first.counts_from:
            raise ValueError(
                f"cannot merge a table of kind {table.counts_from!r} (table {index}) into one of "
                f"kind {first.counts_from!r} (table 0)"
            )
    counts = np.zeros(first.tokenizer_vocab_size, dtype=np.int64)
    for index, table in enumerate(tables):
        room = INT64_MAX - counts
        over = np.flatnonzero(table.counts > room)
        if over.size:
            token = int(over[0])
            raise FrequencyTableOverflowError(
                f"merging overflows: the count of token id {token} would be {int(counts[token]) + int(table.counts[token]):,} "
                f"after table {index}, more than an int64 holds ({INT64_MAX:,}). The tables cannot be added "
                f"(one of them merged into the others already, or damaged?); merge fewer tables or build again."
            )
        counts += table.counts
    if exact_sum(counts) > INT64_MAX:
        raise FrequencyTableOverflowError(
            f"merging overflows: the {len(tables)} tables count {exact_sum(counts):,} tokens together, more than "
            f"an int64 holds ({INT64_MAX:,}). The tables cannot be added (one of them merged into the others "
            f"already, or damaged?); merge fewer tables or build again."
        )
    if corpus is None:
        corpus = " + ".join(dict.fromkeys(table.corpus for table in tables))
    byte_sizes = [table.text_bytes for table in tables]
    return FrequencyTable(
        counts=counts,
        tokenizer_name=first.tokenizer_name,
        tokenizer_fingerprint=first.tokenizer_fingerprint,
        tokenizer_vocab_size=first.tokenizer_vocab_size,
        total_tokens=int(counts.sum()),
        documents=sum(table.documents for table in tables),
        max_tokens_per_doc=first.max_tokens_per_doc,
        corpus=corpus,
        counts_from=first.counts_from,
        text_bytes=None if None in byte_sizes else sum(byte_sizes),
    )


# ---------------------------------------------------------------------------------- the cache


def table_cache_dir() -> Path:
    """Directory of installed tables: ``<pdd_home()>/freq_tables`` (``$LM_EVAL_PDD_HOME/freq_tables`` if
    ``LM_EVAL_PDD_HOME`` is set, else ``${XDG_CACHE_HOME:-~/.cache}/lm_eval_pdd/freq_tables``)."""
    return pdd_home() / "freq_tables"


def cached_table_path(fingerprint: str) -> Path:
    """Where the installed table for a tokenizer fingerprint lives: ``<cache>/<fingerprint>.npz``."""
    if len(fingerprint) != 64 or any(c not in "0123456789abcdef" for c in fingerprint):
        raise ValueError(f"expected a 64-hex-digit tokenizer fingerprint, got {fingerprint!r}")
    return table_cache_dir() / f"{fingerprint}.npz"


def install_table(source: str | os.PathLike | FrequencyTable, force: bool = False) -> Path:
    """Install a table into the cache under its tokenizer's fingerprint; returns the cache path.

    The tasks then use it for every model with that tokenizer unless ``freq_table`` is given.
    Refuses to replace a different installed table unless ``force`` (``FileExistsError`` naming
    both). Written atomically.
    """
    table = source if isinstance(source, FrequencyTable) else FrequencyTable.load(source)
    target = cached_table_path(table.tokenizer_fingerprint)
    if target.is_file() and not force:
        try:
            current = FrequencyTable.load(target)
        except FrequencyTableError:
            current = None
        if current is not None and not (current.meta == table.meta and np.array_equal(current.counts, table.counts)):
            raise FileExistsError(
                f"a table is already installed for this tokenizer at {target} ({current.description}); "
                f"pass --force (force=True) to replace it with {table.description}"
            )
    return table.save(target)


def find_table(fingerprint: str | None) -> tuple[Path, str]:
    """The table the tasks use when no ``freq_table`` is given: ``(path, source)`` with source
    ``"cache"`` (installed for this tokenizer fingerprint, :func:`install_table`) or
    ``"shipped default"`` (:func:`default_table_path`, valid only for the default model)."""
    if fingerprint:
        try:
            path = cached_table_path(fingerprint)
        except ValueError:
            path = None
        if path is not None and path.is_file():
            return path, "cache"
    return default_table_path(), "shipped default"


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
