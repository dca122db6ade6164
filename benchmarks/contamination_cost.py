"""What a contamination check costs beside the eval it checks (issue 33, item 4; issue 45, item 1).

An ARC-shaped local task of ``--examples`` four-choice questions (lm-eval's stock ``arc_easy`` YAML
pointed at a local file; each question a cloze of a WikiMIA text shipped with the package, its blank
among 3 words of other texts): the requests lm-eval builds for the eval itself (one per choice), and
those ``pdd_contamination`` builds for CoDeC and for the exchangeability test at each ``--settings``
(``shards x permutations``; the defaults 50 x 250 first), each encoded as the stock HF backend encodes
it (default model's tokenizer), counted as requests, tokens and tokens forwarded. The stock HF backend
forwards the requests of one call that differ only in their last token once (lm-eval's logits cache: a
question with one-token choices is one pass, not four). In one run the eval and the check are one call,
so CoDeC's no-context request (the question with its gold answer, split after its first words) rides on
the eval's pass of the same tokens (patch ``logits-cache-own-positions``; ``codec.share_passes`` false
sends CoDeC's requests in a call of their own). The second table gives the check's cost in the eval's
run (tokens the run forwards less the eval's alone) not shared, shared, and the floor where each
in-context request's context example were also read from that example's pass (kept keys and values,
which the HF backend does not do). On a CPU or GPU forward pass a token of a short sequence costs
about the same as any other, so the ratio of tokens forwarded is the cost ratio. No model is run.

``--time N`` then runs the model too, with the real ``lm_eval`` command (HF, float32, batch size 8,
on ``--device``): the eval alone (``--tasks arc_easy_cost``), and the eval with the check in one run
(``--tasks arc_easy_cost,pdd_contamination``, CoDeC at its defaults, the exchangeability test at the
first ``--settings``) with its passes shared and not, N times each in turn; the median wall time of each,
model load included, and the check's cost as the difference from the eval alone. The check logs its
planned request count before scoring (``pdd_contamination: N requests planned``).

    python benchmarks/contamination_cost.py --examples 1000 --settings 50x250 50x20 50x10 50x4 20x4
    python benchmarks/contamination_cost.py --examples 1000 --settings 50x1 --time 1
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

from pdd_tasks.backends.shared_passes import passes_answering
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


def encode_request(instance, tokenizer) -> tuple[list[int], int]:
    """``(tokens, context length)`` of a loglikelihood request as the stock HF backend encodes it
    (``HFLM.loglikelihood``, ``_encode_pair``): an empty context is the start token (BOS, else EOS); a
    context's trailing spaces move to the continuation; the whole text is encoded once and cut after the
    context's own encoding, so two requests of the same text split at different points have the same
    tokens (an eval's question with its gold answer and CoDeC's no-context request of it)."""
    context, continuation = instance.args
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if not context:
        return [start, *tokenizer(continuation, add_special_tokens=False).input_ids], 1
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tokenizer(context + continuation, add_special_tokens=False).input_ids
    return whole, len(tokenizer(context, add_special_tokens=False).input_ids)


def forwarded(calls: list[list[list[int]]]) -> int:
    """Tokens stock lm-eval's HF backend forwards for ``calls`` (each a ``loglikelihood`` call's requests,
    as token lists): its logits cache (``HFLM(logits_cache=True)``, the default) forwards the requests of a
    call with the same tokens but the last once, the longest of them (lm-eval groups them by ``context +
    continuation[:-1]``: a question with one-token choices is one pass); requests of different calls share
    nothing. The eval alone in a run without a pdd task (no patch applied)."""
    total = 0
    for call in calls:
        groups: dict[tuple[int, ...], int] = {}
        for tokens in call:
            key = tuple(tokens[:-1])
            groups[key] = max(groups.get(key, 0), len(tokens))
        total += sum(groups.values())
    return total


def forwarded_shared(calls: list[list[list[int]]]) -> int:
    """Tokens the HF backend forwards for ``calls`` under patch ``hf-shared-passes`` (a run with a pdd
    task): a request is answered from the longest pass of its call whose input begins with its own
    (:func:`pdd_tasks.backends.shared_passes.passes_answering`, the code the run uses)."""
    total = 0
    for call in calls:
        owners = passes_answering([(tokens[:-1], tokens[-1:]) for tokens in call], window=10**9)
        total += sum(len(call[owner]) for owner in set(owners))
    return total


def forwarded_vllm(calls: list[list[list[int]]], shared: bool) -> int:
    """Tokens lm-eval's vLLM backend sends for ``calls``: every request whole (stock: no logits cache), or
    under patch ``vllm-shared-passes`` only those whose tokens begin no longer request of their call."""
    if not shared:
        return sum(len(tokens) for call in calls for tokens in call)
    total = 0
    for call in calls:
        owners = passes_answering([(tokens[:-1], tokens[-1:]) for tokens in call], window=10**9, whole=True)
        total += sum(len(call[owner]) for owner in set(owners))
    return total


def every_prefix_once(calls: list[list[list[int]]]) -> int:
    """Tokens forwarded if every common prefix of a call's inputs were forwarded once (the keys and values of a
    shared prefix kept for every request that begins with it: a prefix tree of the inputs); not done."""
    total = 0
    for call in calls:
        inputs = sorted({tuple(tokens[:-1]) for tokens in call})
        previous: tuple[int, ...] = ()
        for tokens in inputs:
            common = next((i for i, (a, b) in enumerate(zip(previous, tokens, strict=False)) if a != b), min(len(previous), len(tokens)))  # fmt: skip
            total += len(tokens) + 1 - common
            previous = tokens
    return total


def contamination_task(metadata: dict):
    """``pdd_contamination`` built from its YAML in this checkout with ``metadata``, its requests built."""
    from lm_eval.tasks._yaml_loader import load_yaml

    from pdd_tasks.paths import tasks_path

    config = load_yaml(Path(tasks_path()) / "contamination" / "pdd_contamination.yaml", resolve_func=True)
    task = config["class"](config={**config, "metadata": metadata})
    task.build_all_requests(limit=None, rank=0, world_size=1)
    return task


def timed_runs(args, folder: Path, metadata: dict) -> dict[str, list[float]]:
    """``--time``: the real ``lm_eval`` runs, ``args.time`` times each in turn: the eval alone, and the eval with
    the check in one run, its passes shared and not (``codec.share_passes``); wall seconds of each."""
    from pdd_tasks.paths import tasks_path

    (folder / "pdd_contamination.yaml").write_text(f"include: {Path(tasks_path()) / 'contamination' / 'pdd_contamination.yaml'}\n")  # fmt: skip
    tasks = "arc_easy_cost,pdd_contamination"
    runs = {
        "eval": ("arc_easy_cost", None),
        "eval + check, shared": (tasks, metadata),
        "eval + check, not shared": (tasks, {**metadata, "codec": {"share_passes": False}}),
    }
    seconds: dict[str, list[float]] = {label: [] for label in runs}
    for repeat in range(args.time):
        for number, (label, (task, meta)) in enumerate(runs.items()):
            out = folder / f"runs-{repeat}-{number}"
            seconds[label].append(lm_eval_run(args.model, task, out, include=folder, metadata=meta, device=args.device)[0])  # fmt: skip
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--settings", nargs="+", default=["50x250", "50x20", "50x10", "50x4", "20x4"])
    parser.add_argument("--model", default=None, help="whose tokenizer counts the tokens (default: the default model)")
    parser.add_argument(
        "--time", type=int, default=0, metavar="N", help="also time the eval alone and with the check, N times each"
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
        evals = [encode_request(i, tokenizer)[0] for i in eval_task.instances]
        eval_forwarded = forwarded([evals])
        rows = [("the eval itself (arc_easy, 0-shot), stock lm-eval", len(evals), sum(map(len, evals)), eval_forwarded)]
        eval_shared = forwarded_shared([evals])
        rows.append(("the eval itself, under hf-shared-passes", len(evals), sum(map(len, evals)), eval_shared))
        one_run, vllm_one_run = [], []
        for setting in args.settings:
            shards, permutations = (int(x) for x in setting.split("x"))
            metadata = {
                "source_tasks": ["arc_easy_cost"],
                "source_include_path": str(folder),
                "exchangeability": {"num_shards": shards, "permutations": permutations, "max_requests": 10**6},
            }
            check = contamination_task(metadata)
            tests = {
                test: [i for i in check.instances if i.doc["test"] == test] for test in ("codec", "exchangeability")
            }
            tokens = {test: [encode_request(i, tokenizer)[0] for i in mine] for test, mine in tests.items()}
            if setting == args.settings[0]:  # CoDeC's requests do not depend on the exchangeability settings
                label = "CoDeC (defaults: 1 in-context example, up to 1,000 examples)"
                rows.append((label, len(tokens["codec"]), sum(map(len, tokens["codec"])), forwarded_shared([tokens["codec"]])))  # fmt: skip
            label = f"exchangeability {shards} x {permutations}"
            exchange = tokens["exchangeability"]
            rows.append((label, len(exchange), sum(map(len, exchange)), forwarded_shared([exchange])))
            together = evals + tokens["codec"] + exchange
            runs = {
                "stock": forwarded([together]),
                "apart": forwarded_shared([evals + exchange, tokens["codec"]]),
                "shared": forwarded_shared([together]),
                "tree": every_prefix_once([together]),
            }
            one_run.append((setting, runs))
            vllm_runs = {
                "stock": forwarded_vllm([together], shared=False),
                "apart": forwarded_vllm([evals + exchange, tokens["codec"]], shared=True),
                "shared": forwarded_vllm([together], shared=True),
            }
            vllm_one_run.append((setting, vllm_runs))
        shards, permutations = (int(x) for x in args.settings[0].split("x"))
        check_metadata = {
            "source_tasks": ["arc_easy_cost"],
            "source_include_path": str(folder),
            "exchangeability": {"num_shards": shards, "permutations": permutations},
        }
        seconds = timed_runs(args, folder, check_metadata) if args.time else {}
    print(f"ARC-shaped task of {args.examples} examples; tokens of {Path(args.model).name}'s tokenizer; {machine()}\n")
    print("Each alone:\n")
    print("| requests of | requests | tokens | tokens forwarded | forwarded / the eval's |\n|---|---|---|---|---|")
    for label, requests, tokens, count in rows:
        print(f"| {label} | {requests:,} | {tokens:,} | {count:,} | {count / eval_forwarded:.2f} |")
    print(
        "\nThe run of the eval with the check: tokens forwarded by the run, less the stock eval's alone, and that / the"
        " stock eval's (the eval alone is a run with no pdd task, so stock lm-eval). Stock: no patch (as lm-eval"
        " 0.4.13; its logits cache then read the eval's gold answer at the wrong positions). Not shared:"
        " codec.share_passes false (CoDeC in a call of its own). Shared: the default, patch hf-shared-passes."
        " Every prefix once: if the keys and values of every common prefix were kept (not done).\n"
    )
    print("| exchangeability | stock | not shared | shared | every prefix once |\n|---|---|---|---|---|")
    for setting, runs in one_run:
        cells = " | ".join(f"{count - eval_forwarded:,} ({(count - eval_forwarded) / eval_forwarded:.2f})" for count in runs.values())  # fmt: skip
        print(f"| {setting} | {cells} |")
    vllm_eval = forwarded_vllm([evals], shared=False)
    print(
        f"\nOn vLLM (lm-eval's vLLM backend sends every request whole; the eval alone {vllm_eval:,} tokens), the same"
        " run, less the eval alone, and that / the eval's:\n"
    )
    print("| exchangeability, vLLM | stock | not shared | shared |\n|---|---|---|---|")
    for setting, runs in vllm_one_run:
        cells = " | ".join(f"{count - vllm_eval:,} ({(count - vllm_eval) / vllm_eval:.2f})" for count in runs.values())  # fmt: skip
        print(f"| {setting} on vLLM | {cells} |")
    print(
        f"\nOf what the shared run saves, {eval_forwarded - eval_shared:,} tokens are the eval's own passes (its"
        " one-token choices on its longer ones), which the eval alone would save too under the patch: against"
        f" the eval under the same sharing ({eval_shared:,}), the check adds"
        + "; ".join(
            f" {runs['shared'] - eval_shared:,} tokens ({(runs['shared'] - eval_shared) / eval_shared:.2f} evals) at {setting}"
            for setting, runs in one_run
        )
    )
    if seconds:
        medians = {label: statistics.median(values) for label, values in seconds.items()}
        base = medians.pop("eval")
        print(
            f"\nWall time, real lm_eval (HF, {args.device}, float32, batch 8, model load included), median of {args.time}:"
            f" the eval alone {base:.0f} s; "
            + "; ".join(
                f"{label} {value:.0f} s (the check: {value - base:.0f} s, {(value - base) / base:.2f} times the eval)"
                for label, value in medians.items()
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
