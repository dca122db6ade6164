"""Per-token log-prob capture for lm-eval's stock vLLM backend (``--model vllm``).

The stock backend (``lm_eval/models/vllm_causallms.py``, class ``VLLM``) sends every loglikelihood
request as one prompt with ``SamplingParams(prompt_logprobs=1)`` and sums the returned log-probs
(``VLLM._parse_logprobs``). :func:`score_per_token_vllm` answers the pdd tasks'
:class:`~pdd_tasks.backends.base.PerTokenRequest` s with a :class:`~pdd_tasks.backends.base.TokenScores`
instead (``VLLM.loglikelihood`` routes them here: patch ``vllm-loglikelihood`` of
:mod:`pdd_tasks.lm_eval_patches`):

* one prompt per text: the start token + the text's tokens, exactly as stock
  ``TemplateLM.loglikelihood`` builds them for an empty context, sent through the backend's own
  ``_model_generate`` (so data parallelism and LoRA work as in the stock path);
* ``prompt_logprobs=k`` (task setting ``topk_logprobs``, default 20 = vLLM's default
  ``max_logprobs``): vLLM returns, for every prompt position, the actual token and the k most likely
  ones. The token log-probs and the top-1 log-prob (Gap-K%) are exact; Min-K%++'s mu/sigma (and
  Gap-K%'s sigma) are estimated from the top k with
  :func:`pdd_metrics.approximate_mu_sigma` (the unreported mass spread uniformly over the rest of
  the vocabulary);
* or, with task setting ``exact_mu_sigma: true``, ``prompt_logprobs=-1``: the whole distribution,
  |V| log-probs per text token (49,152 for SmolLM2, 151,936 for Qwen2), which vLLM refuses unless
  the engine allows it: ``--model_args ...,max_logprobs=-1``. vLLM's worker sends |V| + 1 values
  per token to this process, where stock vLLM builds them into Python objects (``flat_logprobs``
  lists, four appends per value: most of the cost). Exact requests carry a mark
  (``SamplingParams.extra_args[ARRAYS_KEY]``) by which patch ``vllm-prompt-logprob-arrays`` of
  :mod:`pdd_tasks.lm_eval_patches` (vLLM 0.32) keeps those values as the arrays vLLM received
  (:class:`PromptLogprobArrays`), read here without a Python object per value; where the patch is
  not in effect (another vLLM, data-parallel replicas) vLLM's own lists are read, with the same
  result. Texts are sent in batches of at most :data:`EXACT_ENTRIES_PER_BATCH` values. On an engine
  made with ``worker_extension_cls=pdd_tasks.lm_eval_patches.VllmWorkerExtension`` (vLLM 0.32), exact
  requests also carry :data:`WORKER_STATS_KEY`, and vLLM's worker (patch ``vllm-worker-prompt-stats``)
  computes log p(x_i), the most likely token, max log p, mu and sigma there and sends those
  (:func:`prompt_stats_rows`) instead of the |V| + 1 values, sorted, per token.

The results JSON records which was used (``configs.<task>.metadata.token_scores.mu_sigma``).

vLLM imports CUDA-only code, so nothing here imports it at module level: the routing is patched in
only when lm-eval has already imported its vLLM backend module (:data:`VLLM_MODULE`), which the CLI
does when it creates a ``--model vllm`` model, before the tasks are loaded (docs/architecture.md,
"Order in an lm_eval run").

Written against lm-eval 0.4.13 and vLLM 0.32.0 (``vllm/logprobs.py``: ``Logprob``,
``FlatLogprobs``, ``append_logprobs_for_next_position``; ``vllm/v1/engine/logprobs.py``:
``LogprobsProcessor._update_prompt_logprobs``; ``vllm/outputs.py``: ``RequestOutput``). Per prompt
position i >= 1 vLLM lists the actual token x_i first and then the top k; the dict form
(``list[dict[int, Logprob] | None]``) merges a duplicate x_i, the flat form (``FlatLogprobs``) keeps
it; position 0 has nothing (``None`` or an empty range). Both forms are read here, and
:class:`PromptLogprobArrays` (vLLM 0.32's ``_update_prompt_logprobs`` arrays: a row per position, x_i first).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from pdd_metrics import approximate_mu_sigma
from pdd_tasks.backends.base import (
    ContextLimit,
    EncodedText,
    ModelInfo,
    PerTokenRequest,
    TokenScores,
    answer_groups,
    answer_per_token,
    cached_model_info,
    refuse_gradients,
)
from pdd_tasks.backends.token_stats import mu_sigma, position_stats
from pdd_tasks.errors import UserError


logger = logging.getLogger(__name__)

#: lm-eval's vLLM backend module (imports vllm; imported by lm-eval when a ``--model vllm`` model is made).
VLLM_MODULE = "lm_eval.models.vllm_causallms"

#: Exact mode: at most this many log-prob values (prompt tokens x |V|) per call to vLLM, which bounds
#: the memory of the returned values: 2**24 values is ~1.7 GB as vLLM's Python lists (about 100 bytes
#: per value), ~200 MB as arrays (:class:`PromptLogprobArrays`: token id, log-prob), 340 tokens of a
#: 49,152-token vocabulary.
EXACT_ENTRIES_PER_BATCH = 2**24

#: The ``SamplingParams.extra_args`` key that marks an exact request (``prompt_logprobs=-1``) whose
#: prompt log-probs patch ``vllm-prompt-logprob-arrays`` keeps as arrays; vLLM itself reads only its
#: own keys of ``extra_args``.
ARRAYS_KEY = "lm_eval_pdd_prompt_logprob_arrays"

#: The ``SamplingParams.extra_args`` key that also marks an exact request whose per-position values
#: vLLM's worker computes itself (patch ``vllm-worker-prompt-stats``, on an engine made with
#: ``worker_extension_cls``): it sends :data:`STATS_COLUMNS` values per position instead of |V| + 1.
WORKER_STATS_KEY = "lm_eval_pdd_prompt_stats"

#: Width of the rows the worker sends for a :data:`WORKER_STATS_KEY` request, in vLLM's own
#: ``LogprobsTensors`` (token ids, log-probs, rank of x_i): token ids ``[x_i, argmax, -1, -1]`` and
#: values ``[log p(x_i), max log p, mu, sigma]`` (:func:`prompt_stats_rows`). The -1 ids (no token has
#: one) tell them from a 3-token vocabulary's full rows.
STATS_COLUMNS = 4

#: The token id of the columns that hold a statistic, not a token's log-prob.
NO_TOKEN = -1

#: Positions per call of approximate_mu_sigma (bounds its (positions x entries) float64 arrays).
_VALUES_PER_BLOCK = 2**22


# -- what to ask for ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LogprobRequest:
    """How many log-probs per prompt position to ask vLLM for: k, or all (``exact``)."""

    topk: int
    exact: bool
    on_worker: bool = False  # exact: mu/sigma computed by vLLM's worker (patch vllm-worker-prompt-stats)

    @classmethod
    def of(cls, request: PerTokenRequest) -> LogprobRequest:
        exact = bool(getattr(request, "exact_mu_sigma", False))
        topk = getattr(request, "topk_logprobs", 20)
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
            raise ValueError(f"topk_logprobs={topk!r}: expected a whole number >= 1, e.g. 20.")
        return cls(topk=0 if exact else topk, exact=exact)

    @property
    def prompt_logprobs(self) -> int:
        return -1 if self.exact else self.topk

    def describe(self) -> str:
        if self.exact and self.on_worker:
            return "exact (full vocabulary, computed on vLLM's worker: patch vllm-worker-prompt-stats)"
        if self.exact:
            return "exact (full vocabulary from vLLM prompt_logprobs=-1)"
        return (
            f"top-{self.topk} approximation (vLLM prompt_logprobs={self.topk}; unreported mass spread "
            f"uniformly over the rest of the vocabulary, pdd_metrics.approximate_mu_sigma)"
        )


def sampling_params(sampling_params_cls, wanted: LogprobRequest):
    """The ``SamplingParams`` of a scoring prompt: one greedy token (vLLM must generate at least one)
    and the prompt log-probs, as stock ``VLLM._model_generate`` builds them, with
    ``prompt_logprobs=k`` (or -1) instead of 1 and, where the installed vLLM has them,
    ``flat_logprobs=True`` (a few flat lists instead of one ``Logprob`` object per value) and, in exact
    mode, the mark :data:`ARRAYS_KEY` in ``extra_args`` (:class:`PromptLogprobArrays`), and
    :data:`WORKER_STATS_KEY` where the worker computes the values (``wanted.on_worker``)."""
    kwargs = dict(temperature=0, max_tokens=1, detokenize=False, prompt_logprobs=wanted.prompt_logprobs)
    fields = _field_names(sampling_params_cls)
    if "flat_logprobs" in fields:
        kwargs["flat_logprobs"] = True
    if wanted.exact and "extra_args" in fields:
        kwargs["extra_args"] = {ARRAYS_KEY: True, **({WORKER_STATS_KEY: True} if wanted.on_worker else {})}
    return sampling_params_cls(**kwargs)


class PromptLogprobArrays:
    """One request's prompt log-probs kept as the arrays vLLM's engine sent them.

    What vLLM 0.32's ``LogprobsProcessor._update_prompt_logprobs`` receives per prefill chunk
    (``LogprobsTensors``): per prompt position i >= 1 a row of token ids and their log-probs, x_i
    first and then the top k (all |V| for ``prompt_logprobs=-1``), and x_i's rank. Stock vLLM turns
    each value into list entries (``FlatLogprobs.append_fast``); patch ``vllm-prompt-logprob-arrays``
    of :mod:`pdd_tasks.lm_eval_patches` appends the chunk here instead, for the requests marked with
    :data:`ARRAYS_KEY`. Like vLLM's containers it counts position 0 (which has no log-probs), so its
    length is the prompt's. It stands in ``RequestOutput.prompt_logprobs`` and is read by
    :func:`parse_prompt_logprobs` only.
    """

    def __init__(self) -> None:
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._joined: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def append_chunk(self, token_ids, logprobs, ranks) -> None:
        """Add the rows of one prefill chunk (tensors or arrays of shape (rows, k + 1), (rows, k + 1), (rows,))."""
        chunk = tuple(np.asarray(value) for value in (token_ids, logprobs, ranks))
        if chunk[0].shape != chunk[1].shape or chunk[0].ndim != 2 or chunk[2].shape != chunk[0].shape[:1]:
            raise ValueError(
                f"prompt log-probs of shapes {[value.shape for value in chunk]}: expected token ids and "
                f"log-probs (rows, k + 1) and ranks (rows,)"
            )
        self._chunks.append(chunk)
        self._joined = None

    def _rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._joined is None:
            if not self._chunks:
                empty = np.empty((0, 0))
                self._joined = (empty.astype(np.int64), empty, np.empty(0, dtype=np.int64))
            else:
                self._joined = tuple(np.concatenate(parts) for parts in zip(*self._chunks, strict=True))
                self._chunks = [self._joined]
        return self._joined

    @property
    def token_ids(self) -> np.ndarray:
        """(positions - 1, k + 1): per position i >= 1, x_i and then the top k token ids."""
        return self._rows()[0]

    @property
    def logprobs(self) -> np.ndarray:
        """(positions - 1, k + 1): their log-probs (float32, as the engine computed them)."""
        return self._rows()[1]

    @property
    def ranks(self) -> np.ndarray:
        """(positions - 1,): x_i's rank (1 = the most likely token)."""
        return self._rows()[2]

    def __len__(self) -> int:
        return 1 + sum(chunk[0].shape[0] for chunk in self._chunks)

    def __repr__(self) -> str:
        return f"PromptLogprobArrays(positions={len(self)}, per position={self.token_ids.shape[1]})"


