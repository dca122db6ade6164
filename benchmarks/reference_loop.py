"""The authors' batch-1 scoring loop against the pdd HF path, on the same texts and model, in one run.

    python benchmarks/reference_loop.py [--task pdd_wikimia_64] [--texts 64] [--batch-size 8] [--repeats 3]
        [--bf16]

(a) reference loop, written from the description of the Min-K%++ and DC-PDD scripts: one text at a
    time, a float32 forward pass of ``[start] + tokens``, full ``softmax`` and ``log_softmax`` of the
    logits, the token log-probs, mu, sigma and the top-1 log-prob (Gap-K%) moved to the CPU and every
    method scored there with ``pdd_metrics``; the lowercased text is a second forward pass;
(b) the pdd path: ``HFLM.loglikelihood`` on the pdd task's per-token requests (batched, statistics
    reduced on the device), then ``process_results`` (every method), in float32;
(c) with ``--bf16``: (b) with the model in bfloat16 (the log-softmax is still taken in float32).

The same start token, tokens and methods on every path. The runs alternate (a, b, [c], a, b, ...) and
medians are compared; the table gives texts/s, scored tokens/s and the ratio to (a).
"""

from __future__ import annotations

import platform
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F
from _common import answer_and_score, cpu_name, load_task, pdd_and_stock_requests, timing_parser
from lm_eval.models.huggingface import HFLM

from pdd_tasks import lm_eval_patches
from pdd_tasks.registry import ScoringSettings, TextInputs, extra_requests, score_text
from pdd_tasks.tools.default_model import ensure_default_model


def reference_loop(model, tokenizer, start_id: int, texts: list[str], log_freq: np.ndarray) -> int:
    """Score ``texts`` one at a time as the authors' scripts do; returns the number of scored tokens."""
    settings = ScoringSettings()
    scored = 0
    with torch.no_grad():
        for text in texts:
            per_text = []
            variants = [text] + [continuation for _, _, continuation in extra_requests(text, settings)]
            for variant in variants:
                ids = torch.tensor([[start_id] + tokenizer.encode(variant, add_special_tokens=False)])
                logits = model(ids).logits[0, :-1].float()
                probs = F.softmax(logits, dim=-1)
                log_probs = F.log_softmax(logits, dim=-1)
                targets = ids[0, 1:]
                token_log_probs = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
                mu = (probs * log_probs).sum(-1)
                sigma = ((probs * log_probs.square()).sum(-1) - mu.square()).clamp_min(0).sqrt()
                top1 = log_probs.max(-1).values
                per_text.append((targets.numpy(), token_log_probs.numpy(), mu.numpy(), sigma.numpy(), top1.numpy()))
            (ids_, lp, mu_, sigma_, top1_), extra = per_text[0], {}
            for (method, _, _), (_, extra_lp, _, _, _) in zip(
                extra_requests(text, settings), per_text[1:], strict=True
            ):
                extra.setdefault(method, []).append(extra_lp)
            inputs = TextInputs(text, lp, ids_, mu_, sigma_, log_freq, extra, top1=top1_)
            score_text(inputs, settings)
            scored += len(lp)
    return scored


def main() -> None:
    parser = timing_parser(__doc__, texts=64)
    parser.add_argument("--bf16", action="store_true", help="also time the pdd path with a bfloat16 model")
    args = parser.parse_args()

    lm_eval_patches.apply()
    task = load_task(args.task)
    model_dir = ensure_default_model()
    lm = HFLM(pretrained=str(model_dir), device="cpu", batch_size=args.batch_size, dtype="float32")
    docs = list(task.test_docs())[: args.texts]
    pdd_requests, _ = pdd_and_stock_requests(task, docs, args.task)
    answers = answer_and_score(lm, task, docs, pdd_requests)  # warm-up; loads the table
    log_freq = task.reference_log_frequencies(answers[0].model)
    texts = [doc["text"] for doc in docs]
    paths = {
        "reference loop (batch 1, float32)": lambda: reference_loop(
            lm.model, lm.tokenizer, lm.prefix_token_id, texts, log_freq
        ),
        f"pdd path (batch {args.batch_size}, float32)": lambda: answer_and_score(lm, task, docs, pdd_requests),
    }
    if args.bf16:
        lm16 = HFLM(pretrained=str(model_dir), device="cpu", batch_size=args.batch_size, dtype="bfloat16")
        answer_and_score(lm16, task, docs, pdd_requests)
        paths[f"pdd path (batch {args.batch_size}, bfloat16)"] = lambda: answer_and_score(
            lm16, task, docs, pdd_requests
        )
    tokens = reference_loop(lm.model, lm.tokenizer, lm.prefix_token_id, texts[:1], log_freq)  # warm-up
    tokens = sum(len(a.token_ids) for a in answers)
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.repeats):
        for name, run in paths.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    print(
        f"Machine: {cpu_name()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, "
        f"Python {platform.python_version()}"
    )
    print(
        f"Model: {model_dir.name}, task {args.task}, {len(docs)} texts and their lowercased copies "
        f"({tokens} scored tokens), median of {args.repeats} alternating runs\n"
    )
    print("| path | wall time (s) | texts/s | scored tokens/s | speed vs reference loop |")
    print("|---|---|---|---|---|")
    reference = statistics.median(next(iter(times.values())))
    for name, values in times.items():
        seconds = statistics.median(values)
        print(
            f"| {name} | {seconds:.2f} | {len(docs) / seconds:.2f} | {tokens / seconds:.0f} | {reference / seconds:.2f} |"
        )


if __name__ == "__main__":
    main()
