"""The checkout the tests run in: the folder holding tests/, triton_gke/ and the stack files.

Standard library only, so that tests/conftest.py can put it on sys.path before anything else of the project loads,
and so that modules run on their own (`python -m tests.support.structure`, the fake gcloud) can use it too.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]
