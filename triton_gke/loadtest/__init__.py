"""Load tests: the Locust file deployed with Locust and run locally by the tests."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `loadtest` (the checkout's link), this is triton_gke.loadtest itself
