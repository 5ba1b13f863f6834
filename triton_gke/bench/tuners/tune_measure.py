"""bench tune's measurements: each candidate's twin folder, its server, and the open-loop rate search of it
(Measurer), on the CPU twin or loaded into a running server (--url). Split from tune.py."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_gke.bench import command
from triton_gke.bench.plans.slo_search import spread
from triton_gke.bench.runners import runner
from triton_gke.bench.runners.remote import Remote, RemoteError, current, edited
from triton_gke.bench.tuners.tune_candidates import INTRA_PARAMETER, Candidate, accepted, candidate_grid
from triton_gke.bench.tuners.tune_options import load_plan

if TYPE_CHECKING:
    from triton_gke.model_repo.settings import VariantSettings
    from triton_gke.settings.values import StackSettings


def twin_folder(base: Path, candidate: Candidate, root: Path) -> Path:
    """A copy of the built twin folder `base` under root/ with the candidate's config.pbtxt (ONNX hard-linked)."""
    from triton_gke.model_repo.cpu_twin import edited_copy

    def apply(config: Any) -> None:
        config.max_batch_size = candidate.max_batch_size
        del config.dynamic_batching.preferred_batch_size[:]
        config.dynamic_batching.preferred_batch_size.append(candidate.preferred_batch_size)
        config.dynamic_batching.max_queue_delay_microseconds = candidate.max_queue_delay_us
        config.instance_group[0].count = candidate.instance_count
        if candidate.intra_op_threads is not None:
            config.parameters[INTRA_PARAMETER].string_value = str(candidate.intra_op_threads)

    return edited_copy(base, root / base.name, apply, f"bench tune candidate: {candidate.label()}")


class TuneProgress(runner.Progress):
    """The bench's progress line, naming the candidate being measured."""

    label: str = ""

    def step(self, where: str, record: dict, verdict: str) -> None:
        super().step(f"[{self.label}] {where}", record, verdict)


@dataclass
class Measurer:
    """measure(candidate, effort) for the search: `effort` rate searches on a fresh server for the candidate,
    each the achieved capacity at the SLO (0 where no rate met it). Later searches start near what the candidate's
    earlier ones found (0.7 x their median), so they spend their steps where the answer is."""

    args: argparse.Namespace
    settings: StackSettings
    variant: VariantSettings
    base: Path  # the built twin folder of the variant
    workdir: Path
    progress: TuneProgress
    log: runner.Log
    runs: dict[Candidate, list[runner.VariantRun]] = dataclasses.field(default_factory=dict)
    copy: VariantSettings | None = None  # the variant's payload copy (runner.payload_copies), for other_payload
    remote: Remote | None = None  # --url: a running server, each candidate loaded through its model-control API

    def __call__(self, candidate: Candidate, effort: int) -> list[float]:
        from triton_gke.sandbox.triton import TritonStartError

        found = [runner.capacity(r) for run in self.runs.get(candidate, []) for r in run.results]
        earlier = spread(found)
        try:
            plan = load_plan(self.args, self.settings, 0.7 * earlier.median if earlier else None)
        except runner.BenchError:  # a lower start the step limits cannot serve: start where the first search did
            plan = load_plan(self.args, self.settings)
        config = runner.BenchConfig(
            stack=self.args.stack, target="sandbox", plan=plan, repeats=effort,
            protocol=candidate.protocol, variants=(self.variant.name,), uint8=(), perf_analyzer=False,
            build_dir=self.args.build_dir,
        )  # fmt: skip
        repo = self.workdir / "candidate"  # one server at a time: the folder is removed after each measurement
        self.progress.label = candidate.label()
        self.log(f"{candidate.label()}: {effort} rate search(es)")
        model, serve = candidate_server(candidate, self.variant, self.base, repo, self.copy, self.remote)
        try:
            run = runner.bench_variant(model, config, serve, self.workdir, self.log, self.progress)
        except (runner.BenchError, TritonStartError, RemoteError) as err:
            self.progress.finished += effort
            self.log(f"  not measured: {str(err).splitlines()[0]}")
            return []
        finally:
            shutil.rmtree(repo, ignore_errors=True)
        self.runs.setdefault(candidate, []).append(run)
        return [runner.capacity(r) or 0.0 for r in run.results]

    def merged(self, candidate: Candidate) -> runner.VariantRun | None:
        runs = self.runs.get(candidate)
        if not runs:
            return None
        return runner.VariantRun(
            runs[0].model,
            [c for r in runs for c in r.records],
            [x for r in runs for x in r.results],
            [row for r in runs for row in r.rows],
            runs[-1].opinion,
            runs[0].ready_s,
        )


def candidate_server(
    candidate: Candidate,
    variant: VariantSettings,
    base: Path,
    repo: Path,
    copy: VariantSettings | None = None,
    remote: Remote | None = None,
) -> tuple[runner.Model, runner.Serve]:
    """The model a candidate is measured on and how its server starts: on the CPU twin, a copy of the built twin
    folder `base` (or of the variant's payload copy beside it, for other_payload) under `repo` with the candidate's
    config.pbtxt, served by a fresh tritonserver; with a running server (remote), the candidate's configuration
    loaded into it through its model-control API."""
    if remote is not None:
        edits = remote_edit(remote.original, candidate)
        return runner.read_model(candidate.apply(variant), None), lambda name: remote.serve(edits, candidate.label())
    served = variant
    if candidate.other_payload:
        served = copy or runner.payload_copies([variant], [variant.name])[0]
        base = base.parent / served.name
    model = runner.read_model(candidate.apply(served), twin_folder(base, candidate, repo))
    return model, lambda name: runner.sandbox_server(repo, name)


def remote_edit(config: dict[str, Any], candidate: Candidate) -> dict[str, Any]:
    """The running server's model configuration with the candidate's values (bench/runners/remote.py)."""
    c = candidate
    return edited(config, c.max_queue_delay_us, c.preferred_batch_size, c.max_batch_size, c.instance_count,
                  c.intra_op_threads, INTRA_PARAMETER)  # fmt: skip


def remote_grid(remote: Remote, slo_ms: float, seed: int, stack: str) -> tuple[Candidate, list[Candidate]]:
    """The running server's own configuration as the default, and the candidates it can serve: not the other payload
    (its model copy is not in that server's repository), gRPC only with --grpc-url."""
    default = Candidate(*current(remote.original, INTRA_PARAMETER))
    space = candidate_grid(default, slo_ms, seed)
    grid = [c for c in space if not c.other_payload and (c.protocol == "http" or remote.grpc)]
    return default, accepted(grid, stack, command.log)
