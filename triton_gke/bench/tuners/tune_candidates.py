"""bench tune's candidates: one serving configuration each, the grid searched, the stack's check of each,
and the stack file's keys a winner sets (`--write-stack`, the `pulumi config set` lines). Split from tune.py."""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
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


# The space searched (issue 46): every combination of these levels, stated here and taken from no earlier result.
# Batch levels (preferred, max): batching off, then three sizes doubling; instances 1 and 2; the batcher's delay as a
# share of the SLO (0: send at once; 1/50 and 1/10 of it: waiting that long for a fuller batch costs at most that
# share of the latency budget), so the levels follow a time-scaled twin's SLO. The client's side (issue 35: the
# protocol and the payload, which Model Analyzer cannot search) is two more factors where the tuner starts the server,
# with ONNX Runtime's intra-op threads on the CPU twin (None: the twin's own choice, cores / instances; or 1).
BATCH_LEVELS = ((1, 1), (4, 8), (8, 16), (16, 32))
INSTANCE_LEVELS = (1, 2)
DELAY_SLO_SHARES = (0.0, 1 / 50, 1 / 10)
INTRA_LEVELS = (None, 1)


def candidate_space(default: Candidate, slo_ms: float, client_side: bool = True) -> list[Candidate]:
    """client_side: the tuner starts the server (the CPU twin), so the client's side and the threads are factors
    too. The full factorial of the levels above (a delay only where batching is on: with max batch 1 it changes
    nothing), the default first whether or not it is a point of the grid; no order but that (shuffled() draws one).
    Candidates the stack refuses are dropped later (accepted)."""
    delays = sorted({round(share * slo_ms * 1000) for share in DELAY_SLO_SHARES})
    clients = [("http", False), ("grpc", False), ("http", True)] if client_side else [("http", False)]
    threads = INTRA_LEVELS if client_side else (None,)
    space = [default]
    for (preferred, largest), instances, intra, (protocol, other) in itertools.product(
        BATCH_LEVELS, INSTANCE_LEVELS, threads, clients
    ):
        for delay in delays if largest > 1 else [0]:
            candidate = Candidate(delay, preferred, largest, instances, intra, protocol, other)
            if candidate not in space:
                space.append(candidate)
    return space


def shuffled(space: Sequence[Candidate], seed: int) -> list[Candidate]:
    """The default (space[0]) first, then the rest in a random order drawn from `seed` (the run's, recorded in its
    tune.json): a budget that measures only the first N measures a uniform random sample of the space (random search,
    J. Bergstra and Y. Bengio, "Random Search for Hyper-Parameter Optimization", JMLR 13 (2012),
    https://jmlr.org/papers/v13/bergstra12a.html), never a hand-picked head."""
    rest = list(space[1:])
    random.Random(seed).shuffle(rest)
    return [space[0], *rest]


def candidate_grid(default: Candidate, slo_ms: float, seed: int, client_side: bool = True) -> list[Candidate]:
    """The space in the run's random order (candidate_space, shuffled)."""
    return shuffled(candidate_space(default, slo_ms, client_side), seed)


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
