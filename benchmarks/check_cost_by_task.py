"""What the contamination check costs beside each eval of the Open LLM Leaderboards, task by task (issue 45, item 1).

The offline copies of the leaderboards' tasks (lm-eval's own YAMLs, ``--limit-examples`` local rows a leaf
in each dataset's schema: ``tests/support/leaderboard_tasks.py``, as ``leaderboard_tasks.py`` builds them)
are loaded as ``lm_eval --include_path <copies> --tasks <--tasks>`` loads them, with each task's own few-shot
setting, and ``pdd_contamination`` is given them as the run's tasks (``see_run_tasks``, as in
``lm_eval --tasks <--tasks>,pdd_contamination``: CoDeC and the exchangeability test at their defaults, the
shards ``--shards``). Every request is encoded as the stock HF backend encodes it, with ``--model``'s
tokenizer (default: the default model's); no model is run.

For each leaf, in tokens forwarded:

- the eval, stock lm-eval (a run without the check: no patch). Loglikelihood requests (multiple choice)
  as in ``contamination_cost.py``: the requests that differ only in their last token forwarded once (its
  logits cache). ``generate_until`` requests (GSM8K, MATH, IFEval) share nothing: the prompt (the
  request's context, few-shot included, encoded as ``HFLM.generate_until`` encodes it, cut to the window
  less ``max_gen_toks``) plus the generated tokens, counted two ways: the task's ``max_gen_toks`` (an upper
  bound: generation stops there at the latest) and the gold answer's tokens (a lower estimate: a model that
  answers in as many tokens as the gold answer; IFEval has no gold answer, so 0 there);
- the check, under patch ``hf-shared-passes`` (the run with the check): the tokens the check's requests add
  to the call that holds the eval's loglikelihood requests, ``forwarded_shared(eval + check) -
  forwarded_shared(eval)`` (what the patch saves on the eval's own passes is not counted to the check);
- check / eval (for a generate_until eval: against the upper, then the lower eval count).

Each group's row sums its leaves (nested groups too: ``leaderboard_bbh``, ``mmlu_stem``); the eval's
loglikelihood requests of different leaves share no pass, so a leaf's counts are those of its own call.
The rows are local rows in each dataset's schema (``support/leaderboard_tasks.py``), shorter than the
published ones: the ratios are those of these rows' lengths, and the check's per-example cost is that of
at most 1,000 examples (CoDeC's ``max_examples``), so a published set larger than that pays less per
example for CoDeC.

    python benchmarks/check_cost_by_task.py --limit-examples 100 --output benchmarks/results/check_cost_by_task.txt
    python benchmarks/check_cost_by_task.py --tasks gsm8k,arc_challenge --limit-examples 200
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from _common import REPO, machine, recorded_command
from contamination_cost import encode_request, forwarded, forwarded_shared


sys.path.insert(0, str(REPO / "tests"))

from support.leaderboard_tasks import V1, V2, leaderboard_tasks  # noqa: E402


#: ``HFLM``'s ``max_gen_toks`` where a task's ``generation_kwargs`` name none.
DEFAULT_MAX_GEN_TOKS = 256


@dataclass
class LeafCost:
    """One leaf's requests in tokens: the eval's loglikelihood requests (token lists), its generations
    (prompt tokens, and generated tokens at ``max_gen_toks`` and at the gold answer's length), the check's
    requests (token lists) and which of the check's tests apply."""

    name: str
    output: str
    shots: int
    examples: int
    loglikelihood: list[list[int]] = field(default_factory=list)
    prompt: int = 0
    generated_max: int = 0
    generated_gold: int = 0
    check: list[list[int]] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)

    def eval_tokens(self) -> tuple[int, int]:
        """``(lower, upper)`` tokens the eval forwards with stock lm-eval: the loglikelihood requests under
        its logits cache, plus prompts and generated tokens at the gold answer's length / at
        ``max_gen_toks`` (equal for an eval without generations)."""
        scored = forwarded([self.loglikelihood])
        return scored + self.prompt + self.generated_gold, scored + self.prompt + self.generated_max

    def check_tokens(self) -> int:
        """Tokens the check's requests add under ``hf-shared-passes`` to the call of the eval's
        loglikelihood requests."""
        return forwarded_shared([self.loglikelihood + self.check]) - forwarded_shared([self.loglikelihood])


def parse_names(value: str) -> list[str]:
    """``--tasks``: names separated by commas (as ``lm_eval --tasks``) or spaces."""
    names = [name for part in value.split(",") for name in part.split()]
    if not names:
        raise argparse.ArgumentTypeError("expected task or group names, e.g. leaderboard,gsm8k")
    return names


