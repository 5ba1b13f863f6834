"""The names the toolkit reserves in a model repository and under a bucket prefix: their one home (issue 44).

A source model named like one of them, or holding a file where the sync writes its own, is refused in one line
(model_repo/sync_source.py), before anything is sent; a variant name can never be one (contracts/naming.py
MODEL_NAME_RE starts with a letter or digit; tests/unit/model_repo/test_reserved_names.py checks every name here).
"""

from __future__ import annotations

# PREFIX/.triton-gke-sync.json: the sync's record of what it owns under the prefix (model_repo/sync.py). A model of
# this name would put its files under the record's own name.
RECORD_NAME = ".triton-gke-sync.json"
# The build manifest at the repository root (model_repo/manifest.py): marks the folders the builder owns.
MANIFEST = ".model_repo.json"
# <model>/configs/NAME.pbtxt: the configs of held versions the sync writes (--hold); a tritonserver started with
# --model-config-name=NAME reads that file where it exists, else config.pbtxt (triton-inference-server/core
# src/model_repository_manager.cc GetModelConfigFullPath; src/constants.h kModelConfigFolder[] = "configs"). A source
# file there would be replaced or deleted by a hold.
HOLDS_FOLDER = "configs"
# Bytecode the Python backend leaves beside model.py when Triton serves a folder: never synced, never digested.
IGNORED_DIRS = frozenset({"__pycache__"})
# Finder litter is nobody's.
IGNORED_FILES = frozenset({".DS_Store"})

# Top-level names a model folder may not have, and why. Exact names only: a case variant (.TRITON-GKE-SYNC.JSON,
# CONFIGS/) is another object on GCS, harmless. Object names are "any sequence of valid Unicode characters" in a flat
# namespace, compared as given, with no case folding named (https://cloud.google.com/storage/docs/naming-objects), and
# Triton opens <model>/configs/ by that exact name (model_repository_manager.cc above).
RESERVED_MODEL_NAMES: dict[str, str] = {
    RECORD_NAME: "the sync's record of what it owns under the prefix",
    MANIFEST: "the build manifest",
    **{name: "a folder the sync and the build skip" for name in sorted(IGNORED_DIRS)},
    **{name: "a file the sync skips as Finder litter" for name in sorted(IGNORED_FILES)},
}
# Folders inside a model that only the sync writes, and why.
RESERVED_MODEL_FOLDERS: dict[str, str] = {
    HOLDS_FOLDER: "where the sync writes the configs of held versions (--hold)",
}


def model_name_problem(name: str) -> str | None:
    """Why a model may not be named `name` (one clause), or None."""
    why = RESERVED_MODEL_NAMES.get(name)
    return f"a model may not be named {name}: the name of {why}; rename the folder" if why else None


def model_file_problem(relative: str) -> str | None:
    """Why a model may not hold a file at `relative` (POSIX, below the model's folder), or None."""
    folder, slash, _ = relative.partition("/")
    why = RESERVED_MODEL_FOLDERS.get(folder)
    if why is None:
        return None
    if not slash:  # object MODEL/configs beside the held MODEL/configs/NAME.pbtxt: a file and a folder of one name
        return f"a model may not hold a file named {folder}: the name of the folder {why}; rename it"
    return f"a model may not hold files in {folder}/: {why}; move them elsewhere"
