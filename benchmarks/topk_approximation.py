"""Error of Min-K%++'s mu/sigma estimated from top-k log-probs, against the exact values.

    python benchmarks/topk_approximation.py [--task pdd_wikimia_32] [--texts N] [--k 1 5 20] [--batch-size 8]

For every text of the task (default: all 776 of pdd_wikimia_32) the default model (SmolLM2-135M,
transformers, float32, CPU) gives the full next-token distribution at every position, scored after the
start token as the pdd tasks score it. From it, side by side:

* exact: mu_i, sigma_i over the whole vocabulary (Min-K%++ Eq. 3-4), as the HF backend computes them;
* top-k: what a server returns for ``logprobs=k`` / ``prompt_logprobs=k`` -- the k largest log-probs
  and the actual token's log-prob -- turned into mu_i, sigma_i by
  :func:`pdd_metrics.approximate_mu_sigma` (unreported mass spread uniformly over the other tokens).

Printed per k: the mean / median / 95th percentile of |error| of mu_i and sigma_i over all token
positions, the mean unreported probability mass, the |error| of the per-text Min-K%++ score (k = 0.2),
the Spearman rank correlation of the per-text scores with the exact ones, and the AUC (members vs
non-members) of the approximate scores next to the exact AUC.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F
from _common import machine
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager
from scipy.stats import spearmanr

from pdd_metrics import approximate_mu_sigma, min_k_plus_plus_score, roc_auc
from pdd_tasks.paths import tasks_path
from pdd_tasks.tools.default_model import ensure_default_model


def text_distributions(lm: HFLM, texts: list[str], batch_size: int):
    """Per text: (log-probs of the text tokens, full log-prob rows [n, V]) after the start token."""
    encoded = []
    for text in texts:
        tokens = lm.tok_encode(text, add_special_tokens=False)
        if tokens[0] == lm.prefix_token_id:
            encoded.append(tokens)
        else:
            encoded.append([lm.prefix_token_id] + tokens)
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start : start + batch_size]
        width = max(len(tokens) for tokens in chunk) - 1
        batch = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, tokens in enumerate(chunk):
            batch[row, : len(tokens) - 1] = torch.tensor(tokens[:-1])
        with torch.no_grad():
            logprobs = F.log_softmax(lm._model_call(batch), dim=-1, dtype=torch.float32)
        for row, tokens in enumerate(chunk):
            rows = logprobs[row, : len(tokens) - 1]
            targets = torch.tensor(tokens[1:])
            yield rows.gather(-1, targets[:, None])[:, 0].numpy(), rows


def summary(values: np.ndarray) -> str:
    return f"{np.mean(values):.4f} / {np.median(values):.4f} / {np.percentile(values, 95):.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--texts", type=int, default=None, help="first N texts only (default: all)")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--min-k-pp", type=float, default=0.2, help="k of Min-K%%++ (fraction of tokens)")
    args = parser.parse_args()

    started = time.perf_counter()
    model_dir = ensure_default_model()
    lm = HFLM(pretrained=str(model_dir), device="cpu", batch_size=args.batch_size, dtype="float32")
    task = TaskManager(include_path=tasks_path()).load(args.task)["tasks"][args.task]
    docs = list(task.test_docs())[: args.texts]
    texts, labels = [doc["text"] for doc in docs], np.array([int(doc["label"]) for doc in docs])
    vocab = lm.model.get_output_embeddings().weight.shape[0]

    exact_scores, approx_scores = [], {k: [] for k in args.k}
    mu_errors, sigma_errors, tail = ({k: [] for k in args.k} for _ in range(3))
    positions = 0
    for token_logprobs, rows in text_distributions(lm, texts, args.batch_size):
        full = rows.double()
        probs = full.exp()
        mu = (probs * full).sum(-1)
        sigma = (probs * (full - mu[:, None]).square()).sum(-1).clamp_min(0).sqrt()
        mu, sigma = mu.float().numpy(), sigma.float().numpy()  # as the HF capture returns them
        exact_scores.append(min_k_plus_plus_score(token_logprobs, mu, sigma, k=args.min_k_pp))
        top_all = torch.topk(rows, max(args.k), dim=-1).values.double().numpy()  # sorted, largest first
        positions += len(token_logprobs)
        for k in args.k:
            top = list(top_all[:, :k])
            approx_mu, approx_sigma = approximate_mu_sigma(top, token_logprobs, vocab)
            mu_errors[k].append(np.abs(approx_mu.astype(np.float64) - mu))
            sigma_errors[k].append(np.abs(approx_sigma.astype(np.float64) - sigma))
            tail[k].append(1 - np.exp(top_all[:, :k]).sum(-1))
            approx_scores[k].append(min_k_plus_plus_score(token_logprobs, approx_mu, approx_sigma, k=args.min_k_pp))

    exact_scores = np.array(exact_scores)
    exact_auc = roc_auc(exact_scores, labels)
    print(
        f"task {args.task}: {len(texts)} texts, {positions} token positions, |V| = {vocab}, model {model_dir.name} (float32)"
    )
    print(
        "machine: "
        + machine(f"{torch.get_num_threads()} torch threads", f"torch {torch.__version__}")
        + f"; {time.perf_counter() - started:.0f} s"
    )
    print(f"Min-K%++ (k = {args.min_k_pp}) AUC with exact mu/sigma: {exact_auc:.4f}\n")
    print(
        "| top-k | abs. error of mu_i (mean / median / p95) | abs. error of sigma_i (mean / median / p95) "
        "| mean unreported mass | abs. error of the text's Min-K%++ score (mean / median / p95) "
        "| Spearman vs exact | top-k AUC (exact AUC - top-k AUC) |"
    )
    print("|---|---|---|---|---|---|---|")
    for k in args.k:
        scores = np.array(approx_scores[k])
        auc = roc_auc(scores, labels)
        rho = spearmanr(scores, exact_scores).statistic
        print(
            f"| {k} | {summary(np.concatenate(mu_errors[k]))} | {summary(np.concatenate(sigma_errors[k]))} "
            f"| {np.mean(np.concatenate(tail[k])):.3f} | {summary(np.abs(scores - exact_scores))} "
            f"| {rho:.4f} | {auc:.4f} ({exact_auc - auc:+.4f}) |"
        )


if __name__ == "__main__":
    main()
