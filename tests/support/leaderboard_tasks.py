"""Every task of the two Open LLM Leaderboards offline: lm-eval's own YAMLs with only the data local.

v2 is lm-eval's ``leaderboard`` group (``leaderboard_mmlu_pro``, ``leaderboard_bbh`` 24,
``leaderboard_gpqa`` 3, ``leaderboard_math_hard`` 7, ``leaderboard_ifeval``, ``leaderboard_musr`` 3);
v1 is ``arc_challenge``, ``hellaswag``, ``mmlu`` (the group: 57 subjects), ``truthfulqa_mc2``,
``winogrande`` and ``gsm8k``. :func:`leaderboard_tasks` writes, for each leaf, a few rows in its
dataset's own schema (the fields its ``doc_to_text``, ``doc_to_target``, ``doc_to_choice`` and
``process_docs`` read) and a YAML of the *same task name* that includes the installed stock YAML and
overrides only where the data comes from (``dataset_path: json`` with ``data_files``). Passed as
``--include_path``, these shadow the stock leaves (lm-eval's task index lets an include path override
a stock task of the same name, with a warning), so the stock groups (``leaderboard``, ``mmlu``,
``leaderboard_bbh``, ...) and their settings are lm-eval's own, unchanged:
``lm_eval --include_path <dir> --tasks leaderboard,pdd_contamination`` is the user's command.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from .standard_tasks import NAMES, THINGS, arc_rows, gsm8k_rows, stock_tasks_dir, write_jsonl


#: Each family: the stock leaf YAMLs (globs under lm-eval's task directory, group files left out).
V2_FAMILIES = {
    "mmlu_pro": ["leaderboard/mmlu_pro/mmlu_pro.yaml"],
    "bbh": ["leaderboard/bbh_mc/[a-z]*.yaml"],
    "gpqa": ["leaderboard/gpqa/gpqa_*.yaml"],
    "math": ["leaderboard/math/math_*.yaml"],
    "ifeval": ["leaderboard/ifeval/ifeval.yaml"],
    "musr": ["leaderboard/musr/musr_*.yaml"],
}
V1_FAMILIES = {
    "arc": ["arc/arc_challenge.yaml"],
    "hellaswag": ["hellaswag/hellaswag.yaml"],
    "mmlu": ["mmlu/default/mmlu_*.yaml"],
    "truthfulqa": ["truthfulqa/truthfulqa_mc2.yaml"],
    "winogrande": ["winogrande/default.yaml"],
    "gsm8k": ["gsm8k/gsm8k.yaml"],
}
FAMILIES = {**V2_FAMILIES, **V1_FAMILIES}

#: The groups (and tasks) a run names for each leaderboard.
V2 = ["leaderboard"]
V1 = ["arc_challenge", "hellaswag", "mmlu", "truthfulqa_mc2", "winogrande", "gsm8k"]


def _sum_question(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(2, 60), rng.randint(2, 60)
    thing = rng.choice(THINGS)
    return f"{rng.choice(NAMES)} has {a} {thing} and finds {b} more. How many {thing} now?", a + b


def _options(rng: random.Random, answer: int, n: int) -> list[str]:
    """``n`` distinct numbers as text, ``answer`` among them, in a random order."""
    options = {answer}
    while len(options) < n:
        options.add(answer + rng.randint(-20, 20))
    options = [str(option) for option in options]
    rng.shuffle(options)
    return options


def mmlu_pro_rows(n: int, seed: int) -> list[dict]:
    """MMLU-Pro: ``question``, ``options`` (up to 10), ``answer`` (a letter), ``answer_index``, ``category``."""
    rng = random.Random(seed)
    rows = []
    for index in range(n):
        question, answer = _sum_question(rng)
        options = _options(rng, answer, rng.choice([4, 10]))
        at = options.index(str(answer))
        rows.append(
            {
                "question_id": index,
                "question": question,
                "options": options,
                "answer": "ABCDEFGHIJ"[at],
                "answer_index": at,
                "cot_content": "",
                "category": "math",
                "src": "local",
            }
        )
    return rows


def bbh_rows(n: int, seed: int, choices: list[str]) -> list[dict]:
    """BIG-Bench Hard (multiple-choice form): ``input`` and ``target``, one of the subtask's ``choices``."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        question, answer = _sum_question(rng)
        rows.append({"input": f"{question} Options: {', '.join(choices[:4])}.", "target": rng.choice(choices)})
    return rows