def generation_tokens(instance, tokenizer, window: int) -> tuple[int, int]:
    """``(prompt tokens, max_gen_toks)`` of a ``generate_until`` request as ``HFLM.generate_until``
    forwards it: the context encoded with the tokenizer's own special tokens, its last ``window -
    max_gen_toks`` tokens kept."""
    from lm_eval.models.utils import normalize_gen_kwargs

    context, gen_kwargs = instance.args
    most = normalize_gen_kwargs(dict(gen_kwargs), DEFAULT_MAX_GEN_TOKS)["max_gen_toks"]
    if most >= window:
        raise SystemExit(
            f"{instance.task_name}: max_gen_toks {most} is not below the model's window of {window} tokens (lm-eval's HF "
            "backend refuses it too); give a --model with a longer window."
        )
    return min(len(tokenizer(context).input_ids), window - most), most


def gold_tokens(task, doc: dict, tokenizer) -> int:
    """Tokens of the gold answer a generation would produce (the target after the task's delimiter); 0 where
    the task has no text target (IFEval's ``doc_to_target: 0``)."""
    target = task.doc_to_target(doc)
    if not isinstance(target, str):
        return 0
    return len(tokenizer(task.config.target_delimiter + target, add_special_tokens=False).input_ids)


def eval_cost(name: str, task, tokenizer, window: int) -> LeafCost:
    """The eval's requests of leaf ``name`` (built as lm-eval builds them, with its few-shot setting) in tokens."""
    task.set_fewshot_seed(seed=1234)  # simple_evaluate's default fewshot_random_seed
    task.build_all_requests(limit=None, rank=0, world_size=1)
    cost = LeafCost(name, task.OUTPUT_TYPE, task.config.num_fewshot or 0, len(task.eval_docs))
    for instance in task.instances:
        if instance.request_type == "loglikelihood":
            cost.loglikelihood.append(encode_request(instance, tokenizer)[0])
        elif instance.request_type == "generate_until":
            prompt, most = generation_tokens(instance, tokenizer, window)
            cost.prompt += prompt
            cost.generated_max += most
            cost.generated_gold += gold_tokens(task, instance.doc, tokenizer)
        else:
            raise SystemExit(f"{name}: {instance.request_type} requests are not counted by this script.")
    return cost


def check_task(metadata: dict):
    """``pdd_contamination`` from its YAML in this checkout with ``metadata`` and no ``source_tasks``: it
    checks the tasks it is shown (``see_run_tasks``), as in a run with other tasks."""
    from lm_eval.tasks._yaml_loader import load_yaml

    from pdd_tasks.paths import tasks_path

    config = load_yaml(Path(tasks_path()) / "contamination" / "pdd_contamination.yaml", resolve_func=True)
    return config["class"](config={**config, "metadata": metadata})


def add_check(costs: dict[str, LeafCost], tasks: dict, group_map: dict, tokenizer, metadata: dict) -> None:
    """The check's requests on the leaves of ``tasks`` (built as the run builds them) into each leaf's cost."""
    check = check_task(metadata)
    check.see_run_tasks(dict(tasks), {name: list(children) for name, children in group_map.items()})
    check.build_all_requests(limit=None, rank=0, world_size=1)
    for instance in check.instances:
        costs[instance.doc["source_task"]].check.append(encode_request(instance, tokenizer)[0])
    summary = check.config.metadata["contamination"]
    for name, cost in costs.items():
        cost.tests = [test for test in ("codec", "exchangeability") if "not_applicable" not in summary[name].get(test, {})]  # fmt: skip


def spans(low: float, high: float, digits: int | None = None) -> str:
    """``low`` alone where it equals ``high``, else ``low-high``; whole numbers with thousands separators, else
    ``digits`` decimals."""
    shown = (lambda x: f"{x:.{digits}f}") if digits is not None else (lambda x: f"{x:,}")
    return shown(low) if shown(low) == shown(high) else f"{shown(low)}-{shown(high)}"


TESTS_SHOWN = {("codec", "exchangeability"): "", ("codec",): " (CoDeC only)", ("exchangeability",): " (exchangeability only)", (): " (no test applies)"}  # fmt: skip


def row(label: str, output: str, shots: str, examples: int, costs: list[LeafCost], note: str = "") -> str:
    """A table row of the leaves ``costs`` summed."""
    low = sum(cost.eval_tokens()[0] for cost in costs)
    high = sum(cost.eval_tokens()[1] for cost in costs)
    check = sum(cost.check_tokens() for cost in costs)
    ratio = spans(check / high, check / low, 2) if low else "-"
    return f"| {label} | {output} | {shots} | {examples:,} | {spans(low, high)} | {check:,}{note} | {ratio} |"


