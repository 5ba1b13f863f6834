"""The measure-and-tune benchmark: `python -m triton_gke.bench` (see bench/__main__.py and bench/runner.py)."""
