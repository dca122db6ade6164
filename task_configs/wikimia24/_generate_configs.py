"""Write the pdd_wikimia24 task YAMLs and group (run from this directory: python _generate_configs.py)."""

from pathlib import Path

import yaml


LENGTHS = (32, 64, 128, 256)
HERE = Path(__file__).parent


def main() -> None:
    for n in LENGTHS:
        config = {
            "include": "_default_template_yaml",
            "task": f"pdd_wikimia24_{n}",
            "test_split": f"WikiMIA_length{n}",
            "metadata": {
                "version": 1.0,
                "dataset_label": f"WikiMIA-24 (length {n})",
                "data_source": "hub",
                "text_field": "input",
                "label_field": "label",
            },
        }
        (HERE / f"pdd_wikimia24_{n}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    group = {"group": "pdd_wikimia24", "task": [f"pdd_wikimia24_{n}" for n in LENGTHS], "metadata": {"version": 1.0}}
    (HERE / "_pdd_wikimia24.yaml").write_text(yaml.safe_dump(group, sort_keys=False))


if __name__ == "__main__":
    main()
