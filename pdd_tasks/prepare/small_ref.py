"""Small-Ref's reference model: loaded, batched and cached by the task itself, in the same run.

Small-Ref (Carlini et al. 2021; DC-PDD Appendix A.1) needs each text's log-likelihood under a second,
reference model (:func:`pdd_metrics.small_ref_score`). The target may run on any backend (hf,
vLLM, a completions server); the reference is any causal LM that transformers loads (a local
directory or a hub id in the local hub cache), named by the task setting ``small_ref_model``.

:func:`prepare` (the registry's per-run hook) checks the name at once (config and tokenizer load,
before the target's forward passes) and returns a :class:`ReferenceScores`. Its first
:meth:`~ReferenceScores.logprobs` call scores every text of the run (``task.instances``) with the
reference model, in batches with a progress bar, and appends each text's per-token log-probs to a
cache file; a later run with the same reference model reads them instead.

How a text is scored, the rule of the target (:func:`pdd_tasks.backends.base.split_after_start_token`):
after the reference tokenizer's start token (BOS, else EOS; the text's own first token if it is
that token), every text token, log-softmax in float32. With ``truncate: true`` the reference scores
the part of the text the target scored (the target's truncated beginning, as Zlib does), itself cut
to the reference's context window if still longer; without it, a text longer than the reference's
window is an error, as for the target.

The cache: ``$LM_EVAL_PDD_HOME/small_ref/<model>-<fingerprint>.jsonl`` (default
``~/.cache/lm_eval_pdd/small_ref/``), or the file named by ``small_ref_cache``. Its first line
names the reference model and its fingerprint (:func:`reference_fingerprint`: a hash of the
model's config, tokenizer and weight files, and the dtype); each other line is one text (the
SHA-256 of its UTF-8 bytes, its token count and its float32 log-probs, base64). A file written for
another fingerprint (another model, or the same directory with changed files) is refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from pdd_tasks.backends.base import ContextLimit, PerTokenRequest, encode_text, model_files_fingerprint
from pdd_tasks.backends.token_stats import position_stats
from pdd_tasks.errors import UserError
from pdd_tasks.paths import pdd_home
from pdd_tasks.registry import short_name


logger = logging.getLogger(__name__)

#: Cache file ``kind`` and format version.
CACHE_KIND = "lm-eval-pdd/small-ref-cache"
CACHE_FORMAT = 1
#: Bumped when the way a text is scored changes, so old cache entries are not reused.
SCORING_VERSION = "start-token-v1"


class ReferenceModelError(UserError):
    """The Small-Ref reference model could not be loaded, or does not fit the texts."""


class ReferenceCacheError(UserError):
    """A Small-Ref cache file that is not one, or was written for another reference model."""


def cache_dir() -> Path:
    """``<pdd_home()>/small_ref`` (``$LM_EVAL_PDD_HOME`` or ``~/.cache/lm_eval_pdd``)."""
    return pdd_home() / "small_ref"


def text_key(text: str) -> str:
    """SHA-256 hex digest of the text's UTF-8 bytes (a cache key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_directory(name: str) -> Path:
    """The local directory of a reference model: ``name`` itself, or its snapshot in the local
    hub cache, downloaded first (config, tokenizer and safetensors weights, else ``.bin``) unless
    ``HF_HUB_OFFLINE`` is set."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve()
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=name, local_files_only=True))
    except Exception as error:
        if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
            raise ReferenceModelError(
                f"metadata small_ref_model={name!r}: no such directory, and no copy of a hub model of that name in the "
                f"local hub cache ({type(error).__name__}; HF_HUB_OFFLINE is set). Give the directory of a causal LM "
                f"saved with save_pretrained (config.json, weights, tokenizer), or download the hub model first "
                f"(huggingface-cli download {name})."
            ) from None
    try:  # pragma: no cover - needs the network
        patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken"]
        directory = Path(snapshot_download(repo_id=name, allow_patterns=patterns))
        if not list(directory.glob("*.safetensors")):
            directory = Path(snapshot_download(repo_id=name, allow_patterns=[*patterns, "*.bin"]))
        return directory
    except Exception as error:  # pragma: no cover - needs the network
        raise ReferenceModelError(
            f"metadata small_ref_model={name!r}: no such directory, and the hub model of that name could not be "
            f"downloaded ({type(error).__name__}: {str(error)[:200]}). Give the directory of a causal LM saved with "
            f"save_pretrained, or a hub id that exists."
        ) from None


def reference_fingerprint(directory: Path, dtype: str) -> str:
    """SHA-256 identity of a reference model as it scores: its files and the dtype
    (:func:`pdd_tasks.backends.base.model_files_fingerprint`, the identity the target's answers
    carry too). Re-saving or fine-tuning a model in place therefore gives a new fingerprint (its old
    cache entries are not reused); copying a directory does too (a cache miss, never a wrong hit).
    """
    return model_files_fingerprint(directory, [f"scoring={SCORING_VERSION}", f"dtype={dtype}"])


def check_causal_lm(config, name: str, directory: Path) -> None:
    """Refuse a reference model that is not a causal LM (a masked LM such as BERT, an encoder-decoder):
    ``AutoModelForCausalLM`` would load e.g. a ``BertForMaskedLM`` as ``BertLMHeadModel``, whose
    left-to-right log-probs are those of an untrained head, and Small-Ref would report a number.

    The config's ``architectures`` (what the model was saved as) must hold a class that transformers
    lists as a causal LM (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``, e.g. ``GPT2LMHeadModel``,
    ``LlamaForCausalLM``); a config without ``architectures`` must have a ``model_type`` of that list
    that is not an encoder's (BERT, RoBERTa and the like save ``architectures``)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    causal = {n for v in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values() for n in ((v,) if isinstance(v, str) else v)}
    architectures = list(getattr(config, "architectures", None) or [])
    model_type = getattr(config, "model_type", None)
    if architectures:
        if any(arch in causal or arch.endswith(("ForCausalLM", "LMHeadModel")) for arch in architectures):
            return
        what = f"a {' / '.join(architectures)} (model type {model_type!r})"
    elif model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not getattr(config, "is_encoder_decoder", False):
        return
    else:
        what = f"a model of type {model_type!r} without `architectures` in its config.json"
    raise ReferenceModelError(
        f"metadata small_ref_model={name!r}: {directory} holds {what}, not a causal LM. Small-Ref compares the "
        f"target's log-probs with a reference causal LM's left-to-right log-probs; a masked LM (BERT, RoBERTa) or "
        f"an encoder-decoder gives none. Give a causal LM (a class ending in ForCausalLM or LMHeadModel, e.g. a "
        f"small model of the target's family such as EleutherAI/pythia-70m), or drop small_ref_model."
    )


