"""What the Neighbor attack costs: neighbour generation with a masked LM, and the target model's
extra forward passes, beside a run of the default methods.

    python benchmarks/neighbor_cost.py [--mlm DIR] [--limit 20] [--count 25] [--length 32] [--keep DIR]

On the first ``--limit`` texts of WikiMIA (``--length`` words, ``pdd_wikimia_<length>``) with the
default model (``lm-eval-pdd default-model``), float32 on the CPU:
1. neighbour generation alone (``pdd_tasks.prepare.neighbors.NeighborGenerator``: loading the masked LM,
   then ``--count`` neighbours per text), timed;
2. the real ``lm_eval`` command line with the default methods, timed;
3. the same with ``neighbor_model`` set (generation + ``--count`` extra requests per text), timed.

Without ``--mlm`` the masked LM is one with bert-base-uncased's shape (12 layers, hidden 768,
vocabulary 30,522) and **random weights**, built in a temporary directory: its costs are those of
BERT-base, its neighbours and AUC are meaningless (the AUC is then not printed). With a real masked
LM (``--mlm DIR``, e.g. roberta-base saved with ``save_pretrained``), the table has its AUC beside
Loss's.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import tempfile
import time
from pathlib import Path

from _common import cpu_name, lm_eval_run

from pdd_tasks.loading.files import read_jsonl
from pdd_tasks.tools.default_model import ensure_default_model


DATA = Path(__file__).resolve().parents[1] / "pdd_tasks" / "data" / "wikimia"


def random_bert_base(directory: Path, texts: list[str]) -> Path:
    """A BertForMaskedLM of bert-base-uncased's shape with random weights, and a WordPiece
    vocabulary of 30,522 entries: the texts' words, then filler entries."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    counts = collections.Counter(w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(counts)
    vocab += [f"filler{i}" for i in range(30522 - len(vocab))]
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True, model_max_length=512)
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=len(vocab))).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mlm", type=Path, help="a masked LM directory (default: random-weight BERT-base shape)")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--count", type=int, default=25)
    parser.add_argument("--length", type=int, default=32, choices=(32, 64, 128, 256))
    parser.add_argument("--keep", type=Path, help="keep the runs' output here")
    args = parser.parse_args()

    texts = [row["input"] for row in read_jsonl(DATA / f"WikiMIA_length{args.length}.jsonl")]
    model = ensure_default_model()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(args.keep or scratch)
        mlm = args.mlm or random_bert_base(scratch / "random-bert-base", texts)

        from pdd_tasks.prepare.neighbors import NeighborGenerator

        start = time.perf_counter()
        generator = NeighborGenerator(str(mlm), count=args.count)
        loaded = time.perf_counter() - start
        made = [generator.neighbors(text) for text in texts[: args.limit]]
        generation = time.perf_counter() - start - loaded
        print(f"neighbour generation: load {loaded:.1f} s, {generation:.1f} s for {len(made)} texts")

        base_s, base = lm_eval_run(model, f"pdd_wikimia_{args.length}", scratch / "base", limit=args.limit)
        meta = {"neighbor_model": str(mlm), "neighbor_count": args.count}
        nbr_s, nbr = lm_eval_run(
            model, f"pdd_wikimia_{args.length}", scratch / "neighbor", limit=args.limit, metadata=meta
        )

    task = f"pdd_wikimia_{args.length}"
    per100 = 100 / args.limit
    print(
        f"\n{task}, first {args.limit} texts, {model.name}, float32, CPU: {cpu_name()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}; masked LM: {args.mlm or 'random-weight BERT-base shape'}\n"
    )
    extra = nbr_s - base_s
    print("| run | target forward passes per text | wall s (with lm_eval's start-up) |")
    print("|---|---:|---:|")
    print(f"| default methods (Loss ... DC-PDD) | 2 | {base_s:.0f} |")
    print(f"| + Neighbor (n={args.count}) | {args.count + 2} | {nbr_s:.0f} |")
    print(
        f"\nNeighbor adds {extra:.0f} s for {args.limit} texts ({extra * per100:.0f} s per 100 texts), of which neighbour "
        f"generation {generation:.0f} s ({generation * per100:.0f} s per 100 texts; masked-LM load {loaded:.1f} s)."
    )
    if args.mlm:
        results = nbr["results"][task]
        print(f"\nAUC: Loss {results['loss_auc,none']:.3f}, Neighbor {results['neighbor_auc,none']:.3f}")
    assert base["results"][task]["loss_auc,none"] == nbr["results"][task]["loss_auc,none"]  # same texts, same Loss


if __name__ == "__main__":
    main()
