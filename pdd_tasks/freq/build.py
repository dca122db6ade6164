"""Resumable, shardable frequency-table builds (``lm-eval-pdd build-table``).

A build counts the documents of a list of :class:`~pdd_tasks.freq.sources.Source` units (sorted by
name) in **parts** of ``docs_per_part`` documents. Every finished part is written at once, atomically,
as its own table in a work directory (default ``<output>.parts/``), with the SHA-256 of the texts it
counted; a rerun of the same command skips the finished parts whose documents are unchanged
(re-reading, not re-tokenizing, them), so an interrupted build loses at most the part in flight, and
a file changed since is counted afresh from its first changed part. At the end the parts are merged (:func:`merge_tables`) into the output
and the work directory is removed. The work directory holds a ``manifest.json`` of the settings; a
rerun with other settings is refused rather than mixing counts.

Sharding for clusters: ``shard_index`` of ``num_shards`` takes, ``by="file"``, the sources at
positions ``i, i + n, ...`` of the sorted list, or, ``by="document"``, documents ``i, i + n, ...`` of
every source (after any ``where`` filter). Either way the shards partition the corpus, so merging
the ``n`` shard tables gives exactly the counts of one build over everything (tested).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pdd_metrics.reference import DEFAULT_MAX_TOKENS_PER_DOC
from pdd_tasks.errors import UserError
from pdd_tasks.freq.sources import Source, TableSourceError, select_shard
from pdd_tasks.freq.tables import (
    BuildLimits,
    FrequencyTable,
    _progress_bar,
    _Throughput,
    batch_encoder,
    count_texts,
    merge_tables,
    tokenizer_fingerprint,
    tokenizer_parallelism,
)


__all__ = ["BuildResumeError", "SHARD_BY", "build", "describe_sources", "remove_work_dir"]

logger = logging.getLogger(__name__)

SHARD_BY = ("file", "document")
DEFAULT_DOCS_PER_PART = 100_000
_MANIFEST = "manifest.json"


class BuildResumeError(UserError):
    """A work directory holds parts of a build with other settings."""


def describe_sources(sources: Sequence[Source]) -> str:
    """A short description of a list of sources, for the table's ``corpus`` field."""
    names = [source.describe() for source in sources]
    if not names:
        return "no documents"
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, ..., {names[-1]} ({len(names)} sources)"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name or name)[-60:]


def _empty_table(tokenizer: Any, fingerprint: str, name: str, cap: int | None, corpus: str) -> FrequencyTable:
    return FrequencyTable(
        counts=np.zeros(len(tokenizer), dtype=np.int64),
        tokenizer_name=name,
        tokenizer_fingerprint=fingerprint,
        tokenizer_vocab_size=len(tokenizer),
        total_tokens=0,
        documents=0,
        max_tokens_per_doc=cap,
        corpus=corpus,
        text_bytes=0,
    )


def remove_work_dir(work_dir: Path) -> None:
    """Remove what a build wrote in ``work_dir`` (its manifest and parts), and the folder if that
    leaves it empty; other files (a ``--work-dir`` the user shares with them) stay."""
    if not work_dir.is_dir():
        return
    for path in [work_dir / _MANIFEST, *work_dir.glob("*.part[0-9][0-9][0-9][0-9][0-9].*")]:
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        work_dir.rmdir()


def _check_manifest(work_dir: Path, manifest: dict) -> None:
    path = work_dir / _MANIFEST
    if path.is_file():
        existing = json.loads(path.read_text(encoding="utf-8"))
        if existing != manifest:
            changed = sorted(k for k in set(existing) | set(manifest) if existing.get(k) != manifest.get(k))
            raise BuildResumeError(
                f"{work_dir} holds the parts of a build with other settings (differing: "
                f"{', '.join(changed)}); rerun with the same settings to resume it, or remove the "
                f"directory (or pass another --work-dir) to start afresh"
            )
        return
    work_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


class _Hashing:
    """Passes texts through, keeping the SHA-256 of each (UTF-8); :meth:`digest` of the first ``n``
    is the identity of the documents a part counted (the texts after the ``where`` filter)."""

    def __init__(self, texts) -> None:
        self.texts = iter(texts)
        self.hashes: list[bytes] = []

    def __iter__(self):
        return self

    def __next__(self) -> str:
        text = next(self.texts)
        self.hashes.append(hashlib.sha256(text.encode("utf-8")).digest())
        return text

    def digest(self, n: int) -> str:
        return hashlib.sha256(b"".join(self.hashes[:n])).hexdigest()


def documents_digest(texts, n: int) -> tuple[str, int]:
    """:meth:`_Hashing.digest` of the next ``n`` of ``texts`` (consumed), and how many there were."""
    hashing = _Hashing(itertools.islice(texts, n))
    for _ in hashing:
        pass
    return hashing.digest(n), len(hashing.hashes)