def default_cache_path(name: str, fingerprint: str) -> Path:
    """``<cache_dir()>/<last part of the model name>-<fingerprint[:16]>.jsonl``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", short_name(name)) or "model"
    return cache_dir() / f"{stem}-{fingerprint[:16]}.jsonl"


def _encode_logprobs(values: np.ndarray) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


def _decode_logprobs(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").copy()


class ReferenceCache:
    """The per-token log-probs a reference model gave texts, in a JSON-lines file (module doc)."""

    def __init__(self, path: Path, model: str, fingerprint: str) -> None:
        self.path = path
        self.model = model
        self.fingerprint = fingerprint
        self.entries: dict[str, np.ndarray] = {}
        if path.is_file() and path.stat().st_size:
            self._read()

    def _read(self) -> None:
        with open(self.path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        try:
            header = json.loads(lines[0])
            assert header["kind"] == CACHE_KIND
        except Exception:
            raise ReferenceCacheError(
                f"{self.path} is not a Small-Ref cache file (its first line is not a {CACHE_KIND} header). "
                f"Name another file with small_ref_cache, or drop the setting to use the default cache."
            ) from None
        if header.get("fingerprint") != self.fingerprint:
            raise ReferenceCacheError(
                f"the Small-Ref cache {self.path} was written for reference model {header.get('model')!r} (fingerprint "
                f"{str(header.get('fingerprint'))[:16]}), not for {self.model!r} as it is now (fingerprint "
                f"{self.fingerprint[:16]}): another model, another dtype, or the model's files changed since. Name "
                f"another file with small_ref_cache, or drop the setting (each model then has its own cache)."
            )
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
                values = _decode_logprobs(entry["logprobs"])
                assert values.size == entry["tokens"]
            except Exception:  # a line cut short by an interrupted run: that text is scored again
                logger.warning("Small-Ref cache %s line %d is unreadable; its text is scored again.", self.path, number)
                continue
            self.entries[entry["text_sha256"]] = values

    def add(self, items: list[tuple[str, np.ndarray]]) -> None:
        """Append ``(text key, log-probs)`` entries (the header first, for a new file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        if not self.path.is_file() or not self.path.stat().st_size:
            header = {"kind": CACHE_KIND, "format_version": CACHE_FORMAT, "model": self.model}
            lines.append(json.dumps({**header, "fingerprint": self.fingerprint}))
        for key, values in items:
            self.entries[key] = values
            lines.append(
                json.dumps({"text_sha256": key, "tokens": int(values.size), "logprobs": _encode_logprobs(values)})
            )
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))


