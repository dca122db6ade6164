"""Per-text cost of the pdd capture on vLLM (top-k and exact mu/sigma) and on HF, side by side in one run.

    VLLM_TARGET_DEVICE=cpu .venv-vllm/bin/python benchmarks/vllm_cost.py [--model DIR] [--task pdd_wikimia_32]
        [--texts 40] [--repeats 2] [--profile] [--no-lists] [--freq-table TABLE.npz]

Runs in vLLM's environment (``.ci/install-vllm``; on a GPU machine any environment with vLLM). One
vLLM engine (lm-eval's ``VLLM``, float32, ``max_logprobs=-1`` so that one engine serves both modes,
``enforce_eager=True``) and one ``HFLM`` (float32, CPU, batch size 8) are made first; their start is
not timed, nor is a first call of each capture on one document. Then, ``--repeats`` times in turn,
the same requests of the first ``--texts`` documents (each text and its lowercased form, as the task
sends them) are answered and scored (``process_results``) by:

- ``vllm top-20``: ``prompt_logprobs=20``, Min-K%++'s mu/sigma estimated from the top 20;
- ``vllm exact, on the worker``: ``exact_mu_sigma`` (``prompt_logprobs=-1``), the values computed by
  vLLM's worker (patch ``vllm-worker-prompt-stats``, the engine made with its ``worker_extension_cls``):
  4 values per token come back;
- ``vllm exact, arrays``: the same with that patch suspended: all |V| log-probs per token, sorted by
  the worker and kept as arrays by patch ``vllm-prompt-logprob-arrays`` (pdd_tasks/lm_eval_patches/vllm.py);
- ``vllm exact, vLLM's lists``: both patches suspended (vLLM's own output processing, one Python list
  entry per value: the cost before either patch);
- ``hf``: the HF capture (exact mu/sigma computed on the device).

Prints the median time per text of each, the ratios, the largest difference of each vLLM capture's
per-text scores (every method) and of its Min-K%++ mu from HF's, and the peak resident memory of this
process (vLLM's engine and worker are other processes). ``--profile`` then runs ``vllm exact`` once
under cProfile and prints where this process's time went, and times here what vLLM's worker adds for
it without patch ``vllm-worker-prompt-stats`` (a sort of the whole distribution at every position,
``torch.topk`` with k = |V|).

``--model`` defaults to the converted default model (``lm-eval-pdd default-model`` writes it);
``--freq-table`` is DC-PDD's reference table for it (the task's ``freq_table``; default: the table
installed or shipped for its tokenizer).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import os
import pstats
import resource
import statistics
import time


os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
for key, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(key, value)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model directory (default: the converted default model)")
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--texts", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-lists", action="store_true", help="skip the slow 'vllm exact, vLLM's lists' capture")
    parser.add_argument("--freq-table", default=None, help="DC-PDD's reference table (default: the one for --model)")
    return parser.parse_args()


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def answer_and_score(lm, task, docs: list[dict], pdd_requests: list) -> tuple[list, list[dict]]:
    """The pdd path as a run takes it: ``lm`` answers the per-token requests, then the task scores each
    document (``process_results``, every method). Returns the answers and the per-document scores."""
    answers = lm.loglikelihood(pdd_requests, disable_tqdm=True)
    per_doc = len(answers) // len(docs)
    scores = [task.process_results(doc, answers[i * per_doc : (i + 1) * per_doc]) for i, doc in enumerate(docs)]
    return answers, scores


def largest_per_text_difference(scores: list[dict], reference: list[dict], exclude=()) -> dict[str, float]:
    """Per method, the largest difference of a document's score (the ``<method>_auc`` pairs) from the
    reference's; methods whose name starts with one of ``exclude`` left out."""
    largest: dict[str, float] = {}
    for got, want in zip(scores, reference, strict=True):
        for key, pair in want.items():
            method = key.removesuffix("_auc")
            if key.endswith("_auc") and isinstance(pair[0], float) and not method.startswith(exclude):
                largest[method] = max(largest.get(method, 0.0), abs(got[key][0] - pair[0]))
    return largest


def topk_seconds(positions: int, vocab: int, block: int = 64) -> float:
    """Seconds of ``torch.topk`` with k = |V| over ``positions`` rows of log-probs, ``block`` rows per call:
    what vLLM's worker does at every prompt position for ``prompt_logprobs=-1``."""
    import torch

    rows = torch.log_softmax(torch.randn(block, vocab, generator=torch.Generator().manual_seed(0)), -1)
    began = time.perf_counter()
    for start in range(0, positions, block):
        torch.topk(rows[: min(block, positions - start)], vocab)
    return time.perf_counter() - began