@dataclass
class _PartCounter:
    """Counts the sources of one build into parts of ``docs_per_part`` documents, each saved in
    ``work_dir`` as soon as it is finished, and finds the parts an interrupted run finished.

    A part of a local file is keyed by the content it counted: beside it, ``<part>.json`` holds the
    SHA-256 of its documents' texts; a rerun re-reads (does not re-tokenize) those documents and
    reuses the part only where they are the same, so a file changed since (same name, other
    content) is counted afresh from its first changed part. A Hub source's parts are keyed by its
    name (dataset, files, revision) and its finished parts are not re-read."""

    work_dir: Path
    tokenizer_name: str
    fingerprint: str
    encode: Any
    vocab_size: int
    max_tokens_per_doc: int | None
    limits: BuildLimits
    docs_per_part: int
    batch_size: int
    meter: Any
    document_stride: tuple[int, int] | None  # (shard_index, num_shards) when sharding by document
    resumed: int = 0
    recounted: int = 0

    def part_path(self, position: int, source: Source, part: int) -> Path:
        return self.work_dir / f"{position:05d}-{_slug(source.name)}.part{part:05d}.npz"

    def texts(self, source: Source):
        texts = source.texts()
        if self.document_stride is not None:
            texts = itertools.islice(texts, self.document_stride[0], None, self.document_stride[1])
        return texts

    def stored_parts(self, position: int, source: Source) -> list[tuple[FrequencyTable, str | None]]:
        """The parts of ``source`` an earlier run finished, in order, each with the digest of the
        documents it counted (None where not recorded)."""
        parts = []
        while (path := self.part_path(position, source, len(parts))).is_file():
            table = FrequencyTable.load(path)
            if table.tokenizer_fingerprint != self.fingerprint:
                raise BuildResumeError(f"{path} was counted with another tokenizer; remove {self.work_dir}")
            key = _key_path(path)
            digest = json.loads(key.read_text(encoding="utf-8")).get("documents_sha256") if key.is_file() else None
            parts.append((table, digest))
            if table.documents < self.docs_per_part:
                break
        return parts

    def take(self, table: FrequencyTable, sign: int = 1) -> None:
        """Count a finished part's documents, tokens and bytes against the limits (``sign=-1``: undo)."""
        self.resumed += sign
        self.limits.used_documents += sign * table.documents
        self.limits.used_tokens += sign * table.total_tokens
        self.limits.used_text_bytes += sign * (table.text_bytes or 0)

    def count_source(self, position: int, source: Source) -> list[FrequencyTable]:
        """The parts of ``source``: those finished before (where their documents are unchanged),
        then the rest counted (and saved)."""
        stored = self.stored_parts(position, source)
        parts: list[FrequencyTable] = []
        texts = self.texts(source)
        if source.kind != "file":  # Hub: trusted by name, skipped without reading when complete
            for table, _ in stored:
                parts.append(table)
                self.take(table)
                if table.documents < self.docs_per_part or self.limits.reached:
                    return parts
            for _ in itertools.islice(texts, sum(table.documents for table in parts)):
                pass
        else:
            for table, digest in stored:
                seen, n = documents_digest(texts, table.documents)
                same = digest is not None and seen == digest and n == table.documents
                if same:
                    self.take(table)
                    ends = table.documents < self.docs_per_part and not self.limits.reached
                    if ends and next(texts, None) is not None:  # the file goes on past its old end
                        self.take(table, -1)
                        same = False
                if not same:
                    self.recounted += len(stored) - len(parts)
                    logger.warning(
                        "%s changed since its part %d was counted: counting it again from document %d",
                        source.describe(),
                        len(parts),
                        sum(t.documents for t in parts),
                    )
                    texts = self.texts(source)
                    for _ in itertools.islice(texts, sum(t.documents for t in parts)):
                        pass
                    break
                parts.append(table)
                if table.documents < self.docs_per_part or self.limits.reached:
                    return parts
        if self.limits.reached:
            return parts
        done_docs = sum(table.documents for table in parts)
        while True:
            hashing = _Hashing(itertools.islice(texts, self.docs_per_part))
            table = self.count_part(hashing, source, done_docs)
            path = self.part_path(position, source, len(parts))
            _write_json(_key_path(path), {"documents_sha256": hashing.digest(table.documents)})
            table.save(path)
            parts.append(table)
            done_docs += table.documents
            if table.documents < self.docs_per_part or self.limits.reached:
                return parts

    def count_part(self, texts, source: Source, first_doc: int) -> FrequencyTable:
        result = count_texts(
            texts,
            self.encode,
            self.vocab_size,
            self.max_tokens_per_doc,
            limits=self.limits,
            batch_size=self.batch_size,
            meter=self.meter,
        )
        return FrequencyTable(
            counts=result.counts,
            tokenizer_name=self.tokenizer_name,
            tokenizer_fingerprint=self.fingerprint,
            tokenizer_vocab_size=self.vocab_size,
            total_tokens=result.total_tokens,
            documents=result.documents,
            max_tokens_per_doc=self.max_tokens_per_doc,
            corpus=f"{source.describe()} documents {first_doc}-{first_doc + result.documents}",
            text_bytes=result.text_bytes,
        )


def _key_path(part: Path) -> Path:
    """The file beside a part that records the digest of the documents it counted."""
    return part.with_name(part.name[: -len(".npz")] + ".json")


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value), encoding="utf-8")
    tmp.replace(path)


