"""Cost of SaMIA's sampled continuations on ``--model hf``: many to a batch against one at a time, in one run.

    python benchmarks/samia_cost.py [--model DIR] [--task pdd_wikimia_32] [--texts 6] [--samples 10]
        [--max-tokens 32] [--batch-size 10]

One ``HFLM`` (float32, CPU) answers SaMIA's ``generate_until`` requests for the first ``--texts``
documents of ``--task`` (``--samples`` continuations of each text's first half, seeded per text and
sample, as the task sends them), twice, in turn:

- ``batched``: the run's batch size ``--batch-size`` (patch ``hf-seeded-generation``: a text's
  continuations sampled together, each row from a generator of its own seed);
- ``one at a time``: batch size 1, so each continuation is sampled alone (what ``--model hf`` did
  before that patch: lm-eval batches only requests with equal generation keys, and each carries its
  own seed).

Prints the time per continuation of each, the ratio, and how many continuations the two runs drew
identically (a continuation should depend on its seed only, not on the batch; rounding of a batched
matrix product may move a draw that falls within ~1e-6 of a token boundary). A first call on one
text, not timed, warms the model up. ``--model`` defaults to the converted default model.
"""

from __future__ import annotations

import argparse
import os
import time


for key, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(key, value)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model directory (default: the converted default model)")
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--texts", type=int, default=6)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=10)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    import torch
    from _common import load_task, machine
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from pdd_tasks import lm_eval_patches
    from pdd_tasks.registry import ScoringSettings, generation_requests
    from pdd_tasks.tools.default_model import default_model_dir

    lm_eval_patches.apply()
    task = load_task(args.task)
    lm = HFLM(
        pretrained=args.model or str(default_model_dir()), dtype="float32", device="cpu", batch_size=args.batch_size
    )
    docs = list(task.test_docs())[: args.texts]
    settings = ScoringSettings.from_metadata(
        {"samia": True, "samia_samples": args.samples, "samia_max_tokens": args.max_tokens}
    )

    def requests_of(texts):
        return [
            Instance("generate_until", {}, (context, gen_kwargs), index)
            for text in texts
            for index, (_, context, gen_kwargs) in enumerate(generation_requests(text, settings))
        ]

    requests = requests_of([doc["text"] for doc in docs])
    lm.generate_until(requests_of([docs[0]["text"]])[:2], disable_tqdm=True)  # warm-up, not timed
    timed = {}
    for name, batch_size in (("batched", args.batch_size), ("one at a time", 1)):
        lm.batch_size_per_gpu = batch_size
        began = time.perf_counter()
        texts = lm.generate_until(requests, disable_tqdm=True)
        timed[name] = (time.perf_counter() - began, texts)
    print(machine(f"torch {torch.__version__}", f"{torch.get_num_threads()} threads"))
    print(
        f"{args.task}: {len(docs)} texts x {args.samples} continuations of up to {args.max_tokens} tokens "
        f"({len(requests)} in all), batch size {args.batch_size}"
    )
    base = timed["one at a time"][0]
    for name, (seconds, _) in timed.items():
        print(
            f"{name:>14}: {seconds:7.1f} s, {1000 * seconds / len(requests):6.0f} ms per continuation, {base / seconds:.2f}x"
        )
    same = sum(a == b for a, b in zip(timed["batched"][1], timed["one at a time"][1], strict=True))
    print(f"drawn identically by both: {same} of {len(requests)}")


if __name__ == "__main__":
    main()
