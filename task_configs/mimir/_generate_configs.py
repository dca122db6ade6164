"""Write the pdd_mimir task YAMLs and group (run from this directory: python _generate_configs.py).

MIMIR's Hub loader is a script (``mimir.py``), which ``datasets`` >= 4 no longer runs; the tasks
fetch the two files the script would read (members: ``train/``, non-members: ``test/``) with
``huggingface_hub``. Split ``ngram_13_0.8``: the Min-K%++ paper's MIMIR setting.

Two groups: ``pdd_mimir`` (all seven domains) and ``pdd_mimir_sok``, the set the SoK of Meeus et al.
(2025) recommends: ``ngram_13_0.8`` without GitHub (see README.md for why).
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
#: Left out of the SoK group: its non-members are not drawn like its members (README.md).
NOT_IN_SOK = ("github",)
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
    sok = [f"pdd_mimir_{s}" for s in DOMAINS if s not in NOT_IN_SOK]
    group = {"group": "pdd_mimir_sok", "task": sok, "metadata": {"version": 1.0}}
    (HERE / "_pdd_mimir_sok.yaml").write_text(yaml.safe_dump(group, sort_keys=False))


if __name__ == "__main__":
    main()
