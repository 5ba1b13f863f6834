"""Local stand-ins for the production pieces: a real tritonserver on 127.0.0.1."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `sandbox` (the checkout's link), this is triton_gke.sandbox itself