def _default_corpus(ordered: Sequence[Source], shard_index: int, num_shards: int, shard_by: str, limits) -> str:
    corpus = describe_sources(ordered)
    if num_shards > 1:
        corpus += f" (shard {shard_index} of {num_shards} by {shard_by})"
    if limits.describe():
        corpus += f" (limited to the first {limits.describe()})"
    return corpus


def _work_directory(output: Path | None, work_dir: str | Path | None) -> tuple[Path, bool]:
    """Where the finished parts go (default ``<output>.parts``, else a temporary directory), and
    whether it is temporary."""
    if work_dir is not None:
        return Path(work_dir), False
    if output is not None:
        return output.with_name(output.name + ".parts"), False
    return Path(tempfile.mkdtemp(prefix="freq-table-parts-")), True


def _select(sources: Sequence[Source], shard_index: int, num_shards: int, shard_by: str, docs_per_part: int):
    """The sources sorted by name, and those this shard reads (all of them when sharding by document)."""
    if shard_by not in SHARD_BY:
        raise ValueError(f"shard_by must be one of {SHARD_BY}, got {shard_by!r}")
    if docs_per_part <= 0:
        raise ValueError(f"docs_per_part must be positive, got {docs_per_part}")
    ordered = sorted(sources, key=lambda s: s.name)
    if not ordered:
        raise TableSourceError("no corpus sources given")
    selected = select_shard(ordered, shard_index, num_shards)  # also validates the index
    return ordered, (selected if shard_by == "file" else ordered)


def build(
    sources: Sequence[Source],
    tokenizer: Any,
    *,
    corpus: str | None = None,
    output: str | Path | None = None,
    work_dir: str | Path | None = None,
    max_tokens_per_doc: int | None = DEFAULT_MAX_TOKENS_PER_DOC,
    limits: BuildLimits | None = None,
    shard_index: int = 0,
    num_shards: int = 1,
    shard_by: str = "file",
    docs_per_part: int = DEFAULT_DOCS_PER_PART,
    batch_size: int = 256,
    progress: bool = True,
    tokenizer_name: str | None = None,
    parallel: bool = True,
    keep_parts: bool = False,
) -> FrequencyTable:
    """Count ``sources`` (or shard ``shard_index`` of ``num_shards`` of them) into one table.

    Writes ``output`` (if given) atomically and returns the table. See the module docstring for
    parts, resuming and sharding. ``limits`` apply to this build (this shard) as a whole, in source
    order. Raises :class:`BuildResumeError` if ``work_dir`` holds a build with other settings.
    """
    ordered, selected = _select(sources, shard_index, num_shards, shard_by, docs_per_part)
    limits = limits if limits is not None else BuildLimits()
    fingerprint = tokenizer_fingerprint(tokenizer)
    name = tokenizer_name or str(getattr(tokenizer, "name_or_path", "") or "unknown")
    if corpus is None:
        corpus = _default_corpus(ordered, shard_index, num_shards, shard_by, limits)

    output = Path(output) if output is not None else None
    work_dir, temporary = _work_directory(output, work_dir)
    manifest = {
        "tokenizer_fingerprint": fingerprint,
        "max_tokens_per_doc": max_tokens_per_doc,
        "sources": [[s.name, s.kind, s.format, s.text_field, [list(w) for w in s.where]] for s in ordered],
        "shard": [shard_index, num_shards, shard_by],
        "limits": [limits.documents, limits.tokens, limits.text_bytes],
        "docs_per_part": docs_per_part,
    }
    _check_manifest(work_dir, manifest)
    if not selected:
        logger.warning(
            "shard %d of %d by file selects none of the %d sources: writing an empty table "
            "(use fewer shards or --shard-by document)",
            shard_index,
            num_shards,
            len(ordered),
        )
    bar = _progress_bar(progress)
    counter = _PartCounter(
        work_dir=work_dir,
        tokenizer_name=name,
        fingerprint=fingerprint,
        encode=batch_encoder(tokenizer),
        vocab_size=len(tokenizer),
        max_tokens_per_doc=max_tokens_per_doc,
        limits=limits,
        docs_per_part=docs_per_part,
        batch_size=batch_size,
        meter=_Throughput(bar),
        document_stride=(shard_index, num_shards) if shard_by == "document" and num_shards > 1 else None,
    )
    parts: list[FrequencyTable] = []
    try:
        with tokenizer_parallelism(parallel):
            for position, source in enumerate(selected):
                if limits.reached:
                    break
                parts += counter.count_source(position, source)
    finally:
        bar.close()
    if counter.resumed:
        logger.info("resumed %d finished part(s) from %s", counter.resumed, work_dir)
    if counter.recounted:
        logger.warning("%d finished part(s) in %s were of changed input and counted again", counter.recounted, work_dir)
    if parts:
        table = merge_tables(parts, corpus=corpus)
    else:
        table = _empty_table(tokenizer, fingerprint, name, max_tokens_per_doc, corpus)
    if output is not None:
        table.save(output)
    if (output is not None and not keep_parts) or temporary:
        shutil.rmtree(work_dir, ignore_errors=True)
    return table
