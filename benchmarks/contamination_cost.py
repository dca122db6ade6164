"""What a contamination check costs beside the eval it checks (issue 33, item 4).

An ARC-shaped local task of ``--examples`` four-choice questions (lm-eval's stock ``arc_easy`` YAML
pointed at a local file; each question a cloze of a WikiMIA text shipped with the package, its blank
among 3 words of other texts): the requests lm-eval builds for the eval itself (one per choice), and
those ``pdd_contamination`` builds for CoDeC and for the exchangeability test at each ``--settings``
(``shards x permutations``; the defaults 50 x 250 first), counted as requests, as tokens of the
default model's tokenizer (context and continuation of each request, one start token where the
tokenizer adds one) and as tokens forwarded: the stock HF backend forwards requests that differ only
in a one-token continuation once (lm-eval's logits cache: a question with one-token choices is one
pass, not four), the pdd capture every request. On a CPU or GPU forward pass a token of a short
sequence costs about the same as any other, so the ratio of tokens forwarded is the cost ratio. No
model is run.

``--time N`` then runs the model too, with the real ``lm_eval`` command (HF, float32, batch size 8,
on ``--device``): the eval alone (``--tasks arc_easy_cost``), then the check alone (``--tasks
pdd_contamination``, the eval as its source task, CoDeC at its defaults, the exchangeability test at
the first ``--settings``), N times each in turn; the median wall time of each, model load included,
and their ratio beside that of the tokens forwarded.

    python benchmarks/contamination_cost.py --examples 1000 --settings 50x250 50x20 50x10 50x4 20x4
    python benchmarks/contamination_cost.py --examples 200 --settings 50x1 --time 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import lm_eval_run, machine

from pdd_tasks.loading.benchmark_data import PACKAGED_DATA
from pdd_tasks.loading.files import read_jsonl


SPLITS = ("WikiMIA_length32", "WikiMIA_length64", "WikiMIA_length128", "WikiMIA_length256")


def arc_rows(n: int, seed: int = 0) -> list[dict]:
    """``n`` ARC-shaped rows: the first 24 words of a shipped WikiMIA text with one word blanked, the
    blanked word and 3 words of other texts as the choices."""
    texts = [row["input"] for split in SPLITS for row in read_jsonl(PACKAGED_DATA / "wikimia" / f"{split}.jsonl")]
    rng = np.random.default_rng(seed)
    rows = []
    for index in rng.choice(len(texts), n, replace=len(texts) < n):
        words = texts[index].split()[:24]
        blank = int(rng.integers(len(words) // 2, len(words)))
        others = [texts[int(i)].split()[0] for i in rng.choice(len(texts), 3)]
        choices = [words[blank], *others]
        order = rng.permutation(4)
        labels = list("ABCD")
        rows.append(
            {
                "id": f"cost-{len(rows)}",
                "question": f'Which word fills the blank in "{" ".join(words[:blank] + ["____"] + words[blank + 1 :])}"?',
                "choices": {"text": [choices[i] for i in order], "label": labels},
                "answerKey": labels[int(np.where(order == 0)[0][0])],
            }
        )
    return rows


def task_folder(folder: Path, examples: int) -> Path:
    import lm_eval.tasks

    stock = Path(lm_eval.tasks.__file__).parent
    data = folder / "arc_test.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in arc_rows(examples)))
    train = folder / "arc_train.jsonl"
    train.write_text("".join(json.dumps(row) + "\n" for row in arc_rows(8, seed=1)))
    (folder / "arc_easy_cost.yaml").write_text(
        f"include: {stock}/arc/arc_easy.yaml\ntask: arc_easy_cost\ntag: []\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    train: {train}\n    test: {data}\ntest_split: test\nvalidation_split: null\n"
    )
    return folder


def request_tokens(instances, tokenizer, logits_cache: bool = False) -> tuple[int, int, int]:
    """(requests, tokens, tokens forwarded) of lm-eval request ``instances``: each request's context and
    continuation, and the start token where the tokenizer adds one. With ``logits_cache`` (the stock HF
    backend's default, ``HFLM(logits_cache=True)``) requests whose context and continuation but its last
    token are the same share one forward pass (lm-eval groups them by ``context + continuation[:-1]``:
    a multiple-choice question with one-token choices is forwarded once), which forwards the longest of
    each group; without it (the pdd capture, whose requests here share no prefix) every request is."""
    start = len(tokenizer("x").input_ids) - len(tokenizer("x", add_special_tokens=False).input_ids)
    groups: dict[tuple[int, ...], int] = {}
    tokens = 0
    for index, instance in enumerate(instances):
        context, continuation = instance.args
        context_ids = tokenizer(context, add_special_tokens=False).input_ids
        continuation_ids = tokenizer(continuation, add_special_tokens=False).input_ids
        length = len(context_ids) + len(continuation_ids) + start
        tokens += length
        key = tuple(context_ids + continuation_ids[:-1]) if logits_cache else (index,)
        groups[key] = max(groups.get(key, 0), length)
    return len(instances), tokens, sum(groups.values())


def contamination_task(metadata: dict):
    """``pdd_contamination`` built from its YAML in this checkout with ``metadata``, its requests built."""
    from lm_eval.tasks._yaml_loader import load_yaml

    from pdd_tasks.paths import tasks_path

    config = load_yaml(Path(tasks_path()) / "contamination" / "pdd_contamination.yaml", resolve_func=True)
    task = config["class"](config={**config, "metadata": metadata})
    task.build_all_requests(limit=None, rank=0, world_size=1)
    return task


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--settings", nargs="+", default=["50x250", "50x20", "50x10", "50x4", "20x4"])
    parser.add_argument("--model", default=None, help="whose tokenizer counts the tokens (default: the default model)")
    parser.add_argument(
        "--time", type=int, default=0, metavar="N", help="also time the eval and the check N times each"
    )
    parser.add_argument("--device", default="cpu", help="--time: lm_eval's --device (cpu, cuda)")
    args = parser.parse_args()
    from lm_eval.tasks import TaskManager, get_task_dict
    from transformers import AutoTokenizer

    if args.model is None:
        from pdd_tasks.tools.default_model import ensure_default_model

        args.model = str(ensure_default_model())
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        folder = task_folder(Path(tmp), args.examples)
        eval_task = get_task_dict(["arc_easy_cost"], TaskManager(include_path=str(folder)))["arc_easy_cost"]
        eval_task.build_all_requests(limit=None, rank=0, world_size=1)
        rows = [
            ("the eval itself (arc_easy, 0-shot)", *request_tokens(eval_task.instances, tokenizer, logits_cache=True))
        ]
        for setting in args.settings:
            shards, permutations = (int(x) for x in setting.split("x"))
            metadata = {
                "source_tasks": ["arc_easy_cost"],
                "source_include_path": str(folder),
                "exchangeability": {"num_shards": shards, "permutations": permutations, "max_requests": 10**6},
            }
            check = contamination_task(metadata)
            for test in ("codec", "exchangeability"):
                if test == "codec" and setting != args.settings[0]:
                    continue  # CoDeC's requests do not depend on the exchangeability settings
                mine = [i for i in check.instances if i.doc["test"] == test]
                label = "CoDeC (defaults: 1 in-context example, up to 1,000 examples)" if test == "codec" else f"exchangeability {shards} x {permutations}"  # fmt: skip
                rows.append((label, *request_tokens(mine, tokenizer)))
        seconds: dict[str, list[float]] = {"eval": [], "check": []}
        shards, permutations = (int(x) for x in args.settings[0].split("x"))
        check_metadata = {
            "source_tasks": ["arc_easy_cost"],
            "source_include_path": str(folder),
            "exchangeability": {"num_shards": shards, "permutations": permutations},
        }
        for repeat in range(args.time):
            out = folder / f"runs-{repeat}"
            eval_run = lm_eval_run(args.model, "arc_easy_cost", out / "eval", include=folder, device=args.device)
            check_run = lm_eval_run(args.model, "pdd_contamination", out / "check", metadata=check_metadata, device=args.device)  # fmt: skip
            seconds["eval"].append(eval_run[0])
            seconds["check"].append(check_run[0])
    eval_forwarded = rows[0][3]
    check_forwarded = rows[1][3] + rows[2][3]  # CoDeC and the exchangeability test at the first setting
    print(f"ARC-shaped task of {args.examples} examples; tokens of {Path(args.model).name}'s tokenizer; {machine()}\n")
    print("| requests of | requests | tokens | tokens forwarded | forwarded / the eval's |\n|---|---|---|---|---|")
    for label, requests, tokens, forwarded in rows:
        print(f"| {label} | {requests:,} | {tokens:,} | {forwarded:,} | {forwarded / eval_forwarded:.2f} |")
    if args.time:
        eval_time, check_time = statistics.median(seconds["eval"]), statistics.median(seconds["check"])
        print(
            f"\nWall time, real lm_eval (HF, {args.device}, float32, batch 8, model load included), median of {args.time}:"
            f" the eval {eval_time:.0f} s, the check ({args.settings[0]}) {check_time:.0f} s: {check_time / eval_time:.2f}"
            f" times the eval (tokens forwarded: {check_forwarded / eval_forwarded:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
