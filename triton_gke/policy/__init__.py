"""The CrossGuard policy pack (run by `pulumi up --policy-pack policy`); address_space.py is plain Python."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `policy` (the checkout's link), this is triton_gke.policy itself
