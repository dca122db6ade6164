"""Standard lm-eval tasks offline: the stock ``arc_easy`` and ``gsm8k`` configs pointed at local files.

Offline, a stock task's Hub dataset cannot load. ``tests/fixtures/standard_tasks/*.yaml`` include the
installed stock YAML (so prompt, target, choices, metrics, filters and few-shot settings are lm-eval's
own) and override only where the data comes from: ``dataset_path: json`` with ``data_files``.
:func:`standard_tasks` writes JSONL files in each benchmark's shape and a copy of the YAMLs with
the two paths filled in; pass its directory as ``--include_path`` (or ``source_include_path``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from .harness import REPO


FIXTURES = REPO / "tests" / "fixtures" / "standard_tasks"
NAMES = ("Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "June", "Kai", "Lena")
THINGS = ("apples", "marbles", "stamps", "books", "shells", "coins", "pencils", "cards")


def arc_rows(n: int, seed: int) -> list[dict]:
    """``n`` questions in ARC's shape: ``question``, ``choices: {text, label}``, ``answerKey``."""
    rng = random.Random(seed)
    rows = []
    for index in range(n):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        thing = rng.choice(THINGS)
        options = [a + b, a + b + rng.randint(1, 9), abs(a - b) + 1, a * 2]
        options = list(dict.fromkeys(options))[:3]
        rng.shuffle(options)
        labels = ["A", "B", "C"][: len(options)]
        rows.append(
            {
                "id": f"local-{seed}-{index}",
                "question": f"A box holds {a} {thing} and another box holds {b} {thing}. How many {thing} are in both boxes together?",
                "choices": {"text": [str(option) for option in options], "label": labels},
                "answerKey": labels[options.index(a + b)],
            }
        )
    return rows


def gsm8k_rows(n: int, seed: int) -> list[dict]:
    """``n`` word problems in GSM8K's shape: ``question``, ``answer`` ending ``#### <number>``."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        name, thing = rng.choice(NAMES), rng.choice(THINGS)
        a, b, c = rng.randint(3, 40), rng.randint(2, 30), rng.randint(1, 9)
        total = a + b - c
        rows.append(
            {
                "question": f"{name} has {a} {thing}, gets {b} more from a friend and then gives {c} away. "
                f"How many {thing} does {name} have now?",
                "answer": f"{name} first has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} {thing}.\n"
                f"After giving {c} away, {name} has {a + b} - {c} = <<{a + b}-{c}={total}>>{total} {thing}.\n#### {total}",
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def stock_tasks_dir() -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).parent


def standard_tasks(directory: Path, test_size: int = 24) -> Path:
    """Write ARC- and GSM8K-shaped data (``test_size`` test examples each) and the fixture YAMLs,
    filled in, into ``directory``; returns it (the include path of ``arc_easy_local``, ``gsm8k_local``)."""
    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True)
    write_jsonl(data / "arc_easy_train.jsonl", arc_rows(8, seed=1))
    write_jsonl(data / "arc_easy_validation.jsonl", arc_rows(4, seed=2))
    write_jsonl(data / "arc_easy_test.jsonl", arc_rows(test_size, seed=3))
    write_jsonl(data / "gsm8k_train.jsonl", gsm8k_rows(8, seed=4))
    write_jsonl(data / "gsm8k_test.jsonl", gsm8k_rows(test_size, seed=5))
    for yaml in FIXTURES.glob("*.yaml"):
        text = yaml.read_text().replace("STOCK_TASKS/", f"{stock_tasks_dir()}/").replace("DATA/", f"{data}/")
        (directory / yaml.name).write_text(text)
    return directory


#: A stock lm-eval multiple-choice task on a local JSONL file (``{data}``), no pdd task in it.
STOCK_TASK = """
task: local_choice
dataset_path: json
dataset_kwargs:
  data_files: {data}
test_split: train
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""
