from triton_gke.one_name import one_name

one_name(__name__)  # imported as `offline` (the checkout's link), this is triton_gke.offline itself