def wants_prompt_logprob_arrays(sampling_params, detokenizes: bool) -> bool:
    """Whether vLLM's output processing keeps a request's prompt log-probs as
    :class:`PromptLogprobArrays`: an exact request of this capture (``prompt_logprobs=-1``, the mark
    :data:`ARRAYS_KEY`) that asks for no token strings (``detokenize=False``: the arrays hold none)."""
    extra = getattr(sampling_params, "extra_args", None) or {}
    return extra.get(ARRAYS_KEY) is True and sampling_params.prompt_logprobs == -1 and not detokenizes


def wants_worker_prompt_stats(sampling_params) -> bool:
    """Whether vLLM's worker sends a request's :func:`prompt_stats_rows` instead of its full prompt
    log-probs (patch ``vllm-worker-prompt-stats``): an exact request marked :data:`WORKER_STATS_KEY`."""
    extra = getattr(sampling_params, "extra_args", None) or {}
    return extra.get(WORKER_STATS_KEY) is True and getattr(sampling_params, "prompt_logprobs", None) == -1


def prompt_stats_rows(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What vLLM's worker sends per prompt position for a :data:`WORKER_STATS_KEY` request, in the
    layout of vLLM's ``LogprobsTensors`` (:data:`STATS_COLUMNS` wide).

    The values are the HF capture's (:func:`pdd_tasks.backends.token_stats.position_stats`: float32
    log-softmax, as vLLM's ``Sampler.compute_logprobs``; Min-K%++ Eq. 3-4's mu and sigma), from the
    same logits vLLM would sort and send whole.

    Args:
        logits: (n, |V|), the model's outputs at the positions that predict x_1..x_n.
        targets: (n,), the token ids x_1..x_n.

    Returns:
        token ids (n, 4) ``[x_i, argmax_v, -1, -1]``, values (n, 4) ``[log p(x_i), max_v log p, mu,
        sigma]``, and x_i's rank (n,) as vLLM counts it (1 + the tokens more likely).
    """
    stats = position_stats(logits, targets)
    best = logits.argmax(-1)
    ranks = (logits > logits.gather(-1, targets[:, None])).sum(-1) + 1
    none = torch.full_like(targets, NO_TOKEN)
    ids = torch.stack([targets, best, none, none], 1)
    values = torch.stack([stats.logprobs, stats.top1, stats.mu, stats.sigma], 1)
    return ids, values, ranks


def _field_names(cls) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {field.name for field in dataclasses.fields(cls)}
    return set(getattr(cls, "__struct_fields__", ()))  # vLLM < 0.11: msgspec.Struct


def _engine_model_config(lm):
    """vLLM's ModelConfig of a single-engine VLLM (None with data parallelism: no engine here)."""
    try:
        return lm.model.llm_engine.model_config
    except AttributeError:
        return None


