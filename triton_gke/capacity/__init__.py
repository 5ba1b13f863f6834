"""Capacity records: the requests/s one GPU sustains at an SLO, measured by `make bench` or published.

`capacity.records` reads, finds and writes them (standard library only); `triton-gke capacity compare` reports
regressions between two sets of records.
"""
