"""Facts about the machine a benchmark ran on, stated next to every result."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from triton_gke.bench.metrics.probes import cpu_count
from triton_gke.contracts.paths import IMPORT_ROOT

PROJECT_DIR = IMPORT_ROOT  # the checkout, when it is one: git names its commit


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> tuple[float, float, float] | None:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())  # type: ignore[return-value]
    except OSError:
        return None


def memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None
    return round(pages * size / 2**30, 1)


def git_commit() -> str:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=PROJECT_DIR, capture_output=True, text=True).stdout
    return (result.stdout.strip() or "unknown") + (" (uncommitted changes)" if dirty.strip() else "")


def gpu_names() -> list[str]:
    """GPUs nvidia-smi reports; empty without a GPU (or without nvidia-smi)."""
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in result.stdout.splitlines() if line.strip()] if result.returncode == 0 else []


def facts() -> dict[str, object]:
    import onnxruntime  # the 'local' extra: imported when used, so --help needs no extra

    return {
        "cores": cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gib": memory_gib(),
        "gpus": gpu_names(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "kernel": platform.release(),
        "commit": git_commit(),
    }