def gpqa_rows(n: int, seed: int) -> list[dict]:
    """GPQA: ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3`` (its ``process_docs`` shuffles them)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        question, answer = _sum_question(rng)
        wrong = [option for option in _options(rng, answer, 4) if option != str(answer)]
        rows.append(
            {
                "Question": question,
                "Correct Answer": str(answer),
                **{f"Incorrect Answer {k + 1}": wrong[k] for k in range(3)},
                "Subdomain": "arithmetic",
                "High-level domain": "Math",
            }
        )
    return rows


def math_rows(n: int, seed: int, subject: str) -> list[dict]:
    """MATH: ``problem``, ``solution`` with a ``\\boxed{}`` answer, ``level``, ``type``; the last row is
    Level 2, which the hard subset's ``process_docs`` leaves out."""
    rng = random.Random(seed)
    rows = []
    for index in range(n):
        a, b = rng.randint(2, 30), rng.randint(2, 30)
        rows.append(
            {
                "problem": f"Compute ${a} \\cdot {b} + {a}$.",
                "solution": f"We have ${a} \\cdot {b} + {a} = {a * b} + {a} = \\boxed{{{a * b + a}}}$.",
                "level": "Level 2" if index == n - 1 else "Level 5",
                "type": subject,
            }
        )
    return rows


#: IFEval's instructions the rows use, with their arguments (the other argument fields null, as in the dataset).
IFEVAL_INSTRUCTIONS = [
    ("punctuation:no_comma", {}),
    ("change_case:english_lowercase", {}),
    ("keywords:existence", {"keywords": ["river", "stone"]}),
    ("length_constraints:number_words", {"relation": "at least", "num_words": 20}),
]
IFEVAL_ARGUMENTS = ("keywords", "relation", "num_words")


def ifeval_rows(n: int, seed: int) -> list[dict]:
    """IFEval: ``key``, ``prompt``, ``instruction_id_list``, ``kwargs`` (one dict an instruction); no target."""
    rng = random.Random(seed)
    rows = []
    for index in range(n):
        instruction, arguments = IFEVAL_INSTRUCTIONS[index % len(IFEVAL_INSTRUCTIONS)]
        thing = rng.choice(THINGS)
        rows.append(
            {
                "key": 1000 + index,
                "prompt": f"Write a short note to {rng.choice(NAMES)} about a box of {thing}. Follow this rule: {instruction}.",
                "instruction_id_list": [instruction],
                "kwargs": [{name: arguments.get(name) for name in IFEVAL_ARGUMENTS}],
            }
        )
    return rows


def musr_rows(n: int, seed: int) -> list[dict]:
    """MuSR: ``narrative``, ``question``, ``choices`` (a Python list as text), ``answer_index``, ``answer_choice``."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        people = rng.sample(NAMES, 3)
        thing = rng.choice(THINGS)
        culprit = rng.randrange(3)
        rows.append(
            {
                "narrative": f"{people[0]}, {people[1]} and {people[2]} shared a room. In the evening the {thing} were gone, "
                f"and only {people[culprit]} had the key.",
                "question": f"Who took the {thing}?",
                "choices": str(people),
                "answer_index": culprit,
                "answer_choice": people[culprit],
            }
        )
    return rows


def hellaswag_rows(n: int, seed: int) -> list[dict]:
    """HellaSwag: ``activity_label``, ``ctx_a``, ``ctx_b``, ``endings`` (4), ``label`` (a digit as text)."""
    rng = random.Random(seed)
    rows = []
    for index in range(n):
        name, thing = rng.choice(NAMES), rng.choice(THINGS)
        endings = [f"counts the {thing} one by one.", "flies to the moon.", "turns into a tree.", "sings to the wall."]
        label = rng.randrange(4)
        endings[0], endings[label] = endings[label], endings[0]
        ctx_a, ctx_b = f"{name} opens a box of {thing} on the table.", f"then {name}"
        rows.append(
            {
                "ind": index,
                "activity_label": "Counting things",
                "ctx_a": ctx_a,
                "ctx_b": ctx_b,
                "ctx": f"{ctx_a} {ctx_b}",
                "endings": endings,
                "source_id": f"local-{seed}-{index}",
                "split": "val",
                "split_type": "indomain",
                "label": str(label),
            }
        )
    return rows


def mmlu_rows(n: int, seed: int, subject: str) -> list[dict]:
    """MMLU: ``question``, ``subject``, ``choices`` (4), ``answer`` (an index)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        question, answer = _sum_question(rng)
        choices = _options(rng, answer, 4)
        rows.append(
            {"question": question, "subject": subject, "choices": choices, "answer": choices.index(str(answer))}
        )
    return rows


