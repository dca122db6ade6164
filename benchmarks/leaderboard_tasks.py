"""The Open LLM Leaderboards (v1 and v2), task by task, through ``pdd_contamination``: the docs table.

Builds the offline copies of every leaf (lm-eval's own YAMLs, local rows in each dataset's schema:
``tests/support/leaderboard_tasks.py``), runs ``lm_eval --tasks leaderboard,arc_challenge,hellaswag,
mmlu,truthfulqa_mc2,winogrande,gsm8k,pdd_contamination`` with ``--model_args`` (the given model), and
prints one Markdown row a task family: what the check renders (the first example of its first leaf),
which tests applied on the fixture run and why not, and the requests planned at the defaults on the
published test sets (CoDeC: 2 an example, at most 1,000 examples; exchangeability: 50 shards x
(1 permutation + 1) = 100; ``planned_requests`` of each test).

    python benchmarks/leaderboard_tasks.py --model_args pretrained=<model dir> [--rows 6] [--check-only]

``--check-only`` runs ``--tasks pdd_contamination`` with ``source_tasks`` the leaderboards: the same check of the
same leaves without the evals (whose few-shot prompts and generations are most of the hours a run of the default
model takes on a CPU).

Needs lm-eval's ``math`` and ``ifeval`` extras (MATH-hard, IFEval).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from _common import run_checked  # noqa: E402
from support.leaderboard_tasks import V1, V2, leaderboard_tasks, stock_leaves  # noqa: E402

from pdd_tasks.tools.arg_types import positive_int  # noqa: E402


#: Each family's examples in the published evaluation split (what ``eval_docs`` holds), per leaf.
PUBLISHED = {
    "mmlu_pro": ("leaderboard_mmlu_pro", "12,032", [12032]),
    "bbh": (
        "leaderboard_bbh (24)",
        "5,761: 250 each, causal_judgement 187, penguins 146, snarks 178",
        [250] * 21 + [187, 146, 178],
    ),
    "gpqa": ("leaderboard_gpqa (3)", "198 / 546 / 448", [198, 546, 448]),
    "math": ("leaderboard_math_hard (7)", "Level 5 only: 1,324 in all", [307, 123, 132, 280, 154, 193, 135]),
    "ifeval": ("leaderboard_ifeval", "541", [541]),
    "musr": ("leaderboard_musr (3)", "250 / 256 / 250", [250, 256, 250]),
    "arc": ("arc_challenge", "1,172", [1172]),
    "hellaswag": ("hellaswag", "10,042 (validation)", [10042]),
    "mmlu": ("mmlu (57)", "14,042 in all (professional_law 1,534)", [1534] + [223] * 55 + [12508 - 55 * 223]),
    "truthfulqa": ("truthfulqa_mc2", "817 (validation)", [817]),
    "winogrande": ("winogrande", "1,267 (validation)", [1267]),
    "gsm8k": ("gsm8k", "1,319", [1319]),
}


def planned(sizes: list[int]) -> int:
    """Requests at pdd_contamination's defaults on leaves of ``sizes`` examples."""
    return sum(2 * min(n, 1000) + 100 for n in sizes)


def rendered(include: Path, name: str) -> str:
    from lm_eval.tasks import TaskManager

    from pdd_tasks.loading.examples import examples_of_task

    with contextlib.redirect_stdout(sys.stderr):  # IFEval's import prints
        (task,) = TaskManager(include_path=str(include)).load([name])["tasks"].values()
    return examples_of_task(task, name)[0]


def cell(text: str, limit: int = 160) -> str:
    text = text if len(text) <= limit else text[: limit // 2] + " ... " + text[-limit // 2 :]  # both ends
    return "`" + text.replace("\n", "⏎").replace("|", "\\|").replace("`", "'") + "`"


def reason(message: str) -> str:
    """A not-applicable message in a few words: the model's window, else its first clause."""
    window = re.search(r"context window of ([\d,]+)", message)
    if window:
        return f"longer than the model's window of {window.group(1).rstrip(',')} tokens"
    return message.split(": ", 1)[-1].split(":")[0][:90]


def outcome(entries: list[dict], test: str) -> str:
    reasons = sorted({reason(entry[test]["not_applicable"]) for entry in entries if "not_applicable" in entry[test]})
    applied = sum("not_applicable" not in entry[test] for entry in entries)
    return f"{applied}/{len(entries)}" + (f" (not: {'; '.join(reasons)})" if reasons else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_args", required=True, help="lm_eval --model_args of the hf model")
    parser.add_argument("--rows", type=positive_int, default=6, help="rows a leaf in the fixtures (CoDeC needs 5)")
    parser.add_argument("--workdir", type=Path, default=None, help="where fixtures and results go (default: a temp folder)")  # fmt: skip
    parser.add_argument(
        "--check-only",
        action="store_true",
        help="run the check alone (source_tasks the leaderboards), not the evals: what a larger model needs on a CPU",
    )
    options = parser.parse_args()
    if not re.search(r"(^|,)pretrained=[^,]", options.model_args):
        parser.error(f"--model_args: expected pretrained=<model>[,<more>] (lm_eval's hf arguments), got {options.model_args!r}")  # fmt: skip
    work = (options.workdir or Path(tempfile.mkdtemp(prefix="leaderboards-"))).resolve()
    include = leaderboard_tasks(work / "tasks", rows=options.rows)
    (include / "pdd_contamination.yaml").write_text(f"include: {REPO / 'task_configs/contamination/pdd_contamination.yaml'}\n")  # fmt: skip
    metadata = {"codec": {"max_examples": options.rows}, "exchangeability": {"num_shards": 2}}
    tasks = [*V2, *V1, "pdd_contamination"]
    if options.check_only:
        metadata |= {"source_tasks": ",".join(tasks[:-1]), "source_include_path": str(include)}
        tasks = tasks[-1:]
    command = [
        str(Path(sys.executable).with_name("lm_eval")), "--model", "hf", "--model_args", options.model_args,
        "--device", "cpu", "--include_path", str(include), "--tasks", ",".join(tasks),
        "--batch_size", "8", "--gen_kwargs", "max_gen_toks=4", "--metadata", json.dumps(metadata),
        "--output_path", str(work / "out"),
    ]  # fmt: skip
    run_checked(command, capture=False, cwd=work, stdout=sys.stderr)  # stdout: the table alone
    results = json.loads(sorted((work / "out").rglob("results_*.json"))[-1].read_text())
    summary = results["configs"]["pdd_contamination"]["metadata"]["contamination"]
    leaves = stock_leaves()
    print("| task | published examples | what the check renders (first fixture example) | CoDeC | exchangeability | requests at the defaults |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for family, (label, published, sizes) in PUBLISHED.items():
        names = [name for name, (of, _) in leaves.items() if of == family]
        entries = [summary[name] for name in names]
        row = [label, published, cell(rendered(include, names[0])), outcome(entries, "codec"), outcome(entries, "exchangeability"), f"{planned(sizes):,}"]  # fmt: skip
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
