"""triton-gke gpu-check (model_repo/gpu_check.py) without a GPU: what it reads of nvidia-smi and of trtexec's summary,
and that it builds each plan with exactly the commands the engine-build Job runs. Its refusals run the real command
(tests/live/model_repo/test_gpu_check.py); the build itself needs an NVIDIA GPU and TensorRT (docs/gpus.md)."""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.onnx_models import small_onnx
from triton_gke.k8s.engine_build import EngineBuildArgs, build_commands
from triton_gke.model_repo import gpu_check
from triton_gke.model_repo.build import build_repository
from triton_gke.model_repo.engines import PlanModel, plan_models
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.gpu_check import (
    Gpu,
    GpuCheckError,
    check_model,
    parse_gpu,
    parse_trtexec_summary,
    results_folder,
)
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, ModelRepoSettings

# trtexec's performance summary as printEpilog writes it (NVIDIA/TensorRT samples/common/sampleReporting.cpp: each
# line through the info logger, which prefixes the time and [I]); the percentiles of a TensorRT 10 trtexec.
SUMMARY = """[12/03/2026-10:00:00] [I] === Performance summary ===
[12/03/2026-10:00:00] [I] Throughput: 212.5 qps
[12/03/2026-10:00:00] [I] Latency: min = 4.5 ms, max = 6.25 ms, mean = 4.75 ms, median = 4.7 ms, percentile(90%) = 5 ms, percentile(95%) = 5.25 ms, percentile(99%) = 6 ms
[12/03/2026-10:00:00] [I] End-to-End Host Latency: min = 8 ms, max = 12 ms, mean = 9 ms, median = 9 ms, percentile(90%) = 10 ms, percentile(95%) = 11 ms, percentile(99%) = 12 ms
"""  # noqa: E501


def test_trtexecs_own_figures_are_read_not_the_end_to_end_line() -> None:
    figures = parse_trtexec_summary(SUMMARY)
    assert figures == {"throughput_qps": 212.5, "median_ms": 4.7, "percentiles_ms": {"90": 5.0, "95": 5.25, "99": 6.0}}
    with pytest.raises(ValueError, match="no performance summary"):
        parse_trtexec_summary("[I] Engine built in 12 sec.\n")


@given(st.floats(0.001, 1e6, allow_nan=False), st.floats(0.001, 1e4, allow_nan=False))
def test_any_figure_trtexec_prints_is_read_back(qps: float, ms: float) -> None:
    text = f"[I] Throughput: {qps} qps\n[I] Latency: min = {ms} ms, max = {ms} ms, mean = {ms} ms, median = {ms} ms, " \
           f"percentile(99%) = {ms} ms\n"  # fmt: skip
    assert parse_trtexec_summary(text) == {"throughput_qps": qps, "median_ms": ms, "percentiles_ms": {"99": ms}}


@given(
    st.text(st.characters(blacklist_characters=",\n\r", blacklist_categories=("Cs",)), min_size=1, max_size=30),
    st.integers(1, 99),
    st.integers(0, 9),
)
def test_nvidia_smis_line_names_the_gpu_and_its_compute_capability(name: str, major: int, minor: int) -> None:
    """A printable name is taken as nvidia-smi wrote it; one with a control character (a terminal's escape codes) is
    refused, shown escaped."""
    line = f"{name}, {major}.{minor}, 580.95.05"
    if name.strip() and name.strip().isprintable():
        assert parse_gpu(line) == Gpu(name.strip(), f"{major}.{minor}", "580.95.05")
        return
    with pytest.raises(GpuCheckError) as refused:
        parse_gpu(line)
    assert str(refused.value).isprintable()


@pytest.mark.parametrize("line", ["Tesla T4, 75, 580.95.05", "Tesla T4", "Tesla T4, 7.5", "[N/A], [N/A], [N/A]"])
def test_a_line_without_a_compute_capability_is_refused(line: str) -> None:
    with pytest.raises(GpuCheckError, match="not NAME, MAJOR.MINOR, DRIVER"):
        parse_gpu(line)


