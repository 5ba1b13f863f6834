"""Command-line helpers shared by every room's entry points (standard library only, the lowest floor)."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `cli` (the checkout's link), this is triton_gke.cli itself