def vllm_vocab_size(lm) -> int:
    """|V|: the size of the model's output distribution (what ``prompt_logprobs=-1`` returns)."""
    model_config = _engine_model_config(lm)
    if model_config is not None:
        return int(model_config.get_vocab_size())
    config = lm._config
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text_config.vocab_size)


class EngineLimitError(UserError):
    """A task setting asks vLLM for more log-probs per token than the engine allows (``max_logprobs``)."""


def check_logprob_limit(lm, wanted: LogprobRequest, vocab_size: int) -> None:
    """Refuse what vLLM's engine would refuse (``max_logprobs``, default 20) with the fix.

    vLLM's own refusal comes from ``LLM.generate`` as a ``ValueError`` under a traceback ("Requested
    prompt logprobs of 50, which is greater than max allowed: 20"); this one is a :class:`UserError`
    (the ``lm_eval`` command shows its message alone). The engine exists by then: ``lm_eval`` creates
    the model before it loads any task (docs/architecture.md, "Order in an lm_eval run").

    Raises:
        EngineLimitError: ``exact_mu_sigma`` without ``max_logprobs=-1``, or ``topk_logprobs`` above
            the engine's ``max_logprobs``.
    """
    model_config = _engine_model_config(lm)
    limit = getattr(model_config, "max_logprobs", None)
    if limit is None or limit == -1:
        return
    asked = vocab_size if wanted.exact else wanted.topk
    if asked <= limit:
        return
    if wanted.exact:
        raise EngineLimitError(
            f"exact_mu_sigma=true asks vLLM for all {vocab_size} log-probs per token, but the engine "
            f"allows at most max_logprobs={limit}. Add max_logprobs=-1 to --model_args (costs |V| = "
            f"{vocab_size} values per token), or drop exact_mu_sigma to use the top-k approximation."
        )
    raise EngineLimitError(
        f"topk_logprobs={wanted.topk} is more than the vLLM engine allows (max_logprobs={limit}). "
        f"Lower it (--metadata '{{\"topk_logprobs\": {limit}}}') or raise the limit with "
        f"max_logprobs={wanted.topk} in --model_args."
    )