def truthfulqa_rows(n: int, seed: int) -> list[dict]:
    """TruthfulQA (multiple_choice): ``question``, ``mc1_targets`` and ``mc2_targets`` (``choices``,
    ``labels``: the true answers first)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        thing = rng.choice(THINGS)
        true = [f"A box of {thing} holds whatever was put in it.", f"It depends on how many {thing} were packed."]
        false = [f"Every box of {thing} holds exactly {rng.randint(5, 90)}.", f"Boxes of {thing} are always empty."]
        rows.append(
            {
                "question": f"How many {thing} are in {rng.choice(NAMES)}'s box of {thing}?",
                "mc1_targets": {"choices": [true[0], *false], "labels": [1, 0, 0]},
                "mc2_targets": {"choices": [*true, *false], "labels": [1, 1, 0, 0]},
            }
        )
    return rows


def winogrande_rows(n: int, seed: int) -> list[dict]:
    """WinoGrande: ``sentence`` with a blank ``_``, ``option1``, ``option2``, ``answer`` ("1" or "2")."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        first, second = rng.sample(NAMES, 2)
        thing = rng.choice(THINGS)
        answer = rng.choice(["1", "2"])
        giver = first if answer == "1" else second
        rows.append(
            {
                "sentence": f"{giver} gave the {thing} away, so _ had no {thing} left.",
                "option1": first,
                "option2": second,
                "answer": answer,
            }
        )
    return rows


def stock_leaves(families: dict[str, list[str]] | None = None) -> dict[str, tuple[str, Path]]:
    """Each stock leaf task of ``families`` (default: both leaderboards): name -> (family, its YAML)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    root = stock_tasks_dir()
    leaves = {}
    for family, patterns in (families or FAMILIES).items():
        for pattern in patterns:
            for path in sorted(root.glob(pattern)):
                config = load_yaml(path, resolve_func=False, recursive=True)
                if "task" in config and "group" not in config:
                    leaves[config["task"]] = (family, path)
    return leaves


def leaf_data(family: str, config: dict, rows: int, seed: int) -> dict[str, list[dict]]:
    """The splits (name -> rows) a leaf of ``family`` reads, in its dataset's schema; ``config``: its stock YAML."""
    few = max(rows, 5)
    match family:
        case "mmlu_pro":
            return {"test": mmlu_pro_rows(rows, seed), "validation": mmlu_pro_rows(few, seed + 1)}
        case "bbh":
            return {"test": bbh_rows(rows, seed, [str(choice) for choice in config["doc_to_choice"]])}
        case "gpqa":
            return {"train": gpqa_rows(rows, seed)}
        case "math":
            return {"train": math_rows(rows, seed + 1, config["dataset_name"]), "test": math_rows(rows + 1, seed, config["dataset_name"])}  # fmt: skip
        case "ifeval":
            return {"train": ifeval_rows(rows, seed)}
        case "musr":
            return {config["test_split"]: musr_rows(rows, seed)}
        case "arc":
            return {
                "train": arc_rows(few, seed + 1),
                "validation": arc_rows(rows, seed + 2),
                "test": arc_rows(rows, seed),
            }
        case "hellaswag":
            return {"train": hellaswag_rows(few, seed + 1), "validation": hellaswag_rows(rows, seed)}
        case "mmlu":
            subject = config["dataset_name"]
            return {"test": mmlu_rows(rows, seed, subject), "dev": mmlu_rows(few, seed + 1, subject)}
        case "truthfulqa":
            return {"validation": truthfulqa_rows(rows, seed)}
        case "winogrande":
            return {"train": winogrande_rows(few, seed + 1), "validation": winogrande_rows(rows, seed)}
        case "gsm8k":
            return {"train": gsm8k_rows(few, seed + 1), "test": gsm8k_rows(rows, seed)}
    raise ValueError(f"no rows for the family {family!r}")


#: A leaf's local YAML: the stock one, with the data read from local JSONL files.
LEAF = """# lm-eval's stock {task} ({stock}), its data pointed at local files in its dataset's schema
include: {stock}
task: {task}
dataset_path: json
dataset_name: null
dataset_kwargs:
  data_files:
{files}"""


def leaderboard_tasks(directory: Path, rows: int = 4, families: dict[str, list[str]] | None = None) -> Path:
    """Write ``rows`` rows a leaf (and its few-shot splits) and a shadowing YAML for each leaf of ``families``
    (default: every task of both leaderboards) into ``directory``; returns it, the ``--include_path``."""
    from lm_eval.tasks._yaml_loader import load_yaml

    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True)
    for seed, (task, (family, stock)) in enumerate(stock_leaves(families).items()):
        config = load_yaml(stock, resolve_func=False, recursive=True)
        files = {}
        for split, split_rows in leaf_data(family, config, rows, seed=100 * seed).items():
            files[split] = write_jsonl(data / f"{task}_{split}.jsonl", split_rows)
        listed = "".join(f"    {split}: {json.dumps(str(path))}\n" for split, path in files.items())
        (directory / f"{task}.yaml").write_text(LEAF.format(task=task, stock=stock, files=listed))
    return directory