def table(names: list[str], costs: dict[str, LeafCost], group_map: dict) -> list[str]:
    """The markdown table: a row a leaf, in the order of ``names`` (a group's leaves, then its sum, nested
    groups likewise), then the sum of every leaf."""
    lines = [
        "| task | output | shots | examples | eval tokens, stock | check tokens, shared | check / eval |",
        "|---|---|---|---|---|---|---|",
    ]

    def leaves(name: str) -> list[str]:
        return [leaf for child in group_map[name] for leaf in leaves(child)] if name in group_map else [name]

    def add(name: str) -> None:
        if name not in group_map:
            cost = costs[name]
            lines.append(row(name, cost.output, str(cost.shots), cost.examples, [cost], TESTS_SHOWN[tuple(cost.tests)]))
            return
        for child in group_map[name]:
            add(child)
        under = [costs[leaf] for leaf in leaves(name)]
        outputs = ", ".join(sorted({cost.output for cost in under}))
        label = f"**{name}** (sum of {len(under)})"
        lines.append(row(label, outputs, "", sum(cost.examples for cost in under), under))

    for name in names:
        add(name)
    if len(names) > 1:
        every = list(costs.values())
        lines.append(row(f"**all** (sum of {len(every)})", "", "", sum(cost.examples for cost in every), every))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", "--groups", type=parse_names, default=[*V2, *V1],
        help="tasks and groups of the leaderboards' local copies, comma-separated (default: both leaderboards, as "
        "leaderboard_tasks.py runs them: " + ",".join([*V2, *V1]) + ")",
    )  # fmt: skip
    parser.add_argument(
        "--limit-examples", type=int, default=100, help="rows a leaf in the local copies: the examples of each eval and check"
    )  # fmt: skip
    parser.add_argument(
        "--shards", type=int, default=None,
        help="the exchangeability test's num_shards (default: its 50, fewer where --limit-examples holds fewer than 2 a shard)",
    )  # fmt: skip
    parser.add_argument("--model", default=None, help="whose tokenizer and window count the tokens (default: the default model)")  # fmt: skip
    parser.add_argument("--output", type=Path, default=None, help="also write the table here, with the command and date")  # fmt: skip
    parser.add_argument("--force", action="store_true", help="replace --output's file if it exists")
    args = parser.parse_args()
    if args.output is not None and args.output.exists() and not args.force:
        raise SystemExit(f"--output {args.output} exists; choose another file or add --force to replace it.")
    if args.limit_examples < 5:
        raise SystemExit(f"--limit-examples {args.limit_examples}: CoDeC needs at least 5 examples a task; give 5 or more.")  # fmt: skip
    from lm_eval.tasks import TaskManager
    from transformers import AutoTokenizer

    from pdd_metrics.exchangeability import DEFAULT_NUM_SHARDS, MIN_EXAMPLES_PER_SHARD
    from pdd_tasks.dataset_tests.core import model_window

    if args.model is None:
        from pdd_tasks.tools.default_model import ensure_default_model

        args.model = str(ensure_default_model())
    window = model_window({"pretrained": args.model})
    if window is None:
        raise SystemExit(f"--model {args.model}: no HF tokenizer and config with a context window there; give a local HF model folder.")  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    shards = args.shards or min(DEFAULT_NUM_SHARDS, args.limit_examples // MIN_EXAMPLES_PER_SHARD)
    metadata = {"pretrained": args.model, "exchangeability": {"num_shards": shards}}
    with tempfile.TemporaryDirectory() as tmp:
        include = leaderboard_tasks(Path(tmp) / "tasks", rows=args.limit_examples)
        manager = TaskManager(include_path=str(include))
        unknown = [name for name in args.tasks if not manager.match_tasks([name])]
        if unknown:
            raise SystemExit(f"--tasks {','.join(unknown)}: no task or group of the leaderboards' local copies of that name; e.g. leaderboard,gsm8k.")  # fmt: skip
        with contextlib.redirect_stdout(sys.stderr):  # IFEval's import prints
            loaded = manager.load(args.tasks)
        tasks, group_map = loaded["tasks"], loaded.get("group_map") or {}
        costs = {name: eval_cost(name, task, tokenizer, window.window) for name, task in tasks.items()}
        add_check(costs, tasks, group_map, tokenizer, metadata)
    lines = [
        f"Leaderboard tasks' local copies, {args.limit_examples} rows a leaf; tokens of {Path(args.model).name}'s tokenizer"
        f" (window {window.window:,}); the check at its defaults, the exchangeability test {shards} shards x (1"
        f" permutation + 1); {machine()}",
        "",
        *table(args.tasks, costs, group_map),
        "",
        "Eval tokens: stock lm-eval (a run without the check); for generate_until, the generated tokens at the gold"
        " answer's length (a lower estimate) - at max_gen_toks (an upper bound). Check tokens: what the check's requests"
        " add under hf-shared-passes to the call of the eval's loglikelihood requests (generate_until requests share"
        " nothing).",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output is not None:
        command = recorded_command("check_cost_by_task.py", sys.argv[1:], leave_out=("--force",))
        header = f"# {command} (tokens only, no model), {datetime.date.today():%-d %B %Y}\n"
        args.output.write_text(header + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
