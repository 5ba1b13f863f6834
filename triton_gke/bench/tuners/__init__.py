"""Searches over serving configurations: bench tune, Model Analyzer, the loop check, the tuners side by side."""