def vllm_model_info(lm, wanted: LogprobRequest) -> ModelInfo:
    """Identity of a VLLM model and tokenizer, one object per log-prob mode."""
    model_args = getattr(lm, "model_args", {}) or {}
    return cached_model_info(
        lm,
        wanted,
        lambda: dict(
            name=str(model_args.get("model") or getattr(lm.tokenizer, "name_or_path", "") or "vllm"),
            backend="vllm",
            vocab_size=vllm_vocab_size(lm),
            distribution_stats=wanted.describe(),
        ),
    )


# -- the prompt --------------------------------------------------------------------------------


def context_limit(lm) -> ContextLimit:
    """How many text tokens fit a vLLM prompt.

    The prompt is ``context_enc + continuation_enc`` as stock ``TemplateLM.loglikelihood`` builds them
    for an empty context: ``[prefix_token_id] + tok_encode(text)``, or the text's own tokens when they
    already start with the prefix token. A vLLM prompt plus the one generated token must fit in
    ``max_length`` (stock: ``max_cxt_len = max_length - 1``), so a text may have at most
    ``max_length - 2`` tokens after its start token; a longer one is an error unless the request
    allows truncation (then its beginning is kept).
    """
    room = lm.max_length - 2
    return ContextLimit(
        room=room,
        limit=f"fit in vLLM's context window of {lm.max_length} tokens with the start token and one "
        f"generated token ({room})",
        fixes="Score shorter texts, a model with a longer context",
        window=f"the context window ({lm.max_length} tokens)",
    )


