"""Peak memory and time per token of the pdd HF path against the stock HF backend, by text length and
vocabulary size.

    python benchmarks/memory_growth.py [--lengths 128 512 1024 2048 4096] [--vocab 49152 151936]
        [--texts 8] [--tokens-per-batch 4096 | --batch-sizes 1 8] [--model default|<dir>]

For each vocabulary size a random-weight GPT-2 (2 layers, width 64, 4,160 positions) is built with
that output vocabulary and the default model's tokenizer: the output layer and its
``[batch, length, vocab]`` logits are what a large model has, so memory behaves as in a large model
while the forward pass stays cheap. Texts are WikiMIA texts joined and cut to exactly ``length``
tokens. Each (vocabulary, length, path) runs in a fresh process that loads the model with lm-eval's
``HFLM`` and answers the texts once as

(a) stock: plain loglikelihood requests ``("", text)`` (what any harness task sends), or
(b) pdd: the same texts as the pdd tasks' per-token requests (log-probs, ids, exact mu/sigma),

and reports its peak resident memory (``ru_maxrss``), its peak after loading the model and answering
the first text once (a warm-up), and the wall time of the answers after the warm-up. The batch holds ``tokens-per-batch // length``
texts (at least 1), so every row of the table sends about as many tokens per forward pass; with
``--batch-sizes`` every length runs at each of those batch sizes instead (the cost growth with batch
size). With ``--model`` (``default``: the default model, or a model directory) that real model is
measured instead of the random ones, so the time per token includes a real forward pass (the cost
growth with length: attention grows with length, the rest does not).
Prints a markdown table with pdd/stock ratios.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import tempfile
import time
from pathlib import Path

from _common import child_result, cpu_name


N_POSITIONS = 4160


def build_model(directory: Path, vocab: int) -> Path:
    """A random GPT-2 with a ``vocab``-way output layer and the default model's tokenizer."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from pdd_tasks.tools.default_model import ensure_default_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_default_model())
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=vocab,
        n_positions=N_POSITIONS,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def texts_of_length(model_dir: Path, length: int, count: int) -> list[str]:
    """``count`` different texts of ``length`` tokens, cut from the joined WikiMIA texts."""
    from transformers import AutoTokenizer

    from pdd_tasks.loading.benchmark_data import PACKAGED_DATA

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = []
    for size in (32, 64, 128, 256):
        path = PACKAGED_DATA / "wikimia" / f"WikiMIA_length{size}.jsonl"
        rows += [json.loads(line)["input"] for line in path.read_text().splitlines() if line.strip()]
    ids = tokenizer(" ".join(rows), add_special_tokens=False).input_ids
    if len(ids) < length * count:
        raise SystemExit(f"only {len(ids)} tokens of text; ask for fewer or shorter texts")
    texts = [tokenizer.decode(ids[i * length : (i + 1) * length]) for i in range(count)]
    return texts


def real_model(name: str) -> Path:
    """The directory of ``--model``: ``default`` is the default model."""
    from pdd_tasks.tools.default_model import ensure_default_model

    return Path(ensure_default_model() if name == "default" else name)


def models_to_measure(real: Path | None, vocabs: list[int], tmp: Path):
    """``(vocab size, model directory)`` pairs: the real model, else one random model per vocab size."""
    if real is not None:
        from transformers import AutoConfig

        yield AutoConfig.from_pretrained(real).vocab_size, real
        return
    for vocab in vocabs:
        yield vocab, build_model(tmp / f"v{vocab}", vocab)


def child(config: dict) -> dict:
    """One measurement in this process: load the model, answer the texts once on one path."""
    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from pdd_tasks import lm_eval_patches
    from pdd_tasks.backends.base import PerTokenRequest

    lm_eval_patches.apply()
    torch.set_num_threads(config["threads"])
    lm = HFLM(
        pretrained=config["model"],
        device="cpu",
        batch_size=config["batch_size"],
        dtype="float32",
        max_length=config["positions"],
    )
    kind = PerTokenRequest if config["path"] == "pdd" else Instance
    requests = [
        kind(request_type="loglikelihood", doc={}, arguments=("", text), idx=0, metadata=("bench", i, 1))
        for i, text in enumerate(config["texts"])
    ]
    lm.loglikelihood(requests[:1], disable_tqdm=True)  # warm-up: first-call costs (the tokenizer's fingerprint)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    answers = lm.loglikelihood(requests, disable_tqdm=True)
    seconds = time.perf_counter() - start
    tokens = sum(len(a.token_ids) for a in answers) if config["path"] == "pdd" else None
    return {
        "seconds": seconds,
        "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "loaded_kb": loaded,
        "tokens": tokens,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 1024, 2048, 4096])
    parser.add_argument("--vocab", type=int, nargs="+", default=[49152, 151936])
    parser.add_argument("--texts", type=int, default=8)
    parser.add_argument("--tokens-per-batch", type=int, default=4096)
    parser.add_argument("--batch-sizes", type=int, nargs="+", help="batch sizes to run at every length")
    parser.add_argument("--model", help="a real model instead of the random ones: 'default' or a directory")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return

    import torch
    import transformers

    print(
        f"Machine: {cpu_name()}, {args.threads} torch threads, torch {torch.__version__}, transformers "
        f"{transformers.__version__}, Python {platform.python_version()}"
    )
    real = real_model(args.model) if args.model else None
    if real is not None:
        from transformers import AutoConfig

        positions = AutoConfig.from_pretrained(real).max_position_embeddings
        described = f"{real.name} (real weights)"
    else:
        positions = N_POSITIONS
        described = "random GPT-2 (2 layers, width 64) with the default model's tokenizer"
    if max(args.lengths) >= positions:
        raise SystemExit(f"lengths must be below {positions} (the model's positions, start token included)")
    batching = (
        f"batch sizes {args.batch_sizes}" if args.batch_sizes else f"batch = {args.tokens_per_batch} // length texts"
    )
    print(f"Model: {described}; {args.texts} texts per row, float32, {batching}; one fresh process per cell\n")
    print(
        "| vocab | length | batch | stock peak (GB) | pdd peak (GB) | pdd / stock peak | loaded (GB) | "
        "stock ms/token | pdd ms/token | pdd / stock time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for vocab, model in models_to_measure(real, args.vocab, Path(tmp)):
            cells = [(n, b) for n in args.lengths for b in args.batch_sizes or [max(1, args.tokens_per_batch // n)]]
            for length, batch in cells:
                texts = texts_of_length(model, length, args.texts)
                config = {
                    "model": str(model),
                    "texts": texts,
                    "batch_size": batch,
                    "threads": args.threads,
                    "positions": positions,
                }
                stock = child_result(__file__, {**config, "path": "stock"})  # each path in a fresh process
                pdd = child_result(__file__, {**config, "path": "pdd"})
                tokens = pdd["tokens"]
                gb = 1024**2
                print(
                    f"| {vocab:,} | {length} | {batch} | {stock['peak_kb'] / gb:.2f} | {pdd['peak_kb'] / gb:.2f} | "
                    f"{pdd['peak_kb'] / stock['peak_kb']:.2f} | {pdd['loaded_kb'] / gb:.2f} | "
                    f"{1000 * stock['seconds'] / tokens:.3f} | {1000 * pdd['seconds'] / tokens:.3f} | "
                    f"{pdd['seconds'] / stock['seconds']:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