class Recorder:
    """Stands in for trtexec (not installable here): records each command, writes the plan a build names, prints
    SUMMARY for a run."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        self.commands.append(tuple(argv))
        saved = [a.split("=", 1)[1] for a in argv if a.startswith("--saveEngine=")]
        for name in saved:
            (cwd / name).write_bytes(b"plan")
        return subprocess.CompletedProcess(list(argv), 0, "" if saved else SUMMARY, "")


def test_the_check_builds_each_plan_with_the_jobs_commands(tmp_path: Path) -> None:
    """The commands gpu-check runs for a model are the ones in the Job's build step, word for word: what it measures is
    what the cluster builds. Then trtexec runs the plan at batch 1 and at the model's largest batch."""
    variants = tuple(v for v in REFERENCE_VARIANTS if v.name in ("trt_fp16", "trt_int8_bs16_count4"))
    settings = ModelRepoSettings(
        variants=variants, source=str(small_onnx(tmp_path / "m.onnx")), plan_compute_capabilities=("7.5",)
    )
    repository = build_repository(settings, tmp_path / "repo", cache_dir=tmp_path / "cache").out
    models = plan_models(repository)
    gpu = Gpu("Tesla T4", "7.5", "580.95.05")
    job = "\n".join(
        build_commands(EngineBuildArgs("25.06-py3", "gs://b/m", models, "nvidia-tesla-t4", "7.5", writer_email=None))
    )
    for model in models:
        recorder = Recorder()
        result = check_model(model, repository, "25.06-py3", gpu, tmp_path / "scratch", recorder)
        assert result.failed is None and result.plan_file == "model.25.06.cc75.plan" and result.plan_bytes == 4
        *builds, first, largest = recorder.commands
        assert f"cd /work/{model.name} && {' && '.join(shlex.join(step) for step in builds)}; fi" in job
        assert first == ("trtexec", "--loadEngine=model.25.06.cc75.plan", "--shapes=pixels:1x3x32x32")
        assert largest[-1] == f"--shapes=pixels:{model.max_batch_size}x3x32x32"
        assert result.runs[str(model.max_batch_size)]["throughput_qps"] == 212.5


