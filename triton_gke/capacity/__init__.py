"""Capacity records: the requests/s one GPU sustains at an SLO, measured by `make bench` or published.

`capacity.records` reads, finds and writes them (standard library only); `triton-gke capacity compare` reports
regressions between two sets of records.
"""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `capacity` (the checkout's link), this is triton_gke.capacity itself
