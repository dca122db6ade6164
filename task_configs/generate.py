"""Writes the task YAMLs of the families made from a list: WikiMIA-24 and WikiMIA paraphrased (one
task per text length) and MIMIR (one task per domain), each with its group file.

    python task_configs/generate.py            # rewrite the YAMLs
    python task_configs/generate.py --check    # list the YAMLs that differ from what it would write

``tests/test_tasks.py`` runs the check, so a YAML edited by hand without this file fails the tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml


HERE = Path(__file__).parent

#: MIMIR: the Min-K%++ paper's split, and the folder of the Hub repository holding its files. The
#: Hub loader of MIMIR is a script (``mimir.py``), which ``datasets`` >= 4 no longer runs; the tasks
#: fetch the two files the script would read (members: ``train/``, non-members: ``test/``).
MIMIR_SPLIT = "ngram_13_0.8"
MIMIR_FOLDER = "cache_100_200_1000_512"
MIMIR_DOMAINS = {  # task suffix: MIMIR config name
    "arxiv": "arxiv",
    "dm_mathematics": "dm_mathematics",
    "github": "github",
    "hackernews": "hackernews",
    "pile_cc": "pile_cc",
    "pubmed_central": "pubmed_central",
    "wikipedia": "wikipedia_(en)",
}
MIMIR_HUB_NOTE = (
    "iamgroot42/mimir is gated: accept its conditions on https://huggingface.co/datasets/iamgroot42/mimir "
    "and log in (`hf auth login`) first."
)


def wikimia_lengths(prefix: str, split: str, label: str, lengths: tuple[int, ...]) -> dict[str, dict]:
    """One task per text length, on the Hub split ``split.format(n=...)``."""
    return {
        f"{prefix}_{n}": {
            "include": "_default_template_yaml",
            "task": f"{prefix}_{n}",
            "test_split": split.format(n=n),
            "metadata": {
                "version": 1.0,
                "dataset_label": label.format(n=n),
                "data_source": "hub",
                "text_field": "input",
                "label_field": "label",
            },
        }
        for n in lengths
    }


def mimir_domains() -> dict[str, dict]:
    """One task per MIMIR domain, split :data:`MIMIR_SPLIT`."""
    return {
        f"pdd_mimir_{suffix}": {
            "include": "_default_template_yaml",
            "task": f"pdd_mimir_{suffix}",
            "dataset_name": name,
            "metadata": {
                "version": 1.0,
                "dataset_label": f"MIMIR {name} ({MIMIR_SPLIT})",
                "data_source": "hub",
                "hub_note": MIMIR_HUB_NOTE,
                "schema": "member_nonmember",
                "hub_files": {
                    "member": f"{MIMIR_FOLDER}/train/{name}_{MIMIR_SPLIT}.jsonl",
                    "nonmember": f"{MIMIR_FOLDER}/test/{name}_{MIMIR_SPLIT}.jsonl",
                },
            },
        }
        for suffix, name in MIMIR_DOMAINS.items()
    }


#: folder: (group name, its tasks). No group aggregates its tasks: a mean of AUCs is not an AUC.
FAMILIES = {
    "wikimia24": (
        "pdd_wikimia24",
        wikimia_lengths("pdd_wikimia24", "WikiMIA_length{n}", "WikiMIA-24 (length {n})", (32, 64, 128, 256)),
    ),
    "wikimia_paraphrased": (
        "pdd_wikimia_paraphrased",
        # the paraphrased splits published by the Min-K%++ authors
        wikimia_lengths(
            "pdd_wikimia_paraphrased",
            "WikiMIA_length{n}_paraphrased",
            "WikiMIA paraphrased (length {n})",
            (32, 64, 128),
        ),
    ),
    "mimir": ("pdd_mimir", mimir_domains()),
}


def family_files(folder: str) -> dict[Path, str]:
    """The YAML files of one family: each task's, and the group's (``_<group>.yaml``)."""
    group, tasks = FAMILIES[folder]
    files = {HERE / folder / f"{name}.yaml": config for name, config in tasks.items()}
    files[HERE / folder / f"_{group}.yaml"] = {"group": group, "task": list(tasks), "metadata": {"version": 1.0}}
    return {path: yaml.safe_dump(config, sort_keys=False) for path, config in files.items()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    differing = []
    for folder in FAMILIES:
        for path, text in family_files(folder).items():
            if check:
                if not path.is_file() or path.read_text() != text:
                    differing.append(path)
            else:
                path.write_text(text)
    for path in differing:
        print(f"{path.relative_to(HERE)} differs from what task_configs/generate.py writes")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