def main() -> None:
    args = parse_args()
    import importlib.metadata

    from _common import machine
    from lm_eval.models.huggingface import HFLM
    from lm_eval.models.vllm_causallms import VLLM
    from lm_eval.tasks import TaskManager

    from pdd_tasks import lm_eval_patches
    from pdd_tasks.paths import tasks_path
    from pdd_tasks.tools.default_model import default_model_dir

    model_dir = args.model or str(default_model_dir())
    vllm = VLLM(
        pretrained=model_dir,
        dtype="float32",
        max_logprobs=-1,
        enforce_eager=True,
        batch_size="auto",
        worker_extension_cls=lm_eval_patches.VLLM_WORKER_EXTENSION,
    )
    hf = HFLM(pretrained=model_dir, dtype="float32", device="cpu", batch_size=8)
    lm_eval_patches.apply()  # after lm-eval's vLLM module is loaded: both backends route per-token requests
    arrays, worker = (lm_eval_patches.VLLM_PROMPT_LOGPROB_ARRAYS, lm_eval_patches.WORKER_PROMPT_STATS)
    # the pdd tasks only: indexing lm-eval's own ~14,000 task YAMLs would add some 10 s
    metadata = {"freq_table": args.freq_table} if args.freq_table else None
    manager = TaskManager(include_path=tasks_path(), include_defaults=False, metadata=metadata)
    task = manager.load(args.task)["tasks"][args.task]
    docs = list(task.test_docs())[: args.texts]
    requests = [
        request
        for doc_id, doc in enumerate(docs)
        for request in task.construct_requests(doc, "", metadata=(args.task, doc_id, 1))
    ]
    exact = [dataclasses.replace(request, exact_mu_sigma=True) for request in requests]
    # A task object per capture: a task refuses answers from two models (top-k and exact answers
    # carry different distribution statistics).
    names = ["vllm top-20", "vllm exact, on the worker", "vllm exact, arrays", "vllm exact, vLLM's lists", "hf"]
    if args.no_lists:
        names.remove("vllm exact, vLLM's lists")
    scorers = {name: manager.load(args.task)["tasks"][args.task] for name in names}

    @contextlib.contextmanager
    def suspended_both():
        with worker.suspended(), arrays.suspended():
            yield

    runs = {
        "vllm top-20": (vllm, requests, contextlib.nullcontext),
        "vllm exact, on the worker": (vllm, exact, contextlib.nullcontext),
        "vllm exact, arrays": (vllm, exact, worker.suspended),
        "vllm exact, vLLM's lists": (vllm, exact, suspended_both),
        "hf": (hf, requests, contextlib.nullcontext),
    }

    def run(name):
        lm, sent, context = runs[name]
        with context():
            return answer_and_score(lm, scorers[name], docs, sent)

    print(f"patches in effect here: {', '.join(lm_eval_patches.applied())}")
    for name in names:  # untimed: one document each, so that no timed run pays a first call's costs
        lm, sent, context = runs[name]
        with context():
            lm.loglikelihood(sent[: len(sent) // len(docs)], disable_tqdm=True)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    answers, scores, memory = {}, {}, {}
    for _ in range(args.repeats):
        for name in names:
            began = time.perf_counter()
            answers[name], scores[name] = run(name)
            seconds[name].append(time.perf_counter() - began)
            memory[name] = peak_rss_gb()

    vocab = vllm.model.llm_engine.model_config.get_vocab_size()
    print(
        machine(
            f"vllm-cpu {importlib.metadata.version('vllm-cpu')}",
            f"torch {importlib.metadata.version('torch')}",
            f"{os.environ.get('VLLM_CPU_OMP_THREADS_BIND', 'default')} vLLM thread binding",
        )
    )
    print(f"\n{model_dir}: {len(docs)} texts of {args.task} ({len(requests)} requests), |V| = {vocab}\n")
    per_text = {name: statistics.median(values) / len(docs) for name, values in seconds.items()}
    top = per_text["vllm top-20"]
    print(
        f"| capture | per text (median of {args.repeats}) | vs vllm top-20 | vs hf | peak RSS of this process after |"
    )
    print("|---|---|---|---|---|")
    for name, value in per_text.items():
        print(
            f"| {name} | {value * 1000:.0f} ms | {value / top:.2f}x | {value / per_text['hf']:.2f}x | {memory[name]:.2f} GB |"
        )
    hf_mu = [answer.mu for answer in answers["hf"]]
    print()
    for name in names[:-1]:
        largest = max(float(abs(a.mu - b).max()) for a, b in zip(answers[name], hf_mu, strict=True))
        methods = largest_per_text_difference(
            scores[name], scores["hf"], exclude=("min_k_pp", "gap_k") if "top" in name else ()
        )
        worst = max(methods, key=methods.get)
        print(
            f"{name} ({answers[name][0].model.distribution_stats}): largest |mu - hf mu| over all tokens "
            f"{largest:.3g}; largest per-text score difference "
            f"from hf {methods[worst]:.3g} ({worst}{'; Min-K%++ and Gap-K% excluded: estimated' if 'top' in name else ''})"
        )

    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        run("vllm exact, arrays")
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(15)
        print("\nvllm exact, arrays under cProfile (this process; the engine core and worker are other processes):")
        print(text.getvalue())
        positions = sum(answer.token_ids.size for answer in answers["vllm exact, arrays"])
        print(
            f"The worker's sort, estimated in this process: torch.topk with k = |V| (vLLM's "
            f"Sampler.gather_logprobs for prompt_logprobs=-1) over the exact pass's {positions} positions: "
            f"{topk_seconds(positions, vocab):.1f} s; one exact pass took {statistics.median(seconds['vllm exact, arrays']):.1f} s, "
            f"one top-20 pass {statistics.median(seconds['vllm top-20']):.1f} s."
        )


if __name__ == "__main__":  # vLLM spawns its engine and worker processes
    main()
