"""Write the pdd_mimir task YAMLs and group (run from this directory: python _generate_configs.py).

MIMIR's Hub loader is a script (``mimir.py``), which ``datasets`` >= 4 no longer runs; the tasks
fetch the two files the script would read (members: ``train/``, non-members: ``test/``) with
``huggingface_hub``. Split ``ngram_13_0.8``: the Min-K%++ paper's MIMIR setting.
"""

from pathlib import Path

import yaml


SPLIT = "ngram_13_0.8"
FOLDER = "cache_100_200_1000_512"
DOMAINS = {  # task suffix: MIMIR config name
    "arxiv": "arxiv",
    "dm_mathematics": "dm_mathematics",
    "github": "github",
    "hackernews": "hackernews",
    "pile_cc": "pile_cc",
    "pubmed_central": "pubmed_central",
    "wikipedia": "wikipedia_(en)",
}
HERE = Path(__file__).parent


def main() -> None:
    for suffix, name in DOMAINS.items():
        config = {
            "include": "_default_template_yaml",
            "task": f"pdd_mimir_{suffix}",
            "dataset_name": name,
            "metadata": {
                "version": 1.0,
                "dataset_label": f"MIMIR {name} ({SPLIT})",
                "data_source": "hub",
                "hub_note": "iamgroot42/mimir is gated: accept its conditions on https://huggingface.co/datasets/iamgroot42/mimir and log in (`hf auth login`) first.",
                "schema": "member_nonmember",
                "hub_files": {
                    "member": f"{FOLDER}/train/{name}_{SPLIT}.jsonl",
                    "nonmember": f"{FOLDER}/test/{name}_{SPLIT}.jsonl",
                },
            },
        }
        (HERE / f"pdd_mimir_{suffix}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    group = {"group": "pdd_mimir", "task": [f"pdd_mimir_{s}" for s in DOMAINS], "metadata": {"version": 1.0}}
    (HERE / "_pdd_mimir.yaml").write_text(yaml.safe_dump(group, sort_keys=False))


if __name__ == "__main__":
    main()