# -- the answer --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedPrompt:
    """Per scored token: its id, its log-prob, and the log-probs vLLM listed at its position."""

    token_ids: np.ndarray  # int64 (n,)
    logprobs: np.ndarray  # float64 (n,)
    listed: list[np.ndarray] | np.ndarray | None  # n arrays (or rows) of distinct tokens' log-probs, x_i's included
    is_greedy: bool
    #: (mu, sigma, top1) per scored token, float32, where vLLM's worker computed them (no listed values)
    worker_stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def _logprob_value(entry) -> float:
    return float(getattr(entry, "logprob", entry))  # vLLM's Logprob, or a float (vLLM < 0.4)


def parse_prompt_logprobs(prompt_token_ids, prompt_logprobs, start: int) -> ParsedPrompt:
    """Read ``RequestOutput.prompt_logprobs`` for the prompt tokens from index ``start`` on.

    Accepts vLLM's two forms: ``list[dict[token_id, Logprob] | None]`` and ``FlatLogprobs``
    (parallel flat lists ``token_ids``/``logprobs`` with per-position ``start_indices`` and
    ``end_indices``; x_i is listed first and again among the top k when it is one of them, and is
    counted once here), and :class:`PromptLogprobArrays` (exact mode, read by :func:`_parse_arrays`).
    """
    prompt = list(prompt_token_ids)
    if prompt_logprobs is None:
        raise ValueError("vLLM returned no prompt_logprobs; the request must set SamplingParams(prompt_logprobs=k).")
    if len(prompt_logprobs) != len(prompt):
        raise ValueError(
            f"vLLM returned prompt_logprobs for {len(prompt_logprobs)} positions for a prompt of "
            f"{len(prompt)} tokens; expected one per prompt token (the first empty)."
        )
    if start < 1:
        raise ValueError("the first prompt token has no log-prob (nothing precedes it): start must be >= 1")
    if isinstance(prompt_logprobs, PromptLogprobArrays):
        return _parse_arrays(prompt, prompt_logprobs, start)
    flat = hasattr(prompt_logprobs, "start_indices") and hasattr(prompt_logprobs, "token_ids")
    if flat:
        all_ids = np.asarray(prompt_logprobs.token_ids, dtype=np.int64)
        all_values = np.asarray(prompt_logprobs.logprobs, dtype=np.float64)
    token_logprobs, listed, greedy = [], [], True
    for position in range(start, len(prompt)):
        token = prompt[position]
        if flat:
            lo, hi = prompt_logprobs.start_indices[position], prompt_logprobs.end_indices[position]
            ids, values = all_ids[lo:hi], all_values[lo:hi]
            if ids.size > 1 and ids[0] == token and np.any(ids[1:] == token):
                ids, values = ids[1:], values[1:]  # x_i listed first and among the top k
        else:
            entry = prompt_logprobs[position]
            if entry is None:
                raise ValueError(f"vLLM returned no log-probs at prompt position {position}")
            ids = np.fromiter(entry.keys(), dtype=np.int64, count=len(entry))
            values = np.fromiter((_logprob_value(v) for v in entry.values()), dtype=np.float64, count=len(entry))
        where = np.flatnonzero(ids == token)
        if where.size == 0:
            raise ValueError(
                f"vLLM's log-probs at prompt position {position} do not include the prompt token {token}; "
                f"expected it listed first (vLLM >= 0.4 always lists it)."
            )
        token_logprobs.append(values[where[0]])
        listed.append(values)
        if greedy and ids[int(np.argmax(values))] != token:
            greedy = False
    return ParsedPrompt(
        token_ids=np.asarray(prompt[start:], dtype=np.int64),
        logprobs=np.asarray(token_logprobs, dtype=np.float64),
        listed=listed,
        is_greedy=greedy,
    )


