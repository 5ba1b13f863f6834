"""The measure-and-tune benchmark: `python -m bench` (see bench/__main__.py and bench/runner.py)."""
