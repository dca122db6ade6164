"""vLLM's internals for exact mu/sigma on ``--model vllm`` (vLLM 0.32): what patches
``vllm-prompt-logprob-arrays`` and ``vllm-worker-prompt-stats`` of :mod:`pdd_tasks.lm_eval_patches` put
in place of vLLM's code, and the vLLM capture's question to the engine's worker.

- :func:`keeping_prompt_logprob_arrays`: the replacement of vLLM's ``LogprobsProcessor`` methods, in
  the process that made the ``vllm.LLM``: exact mode's prompt log-probs kept as the arrays vLLM sent;
- :func:`computing_prompt_stats_on_the_worker`: the replacement of the model runner's
  ``_get_prompt_logprobs_dict``, in vLLM's worker process: 4 values per prompt position
  (:func:`~pdd_tasks.backends.vllm.prompt_stats_rows`) instead of all |V| log-probs, sorted;
  :func:`adopt_worker_runner` records the worker's runner class as its target (:func:`worker_runners`);
- :func:`worker_prompt_stats`: whether an engine's worker computes them (asked once per model,
  ``LLM.collective_rpc``), and :func:`asking_for_stock_worker_output` (the patch suspended).

The patches themselves (their targets, the version gate, when they apply) are in
:mod:`pdd_tasks.lm_eval_patches`, and so is the worker extension that vLLM loads in its worker by the
dotted path :data:`VLLM_WORKER_EXTENSION` (engine argument ``worker_extension_cls``): it applies a
patch there, and that module imports this one, not the other way round. Nothing here imports vLLM at
module level (it needs CUDA or its CPU build).
"""

from __future__ import annotations

import contextlib
import functools
import logging

from pdd_tasks.backends.vllm import (
    STATS_COLUMNS,
    PromptLogprobArrays,
    prompt_stats_rows,
    wants_prompt_logprob_arrays,
    wants_worker_prompt_stats,
)


logger = logging.getLogger(__name__)


@functools.cache
def _warn(message: str) -> None:
    logger.warning(message)


#: The engine argument that gives a vLLM engine's worker the hook of patch ``vllm-worker-prompt-stats``
#: (``--model_args ...,max_logprobs=-1,worker_extension_cls=<this>``; vLLM's ``worker_extension_cls``):
#: the dotted path of :class:`pdd_tasks.lm_eval_patches.VllmWorkerExtension`, which vLLM imports in its
#: worker process (named here, not imported: that module imports this one).
VLLM_WORKER_EXTENSION = "pdd_tasks.lm_eval_patches.VllmWorkerExtension"

#: The model runner classes patch ``vllm-worker-prompt-stats`` replaces a method of, in this process:
#: filled in vLLM's worker process by :func:`adopt_worker_runner`, which
#: :meth:`pdd_tasks.lm_eval_patches.VllmWorkerExtension.lm_eval_pdd_prompt_stats` calls (empty elsewhere).
_WORKER_RUNNERS: list[type] = []

#: The stock method of vLLM 0.32's model runner (``GPUModelRunner``, inherited by ``CPUModelRunner``)
#: that patch ``vllm-worker-prompt-stats`` replaces.
_PROMPT_LOGPROBS_METHOD = "_get_prompt_logprobs_dict"


def keeping_prompt_logprob_arrays(stock):
    """Replacements in vLLM 0.32's ``LogprobsProcessor`` (``vllm/v1/engine/logprobs.py``, run in the
    process that created the ``vllm.LLM``), for the requests :func:`wants_prompt_logprob_arrays`
    selects (exact requests of the vLLM capture) only:

    * ``from_new_request`` (a classmethod): the stock processor, with a :class:`PromptLogprobArrays`
      as its ``prompt_logprobs`` container instead of vLLM's ``FlatLogprobs``;
    * ``_update_prompt_logprobs``: for such a container, each chunk's ``LogprobsTensors`` (token ids,
      log-probs, ranks) appended as arrays, where the stock method calls ``tolist()`` and appends every
      value to four Python lists (``FlatLogprobs.append_fast``: 4 x (|V| + 1) appends per prompt
      token, about nine tenths of exact mode's extra cost: docs/backends-evidence.md, "What exact mu/sigma costs on vLLM").
      With no token strings asked for (``detokenize=False``) the stock method does nothing else.

    Every other request (another program's, top-k mode, lm-eval's own) gets the stock methods' result.
    """
    if isinstance(stock, classmethod):

        def from_new_request(cls, tokenizer, request):
            processor = stock.__func__(cls, tokenizer, request)
            if wants_prompt_logprob_arrays(request.sampling_params, detokenizes=tokenizer is not None):
                processor.prompt_logprobs = PromptLogprobArrays()
            return processor

        return classmethod(from_new_request)

    def _update_prompt_logprobs(self, prompt_logprobs_tensors) -> None:
        if not isinstance(self.prompt_logprobs, PromptLogprobArrays):
            return stock(self, prompt_logprobs_tensors)
        token_ids, logprobs, ranks, *_ = prompt_logprobs_tensors
        self.prompt_logprobs.append_chunk(token_ids, logprobs, ranks)
        return None

    return _update_prompt_logprobs


