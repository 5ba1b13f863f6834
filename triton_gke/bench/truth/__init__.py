"""Ground truth for the tuners: what a configuration's capacity is, computed without Triton (batcher_sim).

No tuner imports this package (the import contract tuners-blind in .importlinter): a tuner that could read the
answer would prove nothing.
"""
