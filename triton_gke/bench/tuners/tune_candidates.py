"""bench tune's candidates: one serving configuration each, the grid searched, the stack's check of each,
and the stack file's keys a winner sets (`--write-stack`, the `pulumi config set` lines). Split from tune.py."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triton_gke.bench.runners import runner

if TYPE_CHECKING:
    from triton_gke.model_repo.settings import VariantSettings


# The stack keys of a candidate (Pulumi.yaml): every variant but trt_int8_bs16_count4 reads the batch and instance
# keys, every variant the queue delay (settings/serving.py).
STACK_KEYS = ("modelMaxQueueDelayUs", "modelPreferredBatchSize", "modelMaxBatchSize", "modelInstanceCount")
# ONNX Runtime's thread options under the names Triton's onnxruntime backend reads from a model's parameters
# ("Model Config Options": intra_op_thread_count, inter_op_thread_count; 0 = ONNX Runtime's default,
# https://github.com/triton-inference-server/onnxruntime_backend#model-config-options). The CPU twin's model.py reads
# the same names (model_repo/twin_model.py). Only the intra-op count is searched: the inter-op count "is ignored" under
# sequential execution (same README), the twin's and the backend's default mode.
INTRA_PARAMETER = "intra_op_thread_count"


@dataclass(frozen=True)
class Candidate:
    """A serving configuration: the four stack keys, ONNX Runtime's intra-op threads on the twin (None: the twin's
    own choice, cores / instances), and what Model Analyzer cannot search, the client's side (issue 35): the protocol
    requests travel over (http or grpc) and the payload (other_payload: the variant's other input type, UINT8 for an
    FP32 variant, the bench's payload copy, runner.payload_copies: 150,528 instead of 602,112 bytes per image)."""

    max_queue_delay_us: int
    preferred_batch_size: int
    max_batch_size: int
    instance_count: int
    intra_op_threads: int | None = None
    protocol: str = "http"
    other_payload: bool = False

    @classmethod
    def of(cls, variant: VariantSettings) -> Candidate:
        return cls(variant.max_queue_delay_us, variant.preferred_batch_size, variant.max_batch_size,
                   variant.instance_count)  # fmt: skip

    def stack_values(self) -> dict[str, int]:
        values = (self.max_queue_delay_us, self.preferred_batch_size, self.max_batch_size, self.instance_count)
        return dict(zip(STACK_KEYS, values, strict=True))

    def label(self) -> str:
        threads = "auto" if self.intra_op_threads is None else str(self.intra_op_threads)
        client = (", over gRPC" if self.protocol == "grpc" else "") + (", other payload" if self.other_payload else "")
        return (
            f"delay {self.max_queue_delay_us} us, batch {self.preferred_batch_size}/{self.max_batch_size}, "
            f"{self.instance_count} instance(s), {threads} intra-op threads{client}"
        )

    def client_lines(self, variant: VariantSettings) -> list[str]:
        """The client-side choices of the candidate, which no `pulumi config set` line makes."""
        lines = ["clients: send over gRPC (Triton's port 8001) instead of HTTP"] if self.protocol == "grpc" else []
        if self.other_payload:
            other = "FP32" if variant.uint8_input else "UINT8"
            lines.append(
                f"clients: send {other} images; the stack serves that input for the variants listed in modelUint8Input"
            )
        return lines

    def apply(self, variant: VariantSettings) -> VariantSettings:
        return dataclasses.replace(
            variant,
            max_queue_delay_us=self.max_queue_delay_us,
            preferred_batch_size=self.preferred_batch_size,
            max_batch_size=self.max_batch_size,
            instance_count=self.instance_count,
        )


def candidate_grid(default: Candidate, cores: int) -> list[Candidate]:
    """The default first, then the changes most likely to pay on a CPU twin near its SLO, each knob early (a short
    budget measures only the first few: on a slow host 20 minutes pay for two): no batching at all, a shorter
    batcher delay (it is pure waiting below saturation), smaller batches (compute grows with the batch on CPU), two
    instances (one thread each), the intra-op threads; then more delays and combinations. Duplicates of the default
    are dropped."""
    d = default
    grid = [
        d,
        # No batching: Model Analyzer's pick, which beat every other in results/bench/tuners-dev-2026-12-02 (a batch
        # of 4 costs about 4 single images on 2 CPU cores, so near the SLO waiting for one only adds latency).
        dataclasses.replace(d, max_queue_delay_us=0, preferred_batch_size=1, max_batch_size=1),
        dataclasses.replace(d, max_queue_delay_us=5000),
        # What Model Analyzer cannot search (issue 35): the client's protocol and payload, on no batching.
        dataclasses.replace(d, max_queue_delay_us=0, preferred_batch_size=1, max_batch_size=1, protocol="grpc"),
        dataclasses.replace(d, max_queue_delay_us=0, preferred_batch_size=1, max_batch_size=1, other_payload=True),
        # Model Analyzer's instance sweep on its pick: two instances of one thread each.
        dataclasses.replace(
            d, max_queue_delay_us=0, preferred_batch_size=1, max_batch_size=1, instance_count=2, intra_op_threads=1
        ),
        dataclasses.replace(d, max_queue_delay_us=2000, preferred_batch_size=4, max_batch_size=8),
        dataclasses.replace(d, max_queue_delay_us=5000, instance_count=2, intra_op_threads=max(1, cores // 2)),
        dataclasses.replace(d, max_queue_delay_us=0),
        dataclasses.replace(d, max_queue_delay_us=5000, intra_op_threads=1),
        dataclasses.replace(d, max_queue_delay_us=10000),
        dataclasses.replace(d, max_queue_delay_us=1000, preferred_batch_size=2, max_batch_size=4),
        dataclasses.replace(d, max_queue_delay_us=10000, preferred_batch_size=8, max_batch_size=16),
        dataclasses.replace(d, max_queue_delay_us=2000, instance_count=2, preferred_batch_size=4, max_batch_size=8),
    ]
    unique: list[Candidate] = []
    for candidate in grid:
        if candidate not in unique:
            unique.append(candidate)
    return unique


def overrides(candidate: Candidate, project: str) -> dict[str, str]:
    """The candidate's keys as the engine passes config: 'project:key' -> text."""
    return {f"{project}:{key}": str(value) for key, value in candidate.stack_values().items()}


def accepted(candidates: Sequence[Candidate], stack: str, log: runner.Log) -> list[Candidate]:
    """The candidates the stack accepts with their keys set (settings.from_stack_file: the SLO knobs' order
    modelMaxQueueDelayUs < autoscaleQueueTimeMs < sloQueueTimeMs < sloLatencyMs, preferred <= max batch, the GPU
    memory bound); each refused one is logged with the stack's own reason."""
    kept = []
    for candidate in candidates:
        refusal = stack_refusal(candidate, stack)
        if refusal:
            log(f"  skipped {candidate.label()}: the stack refuses it: {refusal}")
            continue
        kept.append(candidate)
    return kept


def stack_refusal(candidate: Candidate, stack: str) -> str | None:
    """The stack's one-line refusal of the candidate's keys, or None when it accepts them."""
    from triton_gke.settings import ConfigError, from_stack_file
    from triton_gke.settings.schema import config_schema

    try:
        from_stack_file(stack, overrides(candidate, config_schema()[0]))
    except ConfigError as err:
        return str(err)
    return None


def set_stack_keys(text: str, project: str, values: dict[str, int]) -> str:
    """The stack file's text with `project:key: value` set for each key: an existing line keeps its indentation and
    trailing comment, a missing key is added at the end of the config block, with its indentation. Every other line
    (comments included) stays as it was."""
    lines = text.splitlines(keepends=True)
    for key, value in values.items():
        pattern = re.compile(rf"^(\s+{re.escape(project)}:{re.escape(key)}:[ \t]*)([^#\n]*?)([ \t]+#.*)?(\r?\n)?$")
        for i, line in enumerate(lines):
            match = pattern.match(line)
            if match:
                lines[i] = f"{match[1]}{value}{match[3] or ''}{match[4] or ''}"
                break
        else:
            lines = _add_key(lines, f"{project}:{key}: {value}")
    return "".join(lines)


def _add_key(lines: list[str], entry: str) -> list[str]:
    start = next((i for i, line in enumerate(lines) if re.match(r"^config:\s*(#.*)?$", line)), None)
    if start is None:
        tail = "" if not lines or lines[-1].endswith("\n") else "\n"
        return [*lines, f"{tail}config:\n", f"  {entry}\n"]
    last, indent = start, "  "
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and not line[0].isspace():
            break  # the next top-level key
        if line.strip() and not line.lstrip().startswith("#"):
            if last == start:
                indent = line[: len(line) - len(line.lstrip())]
            last = i
    if not lines[last].endswith("\n"):
        lines[last] += "\n"
    return [*lines[: last + 1], f"{indent}{entry}\n", *lines[last + 1 :]]


def write_stack(stack: str, candidate: Candidate, current: Candidate) -> Path:
    """Set the keys the candidate changes (those `pulumi_lines` prints) in Pulumi.<stack>.yaml, after the settings
    layer accepted the edited file. A linked stack file is edited where it lies; the file keeps its mode."""
    from triton_gke.contracts.paths import project_dir
    from triton_gke.settings import from_stack_file
    from triton_gke.settings.schema import config_schema
    from triton_gke.settings.stack_file import stack_file_text

    path = Path(os.path.realpath(project_dir() / f"Pulumi.{stack}.yaml"))
    edited = set_stack_keys(stack_file_text(path), config_schema()[0], changed_values(candidate, current))
    handle, temporary = tempfile.mkstemp(prefix=f".Pulumi.{stack}.", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(edited)
        os.chmod(temporary, path.stat().st_mode & 0o7777)
        from_stack_file(stack, config_file=Path(temporary))  # the edited file, read as the stack would read it
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


def changed_values(candidate: Candidate, current: Candidate) -> dict[str, int]:
    return {k: v for k, v in candidate.stack_values().items() if current.stack_values()[k] != v}


def pulumi_lines(candidate: Candidate, current: Candidate, project: str, stack: str) -> list[str]:
    changed = changed_values(candidate, current)
    return [f"pulumi config set {project}:{key} {value} -s {shlex.quote(stack)}" for key, value in changed.items()]
