"""vLLM's output structures and an engine that produces them from a transformers model, for testing
pdd_tasks.backends.vllm on a machine where vLLM cannot run (no GPU).

Where the ``vllm`` package imports (it does on CPU with ``pip install --no-deps vllm`` and its
pure-Python dependencies), its own classes are used: ``SamplingParams``, ``TokensPrompt``,
``RequestOutput``, ``CompletionOutput``, ``Logprob``, ``FlatLogprobs`` and
``append_logprobs_for_next_position``, and lm-eval's real ``VLLM`` class. Elsewhere (CI) the
stand-ins below are used, recorded from vLLM 0.33.0 (Apache-2.0): ``vllm/logprobs.py`` (copied:
``Logprob``, the flat container, ``create_prompt_logprobs``, ``append_logprobs_for_next_position``),
``vllm/outputs.py`` (``RequestOutput``, ``CompletionOutput``: the fields the harness reads) and
``vllm/sampling_params.py`` (the fields used, and the ``max_logprobs`` check of
``SamplingParams._validate_logprobs``).

:class:`EmulatedLLM` plays ``vllm.LLM``: ``generate`` computes the prompt log-probs with a
transformers model and packs them as ``vllm/v1/engine/logprobs.py``
(``LogprobsProcessor._update_prompt_logprobs``) does: per prompt position i >= 1 the prompt token
first, then the top k (all |V| for ``prompt_logprobs=-1``), with the prompt token's rank (the
number of log-probs >= its own, as vLLM's sampler counts); position 0 empty. For the exact requests
that patch ``vllm-prompt-logprob-arrays`` (pdd_tasks/lm_eval_patches/vllm.py) serves in vLLM 0.32, it
returns what that patch makes of vLLM's ``LogprobsTensors`` instead: a
:class:`~pdd_tasks.backends.vllm.PromptLogprobArrays`, in two chunks (chunked prefill)
(``EmulatedLLM(keeps_arrays=False)``: vLLM without the patch). ``EmulatedLLM(on_worker=True)`` plays an
engine whose worker runs patch ``vllm-worker-prompt-stats``: the requests it serves get the rows
:func:`~pdd_tasks.backends.vllm.prompt_stats_rows` makes of the logits (the function that worker calls).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from pdd_tasks.backends.vllm import (
    PromptLogprobArrays,
    prompt_stats_rows,
    wants_prompt_logprob_arrays,
    wants_worker_prompt_stats,
)


try:  # vLLM's own classes, where the package imports
    from vllm import SamplingParams, TokensPrompt
    from vllm.logprobs import (
        FlatLogprobs,
        Logprob,
        append_logprobs_for_next_position,
        create_prompt_logprobs,
    )
    from vllm.outputs import CompletionOutput, RequestOutput

    REAL_VLLM = True
except Exception:  # noqa: BLE001 (not installed, or CUDA-only parts fail to import)
    REAL_VLLM = False

    @dataclass
    class Logprob:  # vllm/logprobs.py
        logprob: float
        rank: int | None = None
        decoded_token: str | None = None

    @dataclass
    class FlatLogprobs:  # vllm/logprobs.py (the parts the capture reads)
        start_indices: list[int] = field(default_factory=list)
        end_indices: list[int] = field(default_factory=list)
        token_ids: list[int] = field(default_factory=list)
        logprobs: list[float] = field(default_factory=list)
        ranks: list[int | None] = field(default_factory=list)
        decoded_tokens: list[str | None] = field(default_factory=list)

        def append(self, logprobs_one_position) -> None:
            self.start_indices.append(len(self.logprobs))
            if logprobs_one_position:
                for token_id, logprob in logprobs_one_position.items():
                    self.token_ids.append(token_id)
                    self.logprobs.append(logprob.logprob)
                    self.ranks.append(logprob.rank)
                    self.decoded_tokens.append(logprob.decoded_token)
            self.end_indices.append(len(self.logprobs))

        def append_fast(self, token_ids, logprobs, ranks, decoded_tokens) -> None:
            self.start_indices.append(len(self.logprobs))
            # not strict: vLLM passes decoded_tokens as itertools.repeat(None) when it does not detokenize
            for token_id, logprob, rank, decoded_token in zip(token_ids, logprobs, ranks, decoded_tokens, strict=False):
                self.token_ids.append(token_id)
                self.logprobs.append(logprob)
                self.ranks.append(rank)
                self.decoded_tokens.append(decoded_token)
            self.end_indices.append(len(self.logprobs))

        def __len__(self) -> int:
            return len(self.start_indices)

        def __getitem__(self, index: int):
            return {
                self.token_ids[i]: Logprob(self.logprobs[i], self.ranks[i], self.decoded_tokens[i])
                for i in range(self.start_indices[index], self.end_indices[index])
            }

    def create_prompt_logprobs(flat_logprobs: bool):  # vllm/logprobs.py
        logprobs = FlatLogprobs() if flat_logprobs else []
        logprobs.append(None)
        return logprobs

    def append_logprobs_for_next_position(
        request_logprobs, token_ids, logprobs, decoded_tokens: Iterable[str | None], rank: int, num_logprobs: int
    ) -> None:  # vllm/logprobs.py, verbatim but for names
        if num_logprobs == -1:
            num_logprobs = len(logprobs)
        topk_ranks = range(1, num_logprobs + 1)
        ranks = itertools.chain((rank,), topk_ranks)
        if isinstance(request_logprobs, FlatLogprobs):
            request_logprobs.append_fast(token_ids, logprobs, ranks, decoded_tokens)
        else:
            request_logprobs.append(
                {
                    token_id: Logprob(logprob=logprob, rank=rank, decoded_token=token)
                    for token_id, logprob, rank, token in zip(token_ids, logprobs, ranks, decoded_tokens, strict=False)
                }
            )

    @dataclass
    class CompletionOutput:  # vllm/outputs.py (leading fields)
        index: int
        text: str
        token_ids: list[int]
        cumulative_logprob: float | None
        logprobs: object | None
        finish_reason: str | None = None

    class RequestOutput:  # vllm/outputs.py (the fields the harness reads)
        def __init__(self, request_id, prompt, prompt_token_ids, prompt_logprobs, outputs, finished, **kwargs):
            self.request_id = request_id
            self.prompt = prompt
            self.prompt_token_ids = prompt_token_ids
            self.prompt_logprobs = prompt_logprobs
            self.outputs = outputs
            self.finished = finished

    @dataclass
    class SamplingParams:  # vllm/sampling_params.py (fields used by lm-eval and the capture)
        temperature: float = 1.0
        max_tokens: int | None = 16
        logprobs: int | None = None
        prompt_logprobs: int | None = None
        flat_logprobs: bool = False
        detokenize: bool = True
        extra_args: dict | None = None

        def __post_init__(self):
            if self.prompt_logprobs is not None and self.prompt_logprobs != -1 and self.prompt_logprobs < 0:
                raise ValueError(f"prompt_logprobs must be non-negative or -1, got {self.prompt_logprobs}.")

    def TokensPrompt(prompt_token_ids):  # noqa: N802  (vllm/inputs: a TypedDict)
        return {"prompt_token_ids": prompt_token_ids}


NONES = itertools.repeat(None)  # detokenize=False: no decoded tokens (vllm/v1/engine/logprobs.py)


class EmulatedLLM:
    """``vllm.LLM.generate`` for scoring prompts, computed with a transformers causal LM."""

    def __init__(
        self, model, max_model_len: int, max_logprobs: int = 20, keeps_arrays: bool = True, on_worker: bool = False
    ):
        self.hf_model = model.eval()
        self.keeps_arrays = keeps_arrays
        self.on_worker = on_worker  # the worker computes marked exact requests' values (vllm-worker-prompt-stats)
        vocab_size = model.get_output_embeddings().weight.shape[0]
        self.llm_engine = SimpleNamespace(
            model_config=SimpleNamespace(
                max_model_len=max_model_len, max_logprobs=max_logprobs, get_vocab_size=lambda: vocab_size
            )
        )
        self.calls: list[tuple[list[list[int]], list]] = []  # (prompt token ids, sampling params) per call

    def generate(self, prompts, sampling_params=None, use_tqdm=True, lora_request=None):
        params_list = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        token_lists = [list(prompt["prompt_token_ids"]) for prompt in prompts]
        self.calls.append((token_lists, params_list))
        config = self.llm_engine.model_config
        outputs = []
        for number, (tokens, params) in enumerate(zip(token_lists, params_list, strict=True)):
            asked = params.prompt_logprobs
            vocab_size = config.get_vocab_size()
            limit = vocab_size if config.max_logprobs == -1 else config.max_logprobs
            if asked is not None and (vocab_size if asked == -1 else asked) > limit:  # _validate_logprobs
                raise ValueError(
                    f"Requested prompt logprobs of {vocab_size if asked == -1 else asked}, "
                    f"which is greater than max allowed: {limit}"
                )
            if len(tokens) + (params.max_tokens or 0) > config.max_model_len:
                raise ValueError(f"prompt of {len(tokens)} tokens + {params.max_tokens} exceeds max_model_len")
            with torch.no_grad():
                logits = self.hf_model(torch.tensor([tokens])).logits[0]
            rows = F.log_softmax(logits.float(), dim=-1)
            container = None
            if self.keeps_arrays and wants_prompt_logprob_arrays(params, detokenizes=params.detokenize):
                container = PromptLogprobArrays()
                targets = torch.tensor(tokens[1:])
                if self.on_worker and wants_worker_prompt_stats(params):  # what the patched worker sends
                    ids, values, ranks = prompt_stats_rows(logits[:-1].float(), targets)
                else:
                    top = torch.topk(rows[:-1], vocab_size)  # vLLM's Sampler.gather_logprobs, k = |V|
                    ids = torch.cat([targets[:, None], top.indices], dim=1).to(torch.int32)
                    values = torch.cat([rows[:-1].gather(1, targets[:, None]), top.values], dim=1)
                    ranks = (rows[:-1] >= values[:, :1]).sum(1)
                half = len(targets) // 2
                for chunk in (slice(0, half), slice(half, None)):  # as the patch appends each prefill chunk
                    container.append_chunk(ids[chunk], values[chunk], ranks[chunk])
            elif asked is not None:
                container = create_prompt_logprobs(getattr(params, "flat_logprobs", False))
                k = vocab_size if asked == -1 else asked
                for position in range(1, len(tokens)):
                    row = rows[position - 1]
                    actual = tokens[position]
                    top = torch.topk(row, k)
                    rank = int((row >= row[actual]).sum())
                    append_logprobs_for_next_position(
                        container,
                        [actual] + top.indices.tolist(),
                        [float(row[actual])] + top.values.tolist(),
                        NONES,
                        rank,
                        asked,
                    )
            completion = CompletionOutput(
                index=0,
                text="",
                token_ids=[int(rows[-1].argmax())],
                cumulative_logprob=None,
                logprobs=None,
                finish_reason="length",
            )
            outputs.append(
                RequestOutput(
                    request_id=str(number),
                    prompt=None,
                    prompt_token_ids=tokens,
                    prompt_logprobs=container,
                    outputs=[completion],
                    finished=True,
                )
            )
        return outputs


def real_vllm_class():
    """lm-eval's ``VLLM`` class where ``lm_eval.models.vllm_causallms`` imports, else None."""
    if not REAL_VLLM:
        return None
    try:
        from lm_eval.models.vllm_causallms import VLLM
    except Exception:  # noqa: BLE001
        return None
    return VLLM