def test_a_failed_build_is_recorded_with_its_step_and_the_rest_is_skipped(tmp_path: Path) -> None:
    variants = tuple(v for v in REFERENCE_VARIANTS if v.name == "trt_fp16")
    settings = ModelRepoSettings(
        variants=variants, source=str(small_onnx(tmp_path / "m.onnx")), plan_compute_capabilities=("8.9",)
    )
    repository = build_repository(settings, tmp_path / "repo", cache_dir=tmp_path / "cache").out
    (model,) = plan_models(repository)
    calls = []

    def failing(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(list(argv), 1, "", "[E] Error[4]: unsupported layer\n")

    result = check_model(model, repository, "25.06-py3", Gpu("NVIDIA L4", "8.9", "580"), tmp_path / "s", failing)
    assert len(calls) == 1 and result.build_s is None and result.runs == {}
    assert result.failed is not None and result.failed.startswith("trtexec --onnx=model.onnx")
    assert "exit 1" in result.failed and "unsupported layer" in result.failed


@pytest.mark.parametrize(
    "line",
    ["Tesla\x1b[2J T4, 7.5, 580.95.05", "Tesla T4, 7.5, 580\x1b]0;pwn\x07", "Tesla T4, 7.5, N/A", "Tesla T4, 7.5, "],
    ids=["control character in the name", "control character in the driver", "no driver", "empty driver"],
)
def test_nvidia_smis_text_is_never_passed_through_raw(line: str) -> None:
    with pytest.raises(GpuCheckError) as refused:
        parse_gpu(line)
    assert str(refused.value).isprintable(), refused.value  # shown as repr: escapes, never the terminal's codes


def _plan_model(tmp_path: Path) -> tuple[Path, PlanModel]:
    variants = tuple(v for v in REFERENCE_VARIANTS if v.name == "trt_fp16")
    settings = ModelRepoSettings(
        variants=variants, source=str(small_onnx(tmp_path / "m.onnx")), plan_compute_capabilities=("7.5",)
    )
    repository = build_repository(settings, tmp_path / "repo", cache_dir=tmp_path / "cache").out
    (model,) = plan_models(repository)
    return repository, model


ZERO_LATENCY = "[I] Throughput: 10 qps\n[I] Latency: median = 0 ms, percentile(99%) = 0 ms"


def _one_byte(plan: Path) -> None:
    plan.write_bytes(b"p")


def _answering(build: Callable[[Path], None] | None, summary: str = SUMMARY, error: BaseException | None = None):
    def run(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        if error is not None:
            raise error
        if any(a.startswith("--saveEngine=") for a in argv):
            if build:
                build(cwd / next(a for a in argv if a.startswith("--saveEngine=")).split("=", 1)[1])
            return subprocess.CompletedProcess(list(argv), 0, "", "")
        return subprocess.CompletedProcess(list(argv), 0, summary, "")

    return run


@pytest.mark.parametrize(
    ("runner", "why"),
    [
        (_answering(None), "exit 0, but no plan"),
        (_answering(lambda plan: plan.write_bytes(b"")), "exit 0, but no plan (or an empty one)"),
        (
            _answering(
                lambda plan: plan.write_bytes(b"p"), summary="[I] Throughput: 1e999 qps\n[I] Latency: median = 1 ms"
            ),
            "not a figure",
        ),
        (
            _answering(
                lambda plan: plan.write_bytes(b"p"), summary="[I] Throughput: 0 qps\n[I] Latency: median = 1 ms"
            ),
            "no throughput",
        ),
        (_answering(_one_byte, summary=ZERO_LATENCY), "no latency median"),
        (_answering(_one_byte, summary="[I] Throughput: 10 qps\n[I] Latency: min = 1 ms"), "no latency median"),
        (_answering(None, error=subprocess.TimeoutExpired("trtexec", 3600)), "still running after"),
        (_answering(None, error=FileNotFoundError(2, "No such file or directory")), "could not start"),
    ],
    ids=["no plan", "empty plan", "infinite throughput", "zero throughput", "0 ms", "no median", "hung", "vanished"],
)
def test_what_goes_wrong_in_a_build_or_a_run_is_recorded_never_raised(tmp_path: Path, runner, why: str) -> None:
    repository, model = _plan_model(tmp_path)
    result = check_model(model, repository, "25.06-py3", Gpu("Tesla T4", "7.5", "580.95.05"), tmp_path / "s", runner)
    assert result.failed is not None and why in result.failed and "\n" not in result.failed, result.failed


def test_the_results_folder_is_checked_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu, day = Gpu("Tesla T4", "7.5", "580.95.05"), datetime.date(2026, 12, 3)
    (tmp_path / "a-file").write_text("mine")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "README.md").write_text("mine")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    for out, why in (("a-file", "not an empty folder"), ("full", "not an empty folder"), ("link", "a link")):
        with pytest.raises(GpuCheckError, match=why):
            results_folder(tmp_path / out, gpu, day)
    assert (tmp_path / "full" / "README.md").read_text() == "mine" and not (tmp_path / "elsewhere").exists()
    monkeypatch.chdir(tmp_path)  # the project folder (contracts/paths.py project_dir) is the current one
    first = results_folder(None, gpu, day)
    (first / "gpu_check.json").write_text("{}")
    second = results_folder(None, gpu, day)
    assert (first.name, second.name) == ("gpu-check-tesla-t4-2026-12-03", "gpu-check-tesla-t4-2026-12-03-2")


def test_a_tool_that_hangs_or_vanishes_when_asked_is_one_line() -> None:
    def hangs(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(list(argv), 60)

    with pytest.raises(GpuCheckError, match="did not answer within"):
        gpu_check._ask(("nvidia-smi", "--query-gpu=name"), hangs)


def test_a_hand_made_config_is_checked_as_the_build_checks_it(tmp_path: Path) -> None:
    """The manifest's digests vouch for bytes, not for who wrote them: a config whose name is not its folder's (a
    path, a name with control characters or a '|'), or whose inputs or batch cannot be built, is refused."""
    repository, _ = _plan_model(tmp_path)
    config = repository / "trt_fp16" / "config.pbtxt"
    original = config.read_text()
    manifest_path = repository / ".model_repo.json"
    manifest = json.loads(manifest_path.read_text())
    for edit, why in (
        (original.replace('name: "trt_fp16"', 'name: "../x"'), "is not its folder's name"),
        (original.replace('name: "trt_fp16"', 'name: "t\\033[31m|x"'), "is not its folder's name"),
        (original.replace("max_batch_size: 64", "max_batch_size: 0"), "max_batch_size below 1"),
        (original.replace("dims: 3\n", "dims: -1\n", 1), "fixed dims besides the batch"),
    ):
        assert edit != original, why
        config.chmod(0o644)
        config.write_text(edit)
        manifest["files"]["trt_fp16/config.pbtxt"] = hashlib.sha256(edit.encode()).hexdigest()
        manifest_path.chmod(0o644)
        manifest_path.write_text(json.dumps(manifest))
        with pytest.raises(ModelRepoError, match=re.escape(why)):
            plan_models(repository)