def _parse_arrays(prompt: list[int], arrays: PromptLogprobArrays, start: int) -> ParsedPrompt:
    """:func:`parse_prompt_logprobs` for :class:`PromptLogprobArrays` of an exact request: row i - 1 is
    x_i and then all |V| tokens (x_i among them), so the listed values are the row but its first; or,
    where vLLM's worker computed them, :func:`prompt_stats_rows`' (ids ``[x_i, argmax, -1, -1]``)."""
    tokens = np.asarray(prompt[start:], dtype=np.int64)
    ids, values = arrays.token_ids[start - 1 :], arrays.logprobs[start - 1 :]
    if ids.shape[1] == STATS_COLUMNS and np.all(ids[:, 2:] == NO_TOKEN):
        if not np.array_equal(ids[:, 0], tokens):
            raise ValueError("vLLM's worker sent prompt statistics of other tokens than the prompt's.")
        return ParsedPrompt(
            token_ids=tokens,
            logprobs=values[:, 0].astype(np.float64),
            listed=None,
            is_greedy=bool(np.array_equal(ids[:, 1], tokens)),
            worker_stats=(values[:, 2], values[:, 3], values[:, 1].astype(np.float64)),
        )
    if ids.shape[1] < 2 or not np.array_equal(ids[:, 0], tokens):
        raise ValueError(
            "vLLM's prompt log-prob rows do not begin with the prompt tokens; expected x_i first at "
            "every position (vllm/v1/engine/logprobs.py, LogprobsTensors)."
        )
    listed = values[:, 1:]
    best = ids[np.arange(tokens.size), 1 + np.argmax(listed, axis=1)]
    return ParsedPrompt(
        token_ids=tokens,
        logprobs=values[:, 0].astype(np.float64),
        listed=listed,
        is_greedy=bool(np.array_equal(best, tokens)),
    )


