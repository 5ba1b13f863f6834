"""The measure-and-tune benchmark: `triton-gke bench` (see bench/__main__.py and bench/runners/runner.py)."""
