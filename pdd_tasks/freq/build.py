"""Resumable, shardable frequency-table builds (``lm-eval-pdd build-table``).

A build counts the documents of a list of :class:`~pdd_tasks.freq.sources.Source` units (sorted by
name) in **parts** of ``docs_per_part`` documents. Every finished part is written at once, atomically,
as its own table in a work directory (default ``<output>.parts/``); a rerun of the same command skips
the finished parts (re-reading, not re-tokenizing, their documents), so an interrupted build loses
at most the part in flight. At the end the parts are merged (:func:`merge_tables`) into the output
and the work directory is removed. The work directory holds a ``manifest.json`` of the settings; a
rerun with other settings is refused rather than mixing counts.

Sharding for clusters: ``shard_index`` of ``num_shards`` takes, ``by="file"``, the sources at
positions ``i, i + n, ...`` of the sorted list, or, ``by="document"``, documents ``i, i + n, ...`` of
every source (after any ``where`` filter). Either way the shards partition the corpus, so merging
the ``n`` shard tables gives exactly the counts of one build over everything (tested).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pdd_metrics.reference import DEFAULT_MAX_TOKENS_PER_DOC
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


__all__ = ["BuildResumeError", "SHARD_BY", "build", "describe_sources"]

logger = logging.getLogger(__name__)

SHARD_BY = ("file", "document")
DEFAULT_DOCS_PER_PART = 100_000
_MANIFEST = "manifest.json"


class BuildResumeError(ValueError):
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
    if shard_by not in SHARD_BY:
        raise ValueError(f"shard_by must be one of {SHARD_BY}, got {shard_by!r}")
    if docs_per_part <= 0:
        raise ValueError(f"docs_per_part must be positive, got {docs_per_part}")
    ordered = sorted(sources, key=lambda s: s.name)
    if not ordered:
        raise TableSourceError("no corpus sources given")
    selected = select_shard(ordered, shard_index, num_shards) if shard_by == "file" else ordered
    if shard_by == "document":
        select_shard(ordered, shard_index, num_shards)  # validates the index
    limits = limits if limits is not None else BuildLimits()
    fingerprint = tokenizer_fingerprint(tokenizer)
    name = tokenizer_name or str(getattr(tokenizer, "name_or_path", "") or "unknown")

    if corpus is None:
        corpus = describe_sources(ordered)
        if num_shards > 1:
            corpus += f" (shard {shard_index} of {num_shards} by {shard_by})"
        if limits.describe():
            corpus += f" (limited to the first {limits.describe()})"

    output = Path(output) if output is not None else None
    temporary = work_dir is None and output is None
    if work_dir is None:
        work_dir = (
            Path(tempfile.mkdtemp(prefix="freq-table-parts-"))
            if temporary
            else output.with_name(output.name + ".parts")
        )
    work_dir = Path(work_dir)
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
    encode = batch_encoder(tokenizer)
    vocab_size = len(tokenizer)
    parts: list[FrequencyTable] = []
    resumed = 0
    bar = _progress_bar(progress)
    meter = _Throughput(bar)
    try:
        with tokenizer_parallelism(parallel):
            for position, source in enumerate(selected):
                if limits.reached:
                    break
                done_docs = 0
                part = 0
                complete = False
                # Finished parts of this source (from an interrupted earlier run).
                while True:
                    path = work_dir / f"{position:05d}-{_slug(source.name)}.part{part:05d}.npz"
                    if not path.is_file():
                        break
                    table = FrequencyTable.load(path)
                    if table.tokenizer_fingerprint != fingerprint:
                        raise BuildResumeError(f"{path} was counted with another tokenizer; remove {work_dir}")
                    parts.append(table)
                    resumed += 1
                    done_docs += table.documents
                    limits.used_documents += table.documents
                    limits.used_tokens += table.total_tokens
                    limits.used_text_bytes += table.text_bytes or 0
                    part += 1
                    if table.documents < docs_per_part or limits.reached:
                        complete = True
                        break
                if complete or limits.reached:
                    continue
                texts = source.texts()
                if shard_by == "document" and num_shards > 1:
                    texts = itertools.islice(texts, shard_index, None, num_shards)
                if done_docs:
                    for _ in itertools.islice(texts, done_docs):  # skip what finished parts counted
                        pass
                while True:
                    result = count_texts(
                        itertools.islice(texts, docs_per_part),
                        encode,
                        vocab_size,
                        max_tokens_per_doc,
                        limits=limits,
                        batch_size=batch_size,
                        meter=meter,
                    )
                    table = FrequencyTable(
                        counts=result.counts,
                        tokenizer_name=name,
                        tokenizer_fingerprint=fingerprint,
                        tokenizer_vocab_size=vocab_size,
                        total_tokens=result.total_tokens,
                        documents=result.documents,
                        max_tokens_per_doc=max_tokens_per_doc,
                        corpus=f"{source.describe()} documents {done_docs}-{done_docs + result.documents}",
                        text_bytes=result.text_bytes,
                    )
                    table.save(work_dir / f"{position:05d}-{_slug(source.name)}.part{part:05d}.npz")
                    parts.append(table)
                    done_docs += result.documents
                    part += 1
                    if result.documents < docs_per_part or limits.reached:
                        break
    finally:
        bar.close()
    if resumed:
        logger.info("resumed %d finished part(s) from %s", resumed, work_dir)
    if parts:
        table = merge_tables(parts, corpus=corpus)
    else:
        table = _empty_table(tokenizer, fingerprint, name, max_tokens_per_doc, corpus)
    if output is not None:
        table.save(output)
    if (output is not None and not keep_parts) or temporary:
        shutil.rmtree(work_dir, ignore_errors=True)
    return table