def mu_sigma_from_listed(
    parsed: ParsedPrompt, vocab_size: int, wanted: LogprobRequest
) -> tuple[np.ndarray, np.ndarray]:
    """Min-K%++'s mu/sigma per scored token: exact when vLLM listed the whole vocabulary, else the
    top-k estimate of :func:`pdd_metrics.approximate_mu_sigma` (x_i is among the listed values); or
    those vLLM's worker computed."""
    if parsed.worker_stats is not None:
        return parsed.worker_stats[0], parsed.worker_stats[1]
    if wanted.exact:
        short = [i for i, values in enumerate(parsed.listed) if values.size < vocab_size]
        if short:
            raise ValueError(
                f"exact_mu_sigma: vLLM listed {parsed.listed[short[0]].size} log-probs at text token "
                f"{short[0]}, fewer than the vocabulary's {vocab_size}; the exact mu/sigma need all of them "
                f"(prompt_logprobs=-1 with max_logprobs=-1)."
            )
    if wanted.exact and isinstance(parsed.listed, np.ndarray):  # all |V| per row: Eq. 3-4 as the HF capture
        return _full_mu_sigma(parsed.listed)
    width = max(values.size for values in parsed.listed)
    block = max(1, _VALUES_PER_BLOCK // width)
    mus, sigmas = [], []
    for lo in range(0, len(parsed.listed), block):
        mu, sigma = approximate_mu_sigma(parsed.listed[lo : lo + block], parsed.logprobs[lo : lo + block], vocab_size)
        mus.append(mu)
        sigmas.append(sigma)
    return np.concatenate(mus), np.concatenate(sigmas)


def _full_mu_sigma(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """mu/sigma of rows that list the whole vocabulary, (n, |V|), as the HF capture computes them
    (:func:`pdd_tasks.backends.token_stats.mu_sigma`, float32), a block of rows at a time."""
    block = max(1, _VALUES_PER_BLOCK // max(1, rows.shape[1]))
    mus, sigmas = [], []
    for lo in range(0, rows.shape[0], block):
        mu, sigma = mu_sigma(torch.from_numpy(np.ascontiguousarray(rows[lo : lo + block], dtype=np.float32)))
        mus.append(mu.numpy())
        sigmas.append(sigma.numpy())
    return np.concatenate(mus), np.concatenate(sigmas)


def top1_from_listed(parsed: ParsedPrompt) -> np.ndarray:
    """Gap-K%'s max_v log p_i(v) per scored token: the largest value vLLM listed at the position, exact
    in both modes (the top k always include the most likely token; k >= 1); or the worker's."""
    if parsed.worker_stats is not None:
        return parsed.worker_stats[2]
    if isinstance(parsed.listed, np.ndarray):
        return parsed.listed.max(axis=1).astype(np.float64)
    return np.array([values.max() for values in parsed.listed], dtype=np.float64)


def _vllm_batches(lm, wanted: LogprobRequest, vocab_size: int):
    """Stock batching of a sorted ``Collator`` (``batch_size`` prompts, all at once for ``auto``); exact
    mode also caps the log-prob values per call at :data:`EXACT_ENTRIES_PER_BATCH` (not where vLLM's
    worker computes the statistics: :data:`STATS_COLUMNS` values per token come back)."""
    size = 0 if lm.batch_size == "auto" else int(lm.batch_size)

    def batches(order):
        batch, values = [], 0
        for item in next(iter(order.get_batched(n=0)), []):
            item_values = len(item.tokens) * vocab_size if wanted.exact and not wanted.on_worker else 0
            full = (size and len(batch) >= size) or (
                item_values and batch and values + item_values > EXACT_ENTRIES_PER_BATCH
            )
            if full:
                yield batch
                batch, values = [], 0
            batch.append(item)
            values += item_values
        if batch:
            yield batch

    return batches


def _answer_batch(lm, batch: list[EncodedText], cuts: list[int], params, wanted: LogprobRequest, vocab_size: int, info):
    """Send one batch of prompts to vLLM and read each text's per-token values from its prompt log-probs."""
    prompts = [item.context + item.tokens for item in batch]
    outputs = lm._model_generate(requests=prompts, generate=True, sampling_params=params)
    answers = []
    for item, prompt, cut, output in zip(batch, prompts, cuts, outputs, strict=True):
        start = len(item.context)
        parsed = parse_prompt_logprobs(output.prompt_token_ids or prompt, output.prompt_logprobs, start)
        if list(parsed.token_ids) != prompt[start:]:
            raise RuntimeError(
                "vLLM returned the outputs of another prompt (prompt token ids differ); outputs "
                "must come back in request order."
            )
        if wanted.on_worker and parsed.worker_stats is None:
            raise RuntimeError(
                "vLLM's worker was asked to compute exact mode's values (patch vllm-worker-prompt-stats, "
                "applied there) but sent the full prompt log-probs; the request's mark did not reach it."
            )
        mu, sigma = mu_sigma_from_listed(parsed, vocab_size, wanted)
        if wanted.exact:
            _log_exact_form(
                "worker"
                if parsed.worker_stats is not None
                else "arrays"
                if isinstance(output.prompt_logprobs, PromptLogprobArrays)
                else "lists"
            )
        answers.append(
            TokenScores(
                parsed.logprobs.sum(),
                parsed.is_greedy,
                parsed.token_ids,
                parsed.logprobs,
                mu,
                sigma,
                info,
                truncated_tokens=cut,
                top1=top1_from_listed(parsed),
            )
        )
    return answers


@functools.cache
def _log_exact_form(form: str) -> None:
    """Say once per process which form vLLM returned exact mode's values in: ``worker`` (computed by
    vLLM's worker), ``arrays`` (the full prompt log-probs as arrays) or ``lists`` (vLLM's own per-value
    lists; a warning: the same scores at several times the cost)."""
    if form == "worker":
        logger.info("exact_mu_sigma: mu/sigma computed on vLLM's worker (patch vllm-worker-prompt-stats)")
    elif form == "arrays":
        logger.info("exact_mu_sigma: vLLM's prompt log-probs kept as arrays (patch vllm-prompt-logprob-arrays)")
    else:
        logger.warning(
            "exact_mu_sigma: vLLM's prompt log-probs read from vLLM's own per-value lists (patch "
            "vllm-prompt-logprob-arrays not in effect in the process that ran vllm.LLM: another vLLM than "
            "0.32, or data-parallel replicas): the same scores at several times the cost (docs/backends-evidence.md, "
            "'What exact mu/sigma costs on vLLM')"
        )


def score_per_token_vllm(
    lm,
    requests: list[PerTokenRequest],
    disable_tqdm: bool = False,
    sampling_params_cls=None,
    worker_stats: Callable[[object], bool] | None = None,
) -> list[TokenScores]:
    """Answer per-token requests with one vLLM prompt each (longest first, as the stock path).

    Args:
        lm: lm-eval's ``VLLM`` (or a class with its interface).
        requests: the per-token requests; grouped by the log-probs they ask for (top k, or all).
        disable_tqdm: hide the progress bar.
        sampling_params_cls: vLLM's ``SamplingParams``; default: the one the backend's module uses.
        worker_stats: ``lm`` -> whether its engine's worker computes exact mode's values (patch
            ``vllm-worker-prompt-stats``: :func:`pdd_tasks.lm_eval_patches.vllm_worker_prompt_stats`);
            default: it does not.

    Returns:
        One :class:`TokenScores` per request, in request order.

    Raises:
        GradientsUnavailableError: a request asks for gradient norms (GradNorm: HF backend only).
    """
    refuse_gradients(requests, "vllm")
    if sampling_params_cls is None:  # the class the backend's module uses (lm-eval imports it from vllm)
        sampling_params_cls = getattr(sys.modules.get(type(lm).__module__), "SamplingParams", None)
    if sampling_params_cls is None:
        from vllm import SamplingParams as sampling_params_cls  # noqa: N813  (lazy: vLLM needs CUDA)

    vocab_size = vllm_vocab_size(lm)
    for wanted in dict.fromkeys(map(LogprobRequest.of, requests)):  # every group's, before any scoring
        check_logprob_limit(lm, wanted, vocab_size)

    def answer_group(wanted: LogprobRequest, group: list[PerTokenRequest]) -> list[TokenScores]:
        if wanted.exact and worker_stats is not None and worker_stats(lm):
            wanted = dataclasses.replace(wanted, on_worker=True)
        info = vllm_model_info(lm, wanted)
        params = sampling_params(sampling_params_cls, wanted)
        return answer_per_token(
            lm,
            group,
            context_limit(lm),
            lambda batch, cuts: _answer_batch(lm, batch, cuts, params, wanted, vocab_size, info),
            desc="Scoring texts (vLLM prompt log-probs)",
            disable_tqdm=disable_tqdm,
            batches=_vllm_batches(lm, wanted, vocab_size),
        )

    return answer_groups(requests, LogprobRequest.of, answer_group)
