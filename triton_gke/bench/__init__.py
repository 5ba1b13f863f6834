"""The measure-and-tune benchmark: `triton-gke bench` (see bench/__main__.py and bench/runners/runner.py)."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `bench` (the checkout's link), this is triton_gke.bench itself
