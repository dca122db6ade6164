"""The harness task classes of the pdd tasks and their dataset-level aggregations."""