def make_vllm_lm(
    model_dir, max_model_len: int, max_logprobs: int = 20, batch_size="auto", keeps_arrays=True, on_worker=False
):
    """An lm-eval ``VLLM`` (the real class where it imports, else :class:`StandInVLLM`) whose engine
    is an :class:`EmulatedLLM` over the transformers model in ``model_dir``."""
    from lm_eval.api.model import TemplateLM
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    cls = real_vllm_class() or StandInVLLM
    lm = object.__new__(cls)
    TemplateLM.__init__(lm)  # rank, world size, cache hook
    lm.tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lm._config = AutoConfig.from_pretrained(model_dir)
    lm.model = EmulatedLLM(
        AutoModelForCausalLM.from_pretrained(model_dir), max_model_len, max_logprobs, keeps_arrays, on_worker
    )
    lm.model_args = {"model": str(model_dir)}
    lm.custom_prefix_token_id = None
    lm.add_bos_token = None
    lm._max_length = max_model_len
    lm.batch_size = batch_size
    lm.data_parallel_size = 1
    lm.lora_request = None
    lm.enable_thinking = None
    return lm


class StandInVLLM:
    """The parts of lm-eval 0.4.13's ``VLLM`` (``lm_eval/models/vllm_causallms.py``) that the capture
    uses, for machines where that module cannot be imported (it imports vllm)."""

    @property
    def prefix_token_id(self):
        if self.custom_prefix_token_id is not None:
            return self.custom_prefix_token_id
        if self.tokenizer.bos_token_id is not None:
            return self.tokenizer.bos_token_id
        return self.tokenizer.eos_token_id

    @property
    def max_length(self) -> int:
        return self._max_length

    def tok_encode(self, string: str, add_special_tokens=None, **kwargs) -> list[int]:
        if not string:
            return []
        special = {} if add_special_tokens is None else {"add_special_tokens": add_special_tokens}
        return self.tokenizer(string, **special).input_ids

    def _model_generate(self, requests, generate=False, sampling_params=None):
        if not generate or sampling_params is None:
            sampling_params = SamplingParams(temperature=0, prompt_logprobs=1, max_tokens=1, detokenize=False)
        if not isinstance(sampling_params, list):
            sampling_params = [sampling_params] * len(requests)
        return self.model.generate(
            [TokensPrompt(prompt_token_ids=request) for request in requests],
            sampling_params=sampling_params,
            use_tqdm=self.batch_size == "auto",
            lora_request=self.lora_request,
        )

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        """Stand-in for the stock method (not re-implemented): answers (0.0, False) per request."""
        self.__dict__.setdefault("stock_requests", []).extend(requests)
        return [(0.0, False)] * len(requests)


#: vLLM 0.32's log lines (of the process that made the LLM) that say how its exit went.
EXIT_STEPS = {
    "[shutdown] MPClient: start": "client shutdown",
    "[shutdown] Process manager: send sigterm": "engine processes stopped",
    "[shutdown] MPClient: engine core exited unexpectedly": "monitor took over",
}


def exit_steps(log: str) -> list[str]:
    """The exit steps of :data:`EXIT_STEPS` in ``log``, in order. With patch vllm-engine-exit the client
    shuts down in the main thread first, which stops the engine processes; vLLM's own exit stops the
    engine processes first (their finalizer is newer), and the monitor thread may take that for a crash
    and shut the client down from its own thread while the interpreter finalises (the abort)."""
    return [step for line in log.splitlines() for mark, step in EXIT_STEPS.items() if mark in line]
