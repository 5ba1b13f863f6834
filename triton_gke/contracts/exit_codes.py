"""Every command's exit status, by meaning, in one place: a script tells bad input from a failed check by it.

2 for bad input is argparse's own status for a bad command line (https://docs.python.org/3/library/argparse.html#
exiting-methods, `error()` "exits with status code 2"); every other bad input (a setting, a file, a stack name) is
refused the same way. make exits 2 when any recipe fails, so a script that must tell 1 from 2 runs the command itself.
"""

from __future__ import annotations

EXIT_FAILED = 1  # the command ran and what it checks failed: a wrong answer, a regression, plans that differ
EXIT_BAD_INPUT = 2  # an option, a setting, a file or a name the command refuses, in one line
EXIT_BAD_MANIFEST = 3  # `triton-gke plan`: a planned Kubernetes manifest fails its schema (kubernetes-validate)
EXIT_DISRUPTIVE = 4  # `triton-gke plan --against`: the next `up` would replace or delete what serves a region
