"""What every per-token capture shares: the request and answer types, and the request routing.

lm-eval backends answer a loglikelihood request with ``(sum_logprob, is_greedy)`` and throw the
per-token values away. The pdd tasks send :class:`PerTokenRequest` s instead, and each backend's
capture (:mod:`pdd_tasks.backends.hf`, :mod:`pdd_tasks.backends.vllm`,
:mod:`pdd_tasks.backends.completions`) answers them with a :class:`TokenScores`: the same tuple,
carrying the arrays as attributes. :func:`route_requests` sends the pdd requests of a run to the
capture and every other request to the stock method, unchanged; the backend classes' ``loglikelihood``
calls it (``PerTokenHFLM`` as a subclass, lm-eval's own classes through
:mod:`pdd_tasks.lm_eval_patches`). Every capture answers with the same loop, :func:`answer_per_token`: encode each text after
the start token (:func:`encode_text`, within the backend's :class:`ContextLimit`), set aside the
requests another request's pass answers (:func:`shared_prefixes`), sort and batch the others as
lm-eval does, answer a batch (the only backend-specific step), feed the cache hook, restore the order.
See docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from lm_eval.api.instance import Instance
from tqdm import tqdm

from pdd_tasks.errors import UserError, excerpt


logger = logging.getLogger(__name__)


#: Files of a model directory that go into :func:`model_files_fingerprint`.
MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".bin", ".pt", ".pth", ".model", ".txt", ".tiktoken")


def model_files_fingerprint(directory: Path, extra: Sequence[str] = ()) -> str:
    """SHA-256 identity of a model directory's files (and of the ``extra`` strings, hashed first).

    Every top-level file of the directory with a model suffix (config, tokenizer files, weights)
    counts by name and content identity: in the hub cache a file is a link to a blob named by its
    content hash, which is used; a plain file counts by size and modification time (hashing the
    weights would cost a full read per run). Re-saving or fine-tuning a model in place therefore
    gives a new fingerprint; copying a directory does too (a cache miss, never a wrong hit).
    """
    parts = list(extra)
    for path in sorted(directory.iterdir()):
        if not path.is_file() or not path.name.endswith(MODEL_FILE_SUFFIXES):
            continue
        if path.is_symlink():
            identity = f"blob={path.resolve().name}"
        else:
            stat = path.stat()
            identity = f"size={stat.st_size},mtime_ns={stat.st_mtime_ns}"
        parts.append(f"{path.name}:{identity}")
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def weights_fingerprint(name: str) -> str | None:
    """:func:`model_files_fingerprint` of the model ``name`` (a directory, or a hub id whose snapshot
    is in the local hub cache), or None where it names no local files (a server's model name)."""
    try:
        path = Path(name).expanduser()
        if not path.is_dir():
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(name, "config.json")
            if not isinstance(found, str):
                return None
            path = Path(found).parent
        return model_files_fingerprint(path)
    except (OSError, ValueError) as error:  # an unreadable folder, a name that is no repo id
        logger.debug("No weights fingerprint for %r: %s", name, error)
        return None


@dataclass(frozen=True)
class ModelInfo:
    """What the scores were computed with; the same object is shared by all results of a model."""

    name: str
    backend: str
    vocab_size: int  # size of the model's output distribution (|V| of DC-PDD Eq. 5)
    tokenizer_fingerprint: str
    distribution_stats: str  # how mu/sigma were obtained, e.g. "exact (full vocabulary, float32)"
    #: :func:`weights_fingerprint` of the model's files (None: no local files, or an answer cached
    #: before this field existed); a ``--use_cache`` answer of other weights is refused by the task.
    weights_fingerprint: str | None = None


def cached_model_info(lm, key: Hashable, describe: Callable[[], dict]) -> ModelInfo:
    """``lm``'s :class:`ModelInfo` for ``key`` (a log-prob mode), made on the first call for that key and
    kept on the model object (``_pdd_model_info``): the fields ``describe()`` gives, the fingerprint
    of ``lm.tokenizer`` and (unless ``describe()`` gives it) the :func:`weights_fingerprint` of the
    model named ``name``."""
    cache = lm.__dict__.setdefault("_pdd_model_info", {})
    if key not in cache:
        from pdd_tasks.freq.tables import tokenizer_fingerprint

        info = describe()
        info.setdefault("weights_fingerprint", weights_fingerprint(info["name"]))
        cache[key] = ModelInfo(**info, tokenizer_fingerprint=tokenizer_fingerprint(lm.tokenizer))
    return cache[key]


class TokenScores(tuple):
    """``(sum_logprob, is_greedy)``, as the stock backend answers, plus per-token arrays.

    Attributes (all arrays have one entry per scored token, in text order):
        token_ids: int64, the scored tokens x_1..x_n (the start token x_0 is not included).
        logprobs: float32, log p(x_i | x_<i).
        mu, sigma: float32, mean and standard deviation of log p over the full next-token
            distribution at position i (Min-K%++ Eq. 3-4).
        model: :class:`ModelInfo`.
        truncated_tokens: how many tokens were cut from the end of the text to fit the context.
        convention: the request's ``convention`` (which tokens were scored), set by
            :func:`answer_per_token`; a ``--use_cache`` answer of another convention is refused.
        top1: float32, max_v log p(v | x_<i), the most likely token's log-prob at position i
            (Gap-K%); None in a ``--use_cache`` answer written before it was recorded.
        grad_norms: float64, shape (3, T): the norms of the gradient of the text's mean loss with
            respect to each of the model's T parameter tensors, for p = 1, 2, inf (GradNorm); only
            where the request asked for them (:attr:`PerTokenRequest.gradients`, HF backend), else None.
    """

    def __new__(
        cls,
        logprob_sum,
        is_greedy,
        token_ids,
        logprobs,
        mu,
        sigma,
        model,
        truncated_tokens=0,
        convention="paper",
        top1=None,
        grad_norms=None,
    ):
        self = super().__new__(cls, (float(logprob_sum), bool(is_greedy)))
        self.token_ids = np.asarray(token_ids, dtype=np.int64)
        self.logprobs = np.asarray(logprobs, dtype=np.float32)
        self.mu = np.asarray(mu, dtype=np.float32)
        self.sigma = np.asarray(sigma, dtype=np.float32)
        self.model = model
        self.truncated_tokens = int(truncated_tokens)
        self.convention = convention
        self.top1 = None if top1 is None else np.asarray(top1, dtype=np.float32)
        self.grad_norms = None if grad_norms is None else np.asarray(grad_norms, dtype=np.float64)
        return self

    def __reduce__(self):  # keeps the arrays through pickling (--use_cache)
        return (
            TokenScores,
            (
                self[0],
                self[1],
                self.token_ids,
                self.logprobs,
                self.mu,
                self.sigma,
                self.model,
                self.truncated_tokens,
                self.convention,
                self.top1,
                self.grad_norms,
            ),
        )


@dataclass
class PerTokenRequest(Instance):
    """A loglikelihood request whose answer must carry per-token values.

    Arguments are ``("", text)``: an empty context, so the text is scored after the model's start
    token (DC-PDD Eq. 2). ``truncate`` allows cutting a text longer than the context window (the
    beginning is kept); without it such a text is an error. ``topk_logprobs``: how many top
    alternatives per position to ask a server for (backends that only return top-k log-probs).
    ``convention``: which tokens are scored, ``"paper"`` or ``"reference-code"``
    (:func:`split_after_start_token`). ``gradients``: also the norms of the gradient of the text's
    mean loss with respect to the model's weights (GradNorm; a backward pass, HF backend only:
    the other captures refuse it, :func:`refuse_gradients`). ``share_prefixes``: the request may be
    answered from the pass of a longer request that begins with its tokens (:func:`shared_prefixes`).
    """

    truncate: bool = False
    topk_logprobs: int = 20
    exact_mu_sigma: bool = False  # vLLM: ask for the full distribution (prompt_logprobs=-1)
    convention: str = "paper"
    gradients: bool = False
    share_prefixes: bool = True


class TextTooLongError(UserError):
    pass


class EmptyTextError(UserError):
    """A text with no token to score after the start token."""


class GradientsUnavailableError(UserError):
    """A request asks for gradients (GradNorm) from a backend without access to the model's weights."""


def refuse_gradients(requests: list, backend: str) -> None:
    """Refuse per-token requests that ask for gradient norms (GradNorm), on a capture that has no
    model weights to differentiate (vLLM, a completions server), before anything is scored or sent.

    Args:
        requests: the per-token requests of the call.
        backend: how the user named the backend, e.g. ``"vllm"`` (for the message).

    Raises:
        GradientsUnavailableError: a request asks for gradients.
    """
    if any(getattr(request, "gradients", False) for request in requests):
        raise GradientsUnavailableError(
            f"--model {backend}: GradNorm (metadata gradnorm: true) needs the gradient of each text's loss with "
            f"respect to the model's weights, and this backend returns log-probs only. Run GradNorm with the HF "
            f"backend (--model hf, with --model_args pretrained=<the same model>), or drop gradnorm from --metadata "
            f"to score the other methods with --model {backend}."
        )


def is_per_token(request) -> bool:
    """Whether a loglikelihood request is one of the pdd tasks' :class:`PerTokenRequest` s."""
    return isinstance(request, PerTokenRequest)


def route_requests(lm, requests: list, stock, answer, disable_tqdm: bool = False, *, ours=is_per_token, **kwargs):
    """Answer a run's requests of one kind: those ``ours`` picks by ``answer``, the others by ``stock``,
    in one call each, and the answers back in request order.

    Args:
        lm: the model object (``self`` of the method replaced).
        requests: the requests lm-eval passes to that method, of any type.
        stock: the backend's own, unbound method (``loglikelihood``: ``(sum_logprob, is_greedy)`` each).
        answer: ``answer(lm, requests, disable_tqdm=...)``, one answer per request it is given, in their
            order (:class:`TokenScores` for per-token requests).
        disable_tqdm: passed to both.
        ours: which requests go to ``answer`` (default: :class:`PerTokenRequest` s).
        **kwargs: passed to ``stock`` unchanged.

    Returns:
        One answer per request, in request order; the other requests get exactly the stock answer
        (in one call, or two where some may not share passes: :func:`stock_in_calls`).
    """
    picked = [ours(request) for request in requests]
    if not any(picked):
        return stock_in_calls(lm, requests, stock, disable_tqdm, **kwargs)
    others = [request for request, is_ours in zip(requests, picked, strict=True) if not is_ours]
    stock_answers = iter(stock_in_calls(lm, others, stock, disable_tqdm, **kwargs) if others else ())
    own = [request for request, is_ours in zip(requests, picked, strict=True) if is_ours]
    own_answers = iter(answer(lm, own, disable_tqdm=disable_tqdm))
    return [next(own_answers) if is_ours else next(stock_answers) for is_ours in picked]


def shares_passes(request) -> bool:
    """Whether an ordinary request may share a forward pass with the other requests of its call (the
    backend's own sharing: on HF, patch ``hf-shared-passes``); False for a
    dataset-level test's request made with ``share_passes: false`` (:func:`stock_in_calls`)."""
    return getattr(request, "share_passes", True)


def stock_in_calls(lm, requests: list, stock, disable_tqdm: bool = False, **kwargs) -> list:
    """The stock answers of ``requests``: those that may share passes (:func:`shares_passes`) in one
    call, the others in a call of their own (so none of their passes is shared with the first call's,
    as if they were run alone), and the answers back in request order. One call where all may share."""
    sharing = [shares_passes(request) for request in requests]
    if all(sharing):
        return stock(lm, requests, disable_tqdm=disable_tqdm, **kwargs)
    calls = [[request for request, shares in zip(requests, sharing, strict=True) if shares == wanted] for wanted in (True, False)]  # fmt: skip
    shared, apart = (iter(stock(lm, call, disable_tqdm=disable_tqdm, **kwargs) if call else ()) for call in calls)
    return [next(shared) if shares else next(apart) for shares in sharing]


class EncodedText(NamedTuple):
    """One per-token request, encoded: lm-eval's ``(key, context tokens, continuation tokens)`` shape.

    HFLM's batch-size probe (``_detect_batch_size``, ``--batch_size auto``) unpacks the longest item
    as ``_, context_enc, continuation_enc``, so the item has exactly these three fields.
    """

    index: int  # position of the request in the list being answered
    context: list[int]  # the start token x_0 (or the text's own first token)
    tokens: list[int]  # the scored tokens x_1..x_n, after truncation


def answer_per_token(
    lm,
    requests: list[PerTokenRequest],
    fit: ContextLimit,
    answer_batch: Callable[[list[EncodedText], list[int]], list[TokenScores]],
    *,
    desc: str,
    disable_tqdm: bool = False,
    batches: Callable | None = None,
    map_batches: Callable = map,
) -> list[TokenScores]:
    """The per-token answering loop every capture shares, as lm-eval's ``_loglikelihood_tokens`` runs it.

    Encodes every request, warns once about truncated texts, answers a request whose tokens begin a
    longer request's from that request's pass (:func:`shared_prefixes`, :func:`answer_prefix`; where
    the requests allow it, ``share_prefixes``), sorts the requests still to forward longest first
    with lm-eval's ``Collator`` (key ``(-len(context + tokens), tuple(context + tokens))``, as stock),
    cuts the sorted list into batches, answers each batch, feeds every request's answer to the cache
    hook (``--use_cache``) and returns the answers in request order.

    Args:
        lm: the model object (its ``cache_hook`` and, for the progress bar, ``rank`` are read).
        requests: the per-token requests to answer.
        fit: how many text tokens fit the backend's context (:func:`encode_text`).
        answer_batch: ``(batch, cuts) -> answers``, one :class:`TokenScores` per item of the batch,
            in batch order (``cuts``: tokens cut from each item's text).
        desc: progress-bar label.
        disable_tqdm: hide the progress bar.
        batches: ``Collator -> iterable of batches``; default: the whole sorted list as one batch.
        map_batches: how batches are run: ``map`` (one after another) or a thread pool's ``map``.

    Returns:
        One :class:`TokenScores` per request, in request order.
    """
    from lm_eval.models.utils import Collator

    encoded, cuts = [], []
    for index, request in enumerate(requests):
        context, tokens, cut = encode_text(lm, request, fit)
        encoded.append(EncodedText(index, context, tokens))
        cuts.append(cut)
    truncated = [item for item, cut in zip(encoded, cuts, strict=True) if cut]
    if truncated:
        # a text is scored in several requests (as written, lowercased, with prefixes): count the texts
        texts = {(requests[item.index].task_name, requests[item.index].doc_id) for item in truncated}
        logger.warning(
            "%d text(s) were longer than %s and were truncated to their first %d tokens, as asked with truncate=true%s.",
            len(texts),
            fit.window,
            max(len(item.tokens) for item in truncated),
            f" ({len(truncated)} scoring requests: a text is also scored lowercased or after prefixes)"
            if len(truncated) != len(texts)
            else "",
        )
    owners = shared_prefixes(
        [
            (item.context, item.tokens) if may_share(request, cut) else None
            for item, request, cut in zip(encoded, requests, cuts, strict=True)
        ]
    )
    riders: dict[int, list[int]] = {}  # forwarded request -> the requests answered from its pass
    for index, owner in enumerate(owners):
        if owner != index:
            riders.setdefault(owner, []).append(index)
    if any(may_share(request, cut) for request, cut in zip(requests, cuts, strict=True)):
        _log_shared(encoded, owners)
    order = Collator(
        [item for item in encoded if owners[item.index] == item.index],
        sort_fn=lambda item: (-len(item.context + item.tokens), tuple(item.context + item.tokens)),
    )
    pbar = tqdm(total=len(encoded), disable=disable_tqdm or getattr(lm, "rank", 0) != 0, desc=desc)

    def run(batch: list[EncodedText]) -> list[tuple[int, TokenScores]]:
        answered = []
        for item, answer in zip(batch, answer_batch(batch, [cuts[item.index] for item in batch]), strict=True):
            answered.append((item.index, answer))
            for index in riders.get(item.index, ()):
                answered.append((index, answer_prefix(answer, len(encoded[index].tokens), cuts[index])))
        for index, answer in answered:
            answer.convention = requests[index].convention
            keep_in_cache(lm, requests[index], answer)
        pbar.update(len(answered))
        return answered

    chosen = batches(order) if batches is not None else order.get_batched(n=0)
    answers: list[TokenScores | None] = [None] * len(requests)
    for answered in map_batches(run, chosen):
        for index, answer in answered:
            answers[index] = answer
    pbar.close()
    return answers


def may_share(request: PerTokenRequest, cut: int) -> bool:
    """Whether a request may take part in prefix sharing (:func:`shared_prefixes`), as the longer or
    the shorter request: it allows it (``share_prefixes``, default on), has no context of its own (a
    ReCaLL prefix, EM-MIA's: scored after other tokens than the start token, left alone), asks for no
    gradients (GradNorm's pass is the text's own) and its text was not cut to fit the context."""
    context, _ = request.args
    return request.share_prefixes and not context and not request.gradients and not cut


def shared_prefixes(sequences: Sequence[tuple[Sequence[int], Sequence[int]] | None]) -> list[int]:
    """For each request, which request's forward pass answers it: its own, or that of a longer one whose
    scored tokens begin with its own after the same start.

    A causal model's output at position i depends on tokens 0..i only, so the per-token values of a
    sequence ``start + a`` are the first ``len(a)`` values of ``start + a + b`` (the exactness of
    Min-K%++'s mu/sigma, the top-1 log-prob and the log-prob at each position; float rounding may
    differ with the batch's shape, as it does for any change of batch). Exact duplicates are the case
    ``b = []``. Shared on token ids, never on strings: a text that is a prefix of another as a string
    can encode differently at the join (``"It was one of th"`` ends in another token than the same
    characters of ``"It was one of the"``).

    Args:
        sequences: ``(start tokens, scored tokens)`` per request, or None for a request that takes
            no part (:func:`may_share`).

    Returns:
        ``owners``: ``owners[i] == i`` for a request that is forwarded; else the index of the
        forwarded request whose pass answers request i (a longest one among those that begin with
        its tokens, itself forwarded: ``owners[owners[i]] == owners[i]``). Of identical sequences,
        the last is forwarded.
    """
    owners = list(range(len(sequences)))
    # Sorted lexicographically, a sequence that begins another begins every sequence between them,
    # so it begins the next one: one pass from the end gives each its longest extension.
    ordered = sorted(
        (tuple(pair[0]), tuple(pair[1]), index) for index, pair in enumerate(sequences) if pair is not None
    )
    for (start, tokens, index), (next_start, next_tokens, next_index) in reversed(
        list(zip(ordered, ordered[1:], strict=False))
    ):
        if start == next_start and next_tokens[: len(tokens)] == tokens:
            owners[index] = owners[next_index]
    return owners


def answer_prefix(answer: TokenScores, length: int, truncated_tokens: int = 0) -> TokenScores:
    """The answer of a request whose scored tokens are the first ``length`` of ``answer``'s (after the
    same start): every per-token array cut to ``length``, the sum of the kept log-probs (float64), and
    ``is_greedy`` recomputed: every kept token has its position's top log-prob (``logprob >= top1``;
    the captures' own tests differ only on exact ties, or within 1e-6 on a completions server).
    Gradient norms are never shared (:func:`may_share`)."""
    logprobs = answer.logprobs[:length]
    top1 = None if answer.top1 is None else answer.top1[:length]
    greedy = bool(answer[1]) or (top1 is not None and bool(np.all(logprobs >= top1)))
    return TokenScores(
        logprobs.sum(dtype=np.float64),
        greedy,
        answer.token_ids[:length],
        logprobs,
        answer.mu[:length],
        answer.sigma[:length],
        answer.model,
        truncated_tokens=truncated_tokens,
        convention=answer.convention,
        top1=top1,
    )


def _log_shared(encoded: list[EncodedText], owners: list[int]) -> None:
    """One info line: how many requests and tokens prefix sharing kept from the model (start token included)."""
    size = [len(item.context) + len(item.tokens) for item in encoded]
    saved = [index for index, owner in enumerate(owners) if owner != index]
    logger.info(
        "share_prefixes: %d of %d texts answered from a longer text's pass; %d of %d tokens not forwarded "
        "(%.2fx fewer). Turn it off with --metadata '{\"share_prefixes\": false}'.",
        len(saved),
        len(encoded),
        sum(size[index] for index in saved),
        sum(size),
        sum(size) / max(1, sum(size) - sum(size[index] for index in saved)),
    )


class CacheWriteError(UserError):
    """lm-eval's ``--use_cache`` file could not be written (a full disk, a read-only file)."""


def keep_in_cache(lm, request: PerTokenRequest, answer: TokenScores) -> None:
    """Hand an answer to lm-eval's ``--use_cache`` file (its cache hook; nothing without ``--use_cache``).

    SQLite commits each answer whole or not at all, so a write that fails leaves the file holding the
    answers written before it; the error names the file, the cause and that a rerun reuses them.

    Raises:
        CacheWriteError: the cache file could not be written (``sqlite3.OperationalError``: a full disk,
            a read-only file or folder).
    """
    import sqlite3

    try:
        lm.cache_hook.add_partial("loglikelihood", request.args, answer)
    except sqlite3.OperationalError as error:
        path = getattr(getattr(lm.cache_hook, "dbdict", None), "filename", "the --use_cache file")
        raise CacheWriteError(
            f"--use_cache: could not write the answer of {request.task_name} doc {request.doc_id} to {path} "
            f"({error}). The file keeps the answers written before (SQLite writes each whole or not at all). "
            "Free space on that disk (or choose a --use_cache path on another one), then run the same command "
            "again: it reuses those answers and scores the rest."
        ) from None


def answer_groups(
    requests: list[PerTokenRequest], key: Callable[[PerTokenRequest], Hashable], answer_group: Callable
) -> list[TokenScores]:
    """Answer requests group by group, e.g. one group per number of top-k log-probs asked.

    Args:
        requests: the per-token requests.
        key: the group of a request (groups are answered in order of first appearance).
        answer_group: ``(key value, the group's requests) -> their answers``, in order.

    Returns:
        One answer per request, in request order.
    """
    groups: dict = {}
    for index, request in enumerate(requests):
        groups.setdefault(key(request), []).append(index)
    results: list[TokenScores | None] = [None] * len(requests)
    for value, indices in groups.items():
        for index, answer in zip(indices, answer_group(value, [requests[i] for i in indices]), strict=True):
            results[index] = answer
    return results


def split_after_start_token(lm, request: PerTokenRequest) -> tuple[list[int], list[int]]:
    """``(context, text tokens)`` of a per-token request: the tokens the model is given first, and
    the text's tokens it scores after them, under the request's ``convention``.

    ``"paper"`` (default), for an empty context as stock ``TemplateLM.loglikelihood`` builds it: the
    text's tokens (no special tokens) after the backend's ``prefix_token_id`` (BOS, else EOS), unless
    the text's own first token is that token (then it is the start and is not scored). For a
    non-empty context (an extra request such as ReCaLL's prefix): the same start token, then the
    context's tokens, then the text's tokens exactly as for an empty context, so that a text is
    scored on the same tokens with and without a context.

    ``"reference-code"``, as the authors' scripts score (``model(tokenizer.encode(text))``, logits
    ``[:-1]`` against ids ``[1:]``: Min-K%++ ``run.py``, DC-PDD ``com_pro_dis.py``): the text's
    encoding with the tokenizer's default special tokens, ``ids``; the start is ``ids[:1]`` (BOS for
    a tokenizer that adds one, else the text's first token, which is therefore not scored) and the
    scored tokens are ``ids[1:]``. For a non-empty context, as ReCaLL's script (``get_conditional_ll``)
    does: the context's default encoding, then the text's default encoding, every token of which is
    scored. ``lm.tok_encode(text, add_special_tokens=True)`` is ``tokenizer.encode(text)`` on the HF
    and local-completions backends; on vLLM it is too, except for a text that starts with the BOS
    token's own string, which lm-eval's ``VLLM.tok_encode`` encodes without special tokens.

    Raises:
        ValueError: the text has no tokens, or the convention is not one of the two.
        EmptyTextError: nothing is left to score after the start (a one-token text under
            ``"reference-code"``, or a text that is only the start token under ``"paper"``).
    """
    context, text = request.args
    convention = getattr(request, "convention", "paper")
    if convention == "reference-code":
        return _reference_code_split(lm, request, context, text)
    if convention != "paper":
        raise ValueError(
            f"{request.task_name} doc {request.doc_id}: convention={convention!r}: expected 'paper' or 'reference-code'."
        )
    tokens = list(lm.tok_encode(text, add_special_tokens=False))
    if not tokens:
        raise ValueError(
            f"{request.task_name} doc {request.doc_id}: the text has no tokens (empty text); "
            f"remove empty texts from the dataset."
        )
    if lm.prefix_token_id != tokens[0]:
        start, tokens = [lm.prefix_token_id], tokens
    elif len(tokens) == 1:
        raise EmptyTextError(
            f"{request.task_name} doc {request.doc_id}: the text {excerpt(text)} is only the model's start token, so no "
            f"token is left to score after it (DC-PDD Eq. 2 scores the tokens after the start token). Remove the row."
        )
    else:
        start, tokens = tokens[:1], tokens[1:]
    if context:
        start = start + list(lm.tok_encode(context, add_special_tokens=False))
    return start, tokens


def _reference_code_split(lm, request: PerTokenRequest, context: str, text: str) -> tuple[list[int], list[int]]:
    """:func:`split_after_start_token` under ``convention: "reference-code"``."""
    ids = list(lm.tok_encode(text, add_special_tokens=True)) if text else []
    if not ids:
        raise ValueError(
            f"{request.task_name} doc {request.doc_id}: the text has no tokens (empty text); "
            f"remove empty texts from the dataset."
        )
    if context:
        start = list(lm.tok_encode(context, add_special_tokens=True))
        if not start:
            raise ValueError(
                f"{request.task_name} doc {request.doc_id}: the context {context!r} has no tokens; expected a "
                f'non-empty context (or "" for none).'
            )
        return start, ids
    if len(ids) < 2:
        raise EmptyTextError(
            f"{request.task_name} doc {request.doc_id}: the text {excerpt(text)} is {len(ids)} token(s) with the tokenizer's "
            f'default special tokens ({ids}); convention "reference-code" never scores the first of them, so no '
            f'token is left to score. Remove the row, or use the default convention "paper" (every text token '
            f"scored after the model's start token)."
        )
    return ids[:1], ids[1:]


@dataclass(frozen=True)
class ContextLimit:
    """How many text tokens a backend can score after the start token, and how to say so.

    Attributes:
        room: the most text tokens (x_1..x_n) that fit.
        limit: what a longer text has "more than", for the error ("the model's context window of 2048 tokens").
        fixes: what the user can do, for the error (truncation is always offered).
        window: what a truncated text was longer than, for the warning ("the context window (2048 tokens)").
    """

    room: int
    limit: str
    fixes: str
    window: str


def encode_text(lm, request: PerTokenRequest, fit: ContextLimit) -> tuple[list[int], list[int], int]:
    """``(start token, text tokens, number cut)`` of a per-token request, as every capture scores it.

    The tokens are those of stock ``TemplateLM.loglikelihood`` for an empty context
    (:func:`split_after_start_token`); a text longer than ``fit.room`` tokens is cut to its first
    ``fit.room`` if the request allows truncation, and is otherwise a :class:`TextTooLongError` that says
    it has "more than" ``fit.limit`` and suggests ``fit.fixes`` or truncation.

    Raises:
        ValueError: the text is only the start token (nothing to score).
        TextTooLongError: the text does not fit and truncation is not allowed.
    """
    context, tokens = split_after_start_token(lm, request)
    if not tokens:
        raise ValueError(
            f"{request.task_name} doc {request.doc_id}: the text is only the start token; there is "
            f"nothing to score. Remove it from the dataset."
        )
    room = fit.room - (len(context) - 1)  # the start token is counted in fit.room, a context is not
    if room < 1:
        raise TextTooLongError(
            f"{request.task_name} doc {request.doc_id}: the request's context alone has {len(context) - 1} tokens, "
            f"which leaves no room for the text to {fit.limit}. Use a shorter context (e.g. fewer prefix texts)."
        )
    truncated = max(0, len(tokens) - room)
    if truncated and not request.truncate:
        raise TextTooLongError(
            f"{request.task_name} doc {request.doc_id}: the text has {len(tokens)} tokens"
            f"{f' after a context of {len(context) - 1} tokens' if len(context) > 1 else ''}, more than {fit.limit}. "
            f"{fit.fixes}, or allow truncation with --metadata '{{\"truncate\": true}}' (keeps the first {room} "
            f"tokens of each long text)."
        )
    return context, (tokens[:room] if truncated else tokens), truncated