def computing_prompt_stats_on_the_worker(stock):
    """Replacement of vLLM 0.32's ``GPUModelRunner._get_prompt_logprobs_dict`` (``vllm/v1/worker/
    gpu_model_runner.py``; ``CPUModelRunner`` inherits it), in the worker process of an engine made with
    :data:`VLLM_WORKER_EXTENSION` only: the requests :func:`wants_worker_prompt_stats` selects (exact
    requests of the vLLM capture) get :func:`prompt_stats_rows` per prompt position, 4 values, where the
    stock method sorts all |V| log-probs (``torch.topk`` with k = |V|) and sends them with their token
    ids (8 bytes per value through vLLM's processes). Every other request goes to the stock method, which
    sees none of the selected ones. The bookkeeping (chunked prefill, the rows kept per request until
    its prompt is done) is the stock method's."""

    def _get_prompt_logprobs_dict(self, hidden_states, num_scheduled_tokens):
        selected = [
            req_id
            for req_id in self.num_prompt_logprobs
            if wants_worker_prompt_stats(getattr(self.requests.get(req_id), "sampling_params", None))
        ]
        if not selected:
            return stock(self, hidden_states, num_scheduled_tokens)
        held = {req_id: self.num_prompt_logprobs.pop(req_id) for req_id in selected}
        try:
            answers = stock(self, hidden_states, num_scheduled_tokens)
        finally:
            self.num_prompt_logprobs.update(held)
        answers.update(_prompt_stats(self, selected, hidden_states, num_scheduled_tokens))
        return answers

    return _get_prompt_logprobs_dict


def _prompt_stats(runner, req_ids: list[str], hidden_states, num_scheduled_tokens: dict[str, int]) -> dict:
    """The stock ``_get_prompt_logprobs_dict`` loop for ``req_ids``, with :func:`prompt_stats_rows` in
    place of the full sorted distribution: ``{request id: LogprobsTensors}`` of the requests whose prompt
    is done (their rows, :data:`STATS_COLUMNS` wide)."""
    import torch
    from vllm.v1.outputs import LogprobsTensors

    done = {}
    for req_id in req_ids:
        num_tokens = num_scheduled_tokens.get(req_id)
        request = runner.requests[req_id]
        if num_tokens is None or request.prompt_token_ids is None:
            continue  # preempted in prefill, or prompt embeddings (as the stock method)
        prompt = request.prompt_token_ids
        rows = request.in_progress_prompt_logprobs_cpu
        if rows is None:
            rows = request.in_progress_prompt_logprobs_cpu = LogprobsTensors.empty_cpu(len(prompt) - 1, STATS_COLUMNS)
        start = request.num_computed_tokens
        remaining = len(prompt) - (start + 1)
        count = min(num_tokens, remaining)
        if num_tokens > remaining:  # the last chunk of this prompt
            done[req_id] = rows
        if count <= 0:
            continue
        offset = runner.query_start_loc.np[runner.input_batch.req_id_to_index[req_id]].item()
        logits = runner.model.compute_logits(hidden_states[offset : offset + count])
        targets = torch.tensor(prompt[start + 1 : start + 1 + count], device=logits.device)
        for column, value in zip(rows[:3], prompt_stats_rows(logits, targets), strict=True):
            column[start : start + count].copy_(value)
    for req_id in done:
        del runner.num_prompt_logprobs[req_id]
        runner.requests[req_id].in_progress_prompt_logprobs_cpu = None
    return done