class _TokenizerShim:
    """What :func:`split_after_start_token` reads of a backend, for the reference tokenizer."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if start is None:
            raise ReferenceModelError(
                f"the Small-Ref reference tokenizer {tokenizer.name_or_path!r} has neither a BOS nor an EOS token, so "
                f"there is no start token to score a text after. Use a causal LM whose tokenizer has one."
            )
        self.prefix_token_id = int(start)

    def tok_encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.tokenizer(text, add_special_tokens=add_special_tokens).input_ids


class ReferenceScores:
    """Small-Ref's prepared object: the reference model's per-token log-probs of the run's texts.

    Built by :func:`prepare` (cheap: the config and tokenizer load, the cache is read); the model
    loads and scores the run's texts at the first :meth:`logprobs` call.
    """

    def __init__(self, task, settings) -> None:
        self.task = task
        self.task_name = task.config.task
        self.name = settings.small_ref_model
        self.dtype = settings.small_ref_dtype
        self.batch_size = settings.small_ref_batch_size
        self.truncate = settings.truncate
        self.device = settings.small_ref_device
        self.directory = model_directory(self.name)
        try:
            from transformers import AutoConfig, AutoTokenizer

            self.config = AutoConfig.from_pretrained(self.directory)
            self.tokenizer = AutoTokenizer.from_pretrained(self.directory)
        except Exception as error:
            raise ReferenceModelError(
                f"metadata small_ref_model={self.name!r}: {self.directory} holds no causal LM that transformers can "
                f"load ({type(error).__name__}: {str(error)[:300]}). Give the directory of a model saved with "
                f"save_pretrained (config.json, weights, tokenizer files)."
            ) from None
        check_causal_lm(self.config, self.name, self.directory)
        from lm_eval.models.utils import resolve_max_length

        self.window = resolve_max_length(self.config, self.tokenizer, default=2048)
        self.shim = _TokenizerShim(self.tokenizer)
        self.fingerprint = reference_fingerprint(self.directory, self.dtype)
        path = (
            Path(settings.small_ref_cache)
            if settings.small_ref_cache
            else default_cache_path(self.name, self.fingerprint)
        )
        self.cache = ReferenceCache(path, self.name, self.fingerprint)
        self.model = None
        self.scored = 0
        self.from_cache = 0
        self.truncated = 0
        self.seconds = 0.0
        self._checked: set[str] = set()
        self._doc_ids: dict[str, Any] = {}
        self._all_done = False

    # -- encoding --------------------------------------------------------------------------------

    def _limit(self) -> ContextLimit:
        return ContextLimit(
            room=self.window,
            limit=f"the Small-Ref reference model's context window of {self.window} tokens ({self.name})",
            fixes="Score shorter texts, or use a reference model with a longer context",
            window=f"the Small-Ref reference model's context window ({self.window} tokens)",
        )

    def encode(self, text: str) -> tuple[list[int], list[int], int]:
        """``(start token, text tokens, tokens cut)`` of ``text`` for the reference model."""
        request = PerTokenRequest(
            request_type="loglikelihood",
            doc={"text": text},
            arguments=("", text),
            idx=0,
            metadata=(self.task_name, self._doc_ids.get(text, "?"), 1),
            truncate=self.truncate,
        )
        return encode_text(self.shim, request, self._limit())

    # -- scoring ---------------------------------------------------------------------------------

    def _resolved_device(self) -> str:
        import torch

        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.device

    def _load_model(self):
        if self.model is None:
            import torch
            from transformers import AutoModelForCausalLM

            device = self._resolved_device()
            try:
                model = AutoModelForCausalLM.from_pretrained(self.directory, dtype=getattr(torch, self.dtype))
                self.model = model.to(device).eval()
            except Exception as error:
                raise ReferenceModelError(
                    f"metadata small_ref_model={self.name!r}: the model in {self.directory} could not be loaded as a "
                    f"causal LM in {self.dtype} on {device} ({type(error).__name__}: {str(error)[:300]}). Give a causal "
                    f"LM (AutoModelForCausalLM), or change small_ref_device / small_ref_dtype."
                ) from None
            self.device_used = device
        return self.model

    def _score_batch(self, batch: list[tuple[list[int], list[int]]]) -> list[np.ndarray]:
        """Per-token log-probs (float32) of a batch of ``(start, tokens)``: one forward pass, right
        padding without an attention mask (causal: padding after a text does not change it), and the
        log-softmax of :func:`pdd_tasks.backends.token_stats.position_stats`, as the target's HF
        capture computes them."""
        import torch

        model = self._load_model()
        sequences = [(start + tokens)[:-1] for start, tokens in batch]
        width = max(map(len, sequences))
        ids = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, sequence in enumerate(sequences):
            ids[row, : len(sequence)] = torch.tensor(sequence)
        with torch.inference_mode():
            try:
                logits = model(ids.to(self.device_used)).logits
            except torch.OutOfMemoryError:
                raise ReferenceModelError(
                    f"the Small-Ref reference model {self.name!r} ran out of memory on {self.device_used} for a batch "
                    f"of {len(batch)} texts of up to {width} tokens. Lower small_ref_batch_size, or set "
                    f"small_ref_device (e.g. cpu; with --model vllm, the target holds most of the GPU)."
                ) from None
            answers = []
            for row, (start, tokens) in enumerate(batch):
                first = len(start) - 1
                targets = torch.tensor(tokens, device=logits.device)
                stats = position_stats(logits[row, first : first + len(tokens)], targets)
                answers.append(stats.logprobs.cpu().numpy().astype(np.float32))
        return answers

    def _score_texts(self, texts: list[str]) -> None:
        """Score the texts that are not in the cache (batched, longest first) and cache them."""
        todo: dict[str, tuple[list[int], list[int]]] = {}
        for text in texts:
            start, tokens, cut = self.encode(text)  # errors on too long texts even when cached
            key = text_key(text)
            if key in self._checked:
                continue
            self._checked.add(key)
            self.truncated += bool(cut)
            cached = self.cache.entries.get(key)
            if cached is not None and cached.size == len(tokens):
                self.from_cache += 1
            else:
                todo.setdefault(key, (start, tokens))
        if not todo:
            return
        from tqdm import tqdm

        began = time.perf_counter()
        order = sorted(todo.items(), key=lambda item: -len(item[1][0] + item[1][1]))
        with tqdm(total=len(order), desc=f"Small-Ref reference model ({self.name})") as bar:
            for index in range(0, len(order), self.batch_size):
                chunk = order[index : index + self.batch_size]
                answers = self._score_batch([pair for _, pair in chunk])
                self.cache.add([(key, values) for (key, _), values in zip(chunk, answers, strict=True)])
                bar.update(len(chunk))
        self.scored += len(order)
        self.seconds += time.perf_counter() - began

    def _run_texts(self) -> list[str]:
        instances = [inst for inst in getattr(self.task, "_instances", None) or [] if inst.idx == 0]
        for inst in instances:
            self._doc_ids.setdefault(inst.doc["text"], inst.doc_id)
        return list(dict.fromkeys(inst.doc["text"] for inst in instances))

    def logprobs(self, text: str) -> np.ndarray:
        """The reference model's log p of each token of ``text`` (after its start token)."""
        if not self._all_done:
            self._all_done = True
            self._score_texts(self._run_texts())
        if text_key(text) not in self._checked:  # e.g. the target's truncated beginning of a text
            self._score_texts([text])
        self.record()
        return self.cache.entries[text_key(text)]

    def record(self) -> None:
        """Which reference model was used, in the results JSON (``metadata.small_ref_used``)."""
        self.task.config.metadata["small_ref_used"] = {
            "model": self.name,
            "directory": str(self.directory),
            "fingerprint": self.fingerprint,
            "dtype": self.dtype,
            "device": getattr(self, "device_used", self._resolved_device()),
            "context_window": self.window,
            "start_token": self.tokenizer.convert_ids_to_tokens(self.shim.prefix_token_id),
            "cache": str(self.cache.path),
            "texts_from_cache": self.from_cache,
            "texts_scored": self.scored,
            "texts_truncated": self.truncated,
            "reference_pass_seconds": round(self.seconds, 3),
        }


def prepare(task, settings) -> ReferenceScores:
    """The registry's ``prepare`` hook of Small-Ref (once per run)."""
    return ReferenceScores(task, settings)