def adopt_worker_runner(runner) -> str | None:
    """Record the class of ``runner`` (the model runner of vLLM's worker, in its process) as a target of
    patch ``vllm-worker-prompt-stats``; returns None, or why it cannot be one (no such method)."""
    if not callable(getattr(runner, _PROMPT_LOGPROBS_METHOD, None)):
        return (
            f"vLLM's worker has no model runner with {_PROMPT_LOGPROBS_METHOD} ({type(runner).__name__}); "
            f"patch vllm-worker-prompt-stats is not applied: exact_mu_sigma reads the full prompt log-probs"
        )
    if type(runner) not in _WORKER_RUNNERS:
        _WORKER_RUNNERS.append(type(runner))
    return None


def worker_runners() -> list[tuple[object, str]]:
    """The model runner classes of this process whose method patch ``vllm-worker-prompt-stats`` replaces:
    those of an engine's worker made with :data:`VLLM_WORKER_EXTENSION` (none in other processes)."""
    return [(cls, _PROMPT_LOGPROBS_METHOD) for cls in _WORKER_RUNNERS]


#: True while :meth:`pdd_tasks.lm_eval_patches.Patch.suspended` of ``vllm-worker-prompt-stats`` runs in this
#: process.
_WORKER_STATS_SUSPENDED: list[bool] = []


@contextlib.contextmanager
def asking_for_stock_worker_output():
    """Within the block, this process marks no request for the worker's statistics, so vLLM's worker
    runs its stock method for them (the remote half of ``vllm-worker-prompt-stats``'s suspension)."""
    _WORKER_STATS_SUSPENDED.append(True)
    try:
        yield
    finally:
        _WORKER_STATS_SUSPENDED.pop()


def worker_prompt_stats(lm) -> bool:
    """Whether the worker of ``lm``'s engine (lm-eval's ``VLLM``) computes exact mode's per-position
    values (patch ``vllm-worker-prompt-stats``): the engine was made with :data:`VLLM_WORKER_EXTENSION`
    and its worker applied the patch (asked once, kept on the model object as
    ``_pdd_worker_prompt_stats``); False, with one warning that says why, where not, and while the patch
    is suspended (:func:`asking_for_stock_worker_output`). The capture's question is
    :func:`pdd_tasks.lm_eval_patches.vllm_worker_prompt_stats`, which also asks for patch
    ``vllm-prompt-logprob-arrays`` in this process."""
    if _WORKER_STATS_SUSPENDED:
        return False
    known = lm.__dict__.get("_pdd_worker_prompt_stats")
    if known is None:
        known = lm.__dict__["_pdd_worker_prompt_stats"] = _ask_worker(lm)
    return known


def _ask_worker(lm) -> bool:
    """Apply patch ``vllm-worker-prompt-stats`` on ``lm``'s engine's worker(s); False, with a warning, where
    it cannot be."""
    engine = getattr(getattr(lm, "model", None), "llm_engine", None)
    if engine is None:  # data parallelism: the engines are in Ray's processes
        _warn(
            "exact_mu_sigma: vLLM's workers do not compute mu/sigma with data_parallel_size > 1 (patch "
            "vllm-worker-prompt-stats); the full prompt log-probs are read instead, at several times the cost"
        )
        return False
    named = getattr(getattr(engine, "vllm_config", None), "parallel_config", None)
    if getattr(named, "worker_extension_cls", None) != VLLM_WORKER_EXTENSION:
        _warn(
            f"exact_mu_sigma: add worker_extension_cls={VLLM_WORKER_EXTENSION} to --model_args to have vLLM's "
            f"worker compute mu/sigma (patch vllm-worker-prompt-stats: 4 values per token instead of |V| + 1, "
            f"about half exact mode's cost; docs/backends-evidence.md, 'What exact mu/sigma costs on vLLM'); the full "
            f"prompt log-probs are read instead"
        )
        return False
    problems = [problem for problem in lm.model.collective_rpc("lm_eval_pdd_prompt_stats") if problem]
    if problems:
        _warn(problems[0])
        return False
    return True
