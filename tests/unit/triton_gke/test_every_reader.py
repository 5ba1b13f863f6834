"""Every reader of a file, driven with what must never hang it or crash it (issue 22, item 4).

READERS lists each function that reads a file a user can name, or one the program wrote where a user could replace
it, with the error class its callers turn into a one-line message and exit code. Hypothesis drives each one with a
FIFO, /dev/zero and /dev/null, a folder, a link to each of those, a link to nothing, binary data, text that is not
UTF-8, a (sparse) file 128 KiB to 1 MiB over the reader's cap (of which it may read at most the cap and 64 KiB)
and, for JSON and YAML, nesting deeper than its cap.
Each must raise its declared error, whose message is ONE line naming the file, within a few seconds.

test_no_reader_is_missing_from_the_table scans the package's source: every call that reads a file (read_text,
read_bytes, open, json.load, yaml.safe_load, ...) and every call of the one bounded reader (triton_gke/bounded_files.py)
must sit in a function a READERS row covers, or in ALLOWED with the reason it is not a reader of that kind.
"""

from __future__ import annotations

import ast
import os
import resource
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.bench.plans.results import load_run
from triton_gke.bench.reports import plots
from triton_gke.bench.reports import report as bench_report
from triton_gke.bench.reports.record import MAX_RESULTS_BYTES, read_results
from triton_gke.bench.runners.runner import BenchError, read_model
from triton_gke.bench.tuners import compare_tuners, model_analyzer
from triton_gke.bounded_files import MAX_JSON_DEPTH, UnreadableFileError
from triton_gke.capacity.records import MAX_FILE_BYTES, CapacityError, load_record
from triton_gke.infra.model_upload import built_repository_digest
from triton_gke.loadtest.arrivals import MAX_TRACE_BYTES, ArrivalError, read_trace
from triton_gke.model_repo import build, configs, cpu_twin, engines, gpu_twin, recipes, smoke, sync_source
from triton_gke.model_repo.configs import ModelIO, TensorSpec
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.manifest import MANIFEST, MANIFEST_MAX_BYTES, read_manifest
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, ModelRepoSettings
from triton_gke.model_repo.sync_source import CONFIG_MAX_BYTES, MAX_ONNX_BYTES
from triton_gke.offline import lifecycle, plan_diff, plan_folder, plan_out, runtime
from triton_gke.sandbox import leftovers, out_folder, run_folder
from triton_gke.sandbox import report as sandbox_report
from triton_gke.settings import schema, stack_file
from triton_gke.settings.catalogue import MAX_CSV_BYTES, CatalogueError, load_gpu_catalogue
from triton_gke.settings.cost import load_vm_prices
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.gpu_types import load_gpu_types

HANG_LIMIT_S = 3  # a read that makes no progress this long (a FIFO) is cut here and fails the test
READ_TIME_LIMIT_S = 120  # a read still making progress (a slow, busy machine reading a 128 MiB file) is cut here
_PROGRESS_BYTES = 4096  # more than the cut's own read of /proc/self/io: a read that grew rchar by this much moved
READ_LIMIT_BYTES = 2 << 30  # more memory than any reader needs (the largest cap is 128 MiB)
_SLACK_BYTES = 64 * 1024  # what else a reader may read while refusing a file over its cap (a sibling file, /proc)
PULUMI_YAML = "name: p\nruntime: python\n"


@dataclass(frozen=True)
class Reader:
    """One reader: `read(path)` reads the file at path (a fresh folder of its own); `error` is what it raises."""

    name: str
    sites: tuple[str, ...]  # "<file>:<function>" of the code that reads (what the source scan below checks)
    read: Callable[[Path], object]
    error: type[BaseException]
    cap: int  # bytes
    file: str | None = None  # the name the reader looks for; None: any name (drawn)
    nesting: str | None = None  # "json" or "yaml": also driven with nesting deeper than `depth`
    depth: int = MAX_JSON_DEPTH
    utf8: bool = True  # False: the reader takes any bytes but NUL (file names, as written by os.fsencode)
    prepare: Callable[[Path], None] = field(default=lambda folder: None)  # what the folder needs beside the file


def _cached_model(folder: Path) -> None:
    (folder / "model.onnx").write_bytes(b"weights")


def _project_file(folder: Path) -> None:
    (folder / "Pulumi.yaml").write_text(PULUMI_YAML)


_IO = ModelIO(inputs=(), outputs=(TensorSpec("probabilities", "TYPE_FP32", (3,)),))

READERS: tuple[Reader, ...] = (
    Reader("stack file", ("settings/stack_file.py:stack_file_text",), lambda p: stack_file.read_stack_file(p, "p", {}),
           stack_file.StackFileError, stack_file.MAX_BYTES, nesting="yaml", depth=stack_file.MAX_DEPTH),
    Reader("Pulumi.yaml (settings schema)", ("settings/schema.py:config_schema",), schema.config_schema.__wrapped__,
           ConfigError, stack_file.MAX_BYTES, nesting="yaml", depth=stack_file.MAX_DEPTH),
    Reader("GPU catalogue", ("settings/catalogue.py:read_csv_table",), load_gpu_catalogue, CatalogueError,
           MAX_CSV_BYTES),
    Reader("VM price table", ("settings/catalogue.py:read_csv_table",), load_vm_prices, CatalogueError,
           MAX_CSV_BYTES),
    Reader("GPU types table", ("settings/catalogue.py:read_csv_table",), load_gpu_types, CatalogueError,
           MAX_CSV_BYTES),
    Reader("Triton toolchain table", ("model_repo/recipes.py:load_toolchains",), recipes.load_toolchains,
           ModelRepoError, recipes.MAX_BYTES),
    Reader("capacity record", ("capacity/records.py:load_record",), load_record, CapacityError, MAX_FILE_BYTES,
           nesting="json"),
    Reader("results.json (bench record)", ("bench/reports/record.py:read_results",), read_results, CapacityError,
           MAX_RESULTS_BYTES, nesting="json"),
    Reader("results.json (bench results)", ("bench/plans/results.py:load_run",), load_run, UnreadableFileError,
           MAX_RESULTS_BYTES, nesting="json"),
    Reader("tune.json (compare-tuners)", ("bench/tuners/compare_tuners.py:tuner_entries",),
           lambda p: compare_tuners.tuner_entries(p.parent), BenchError, compare_tuners.TUNE_JSON_MAX_BYTES,
           file="tune.json", nesting="json"),
    Reader("Model Analyzer's pick.json", ("bench/tuners/model_analyzer.py:load_pick",),
           lambda p: model_analyzer.load_pick(p.parent), model_analyzer.ModelAnalyzerError,
           model_analyzer.PICK_MAX_BYTES, file=model_analyzer.PICK_JSON, nesting="json"),
    Reader("Model Analyzer's summary", ("bench/tuners/model_analyzer.py:read_summary",), model_analyzer.read_summary,
           model_analyzer.ModelAnalyzerError, model_analyzer.SUMMARY_MAX_BYTES),
    Reader("Model Analyzer's inference table", ("bench/tuners/model_analyzer.py:read_inference_csv",),
           lambda p: model_analyzer.read_inference_csv(p, "original"), model_analyzer.ModelAnalyzerError,
           model_analyzer.INFERENCE_CSV_MAX_BYTES),
    Reader("Model Analyzer's config.pbtxt", ("bench/tuners/model_analyzer.py:read_config",), model_analyzer.read_config,
           model_analyzer.ModelAnalyzerError, CONFIG_MAX_BYTES),
    Reader("results.json (bench report)", ("bench/reports/report.py:read_run",), bench_report.read_run,
           bench_report.ReportError, MAX_RESULTS_BYTES, nesting="json"),
    Reader("tune.json / comparison.json (bench plots)", ("bench/reports/plots.py:read_report",), plots.read_report,
           plots.PlotError, MAX_RESULTS_BYTES, nesting="json"),
    Reader("built config.pbtxt (bench)", ("bench/runners/runner.py:read_config",),
           lambda p: read_model(REFERENCE_VARIANTS[0], p.parent), BenchError, CONFIG_MAX_BYTES, file="config.pbtxt"),
    Reader("plan JSON (plan-diff, --against)", ("offline/plan_diff.py:load_plan",), plan_diff.load_plan,
           plan_diff.PlanFileError, plan_diff.MAX_PLAN_BYTES, nesting="json", depth=plan_diff.MAX_NESTING),
    Reader("Pulumi.yaml (plan-folder)", ("offline/plan_folder.py:check_folder",),
           lambda p: plan_folder.check_folder(p.parent, "dev"), plan_folder.FolderError, stack_file.MAX_BYTES,
           file="Pulumi.yaml", nesting="yaml", depth=stack_file.MAX_DEPTH),
    Reader("Pulumi.yaml (offline runtime)", ("offline/runtime.py:read_program_folder",),
           lambda p: runtime.read_program_folder(p.parent, "dev"), ValueError, stack_file.MAX_BYTES,
           file="Pulumi.yaml", nesting="yaml", depth=stack_file.MAX_DEPTH),
    Reader("stack file (offline runtime)", ("offline/runtime.py:read_program_folder",),
           lambda p: runtime.read_program_folder(p.parent, "dev"), ValueError, stack_file.MAX_BYTES,
           file="Pulumi.dev.yaml", nesting="yaml", depth=stack_file.MAX_DEPTH, prepare=_project_file),
    Reader("replacement rules", ("offline/lifecycle.py:load_rules",), lifecycle.load_rules.__wrapped__,
           lifecycle.RulesError, stack_file.MAX_BYTES, nesting="yaml", depth=stack_file.MAX_DEPTH),
    Reader("the plan's list of written files", ("offline/plan_out.py:_previously_written",),
           lambda p: plan_out._previously_written(p.parent), plan_out._FolderError, plan_out._WRITTEN_LIST_MAX_BYTES,
           file=plan_out.WRITTEN_LIST, utf8=False),
    Reader("the sandbox's list of what it wrote", ("sandbox/out_folder.py:_listed",),
           lambda p: out_folder._listed(p.parent), out_folder._FolderError, out_folder._WRITTEN_LIST_MAX_BYTES,
           file=out_folder.WRITTEN_LIST, utf8=False),
    Reader("plan model's config (gpu-check, pulumi up)", ("model_repo/engines.py:read_plan_config",),
           engines.read_plan_config, ModelRepoError, engines.CONFIG_MAX_BYTES, file="config.pbtxt"),
    Reader("build manifest", ("model_repo/manifest.py:read_manifest",), lambda p: read_manifest(p.parent),
           ModelRepoError, MANIFEST_MAX_BYTES, file=MANIFEST, nesting="json"),
    Reader("build manifest (pulumi up)", ("infra/model_upload.py:built_repository_digest",),
           lambda p: built_repository_digest(ModelRepoSettings(), "dev", p.parent), ConfigError, MANIFEST_MAX_BYTES,
           file=MANIFEST, nesting="json"),
    Reader("cache digest", ("model_repo/build.py:_checked_digest",),
           lambda p: build.cached_digest(p.with_name("model.onnx")), ModelRepoError, build._DIGEST_MAX_BYTES,
           file="model.onnx" + build.DIGEST_SUFFIX, prepare=_cached_model),
    # Binary protobuf: NUL bytes and any byte values are its own, so those inputs are refused as "not an ONNX model".
    Reader("ONNX model (--onnx, modelSource)", ("model_repo/configs.py:read_onnx_io",), configs.read_onnx_io,
           ModelRepoError, MAX_ONNX_BYTES, utf8=False),
    Reader("labels file", ("model_repo/build.py:_labels",),
           lambda p: build._labels(ModelRepoSettings(labels=str(p)), _IO), ModelRepoError, build.LABELS_MAX_BYTES),
    Reader("CPU twin's config.pbtxt", ("model_repo/cpu_twin.py:edited_copy",),
           lambda p: cpu_twin.delayed_copy(p.parent, p.parent / "copy", 1), ModelRepoError, CONFIG_MAX_BYTES,
           file="config.pbtxt"),
    Reader("GPU twin's service curves", ("model_repo/gpu_twin.py:read_rows",), gpu_twin.read_rows, ModelRepoError,
           gpu_twin.CURVES_MAX_BYTES),
    Reader("model source's config.pbtxt", ("model_repo/sync_source.py:_parse_config",), sync_source._parse_config,
           sync_source.SyncError, CONFIG_MAX_BYTES),
    Reader("model source's model.py", ("model_repo/sync_source.py:_check_python",), sync_source._check_python,
           sync_source.SyncError, sync_source.MODEL_PY_MAX_BYTES),
    Reader("model config (smoke)", ("model_repo/smoke.py:_config",), lambda p: smoke._config(p.parent),
           smoke.SmokeError, smoke.CONFIG_BYTES, file="config.pbtxt"),
    Reader("labels file (smoke)", ("model_repo/smoke.py:_labels",), smoke._labels, smoke.SmokeError,
           smoke.CONFIG_BYTES),
    Reader("Locust trace (ships alone)", ("loadtest/arrivals.py:_read_trace_text",), read_trace, ArrivalError,
           MAX_TRACE_BYTES),
    Reader("sandbox state", ("sandbox/leftovers.py:read_state",), leftovers.read_state, UnreadableFileError,
           leftovers.STATE_MAX_BYTES, nesting="json"),
    Reader("run folder marker", ("sandbox/run_folder.py:read_marker",), run_folder.read_marker, UnreadableFileError,
           run_folder._MARKER_MAX_BYTES, file=run_folder.MARKER, nesting="json"),
    Reader("Locust's statistics", ("sandbox/report.py:locust_results",),
           lambda p: sandbox_report.locust_results(p.with_suffix(""), 10.0), sandbox_report.ReportError,
           sandbox_report.MAX_LOCUST_JSON_BYTES, file="locust.json", nesting="json"),
)  # fmt: skip

# Reads that are not of a file a user can name or replace, each with why. A new read of a file anywhere else fails
# test_no_reader_is_missing_from_the_table until it goes through triton_gke/bounded_files.py (and a READERS row)
# or is listed here.
_PROC = "/proc of a live process: the kernel's text, not a user's file"
_HTTP = "an HTTP response body (Triton, Prometheus, the GCS emulator), bounded by the server, not a file"
_OWN = "written and read back within one call, in a run folder of its own (a subprocess's output or log)"
_PACKAGE = "a file of the installed package or the repository itself, read by a developer's check"
_WRITE = "opened by flags the scan cannot read (a variable) or for setns: nothing is parsed from it"
_BLOCKS = "model weights hashed, copied or uploaded in blocks: no cap applies (gigabytes); not parsed here"
_ONNX = "ONNX model parsed by onnx (binary protobuf): out of the text readers' scope, see the report"
_TEXT = "parses text already in memory (a config value, a kubeconfig value, a scalar), not a file"
_CALL = "not a file: a context object's open() (a run folder, a network namespace, the run state)"
ALLOWED: dict[str, str] = {
    "bench/reports/doc_plots.py:main:read_bytes": (
        "compares the PNGs it just rendered with the committed docs/results/ images, byte for byte (a developer's "
        "--check of the repository's own files, not a file a user names)"
    ),
    "bench/metrics/machine.py:cpu_model:read_text": _PROC,
    "bench/metrics/probes.py:machine_jiffies:open": _PROC,
    "sandbox/processes.py:start_time:read_text": _PROC,
    "sandbox/processes.py:command_line:read_bytes": _PROC,
    "sandbox/run_folder.py:processes_in:read_bytes": _PROC,
    "bench/metrics/probes.py:triton_counters:open": _HTTP,
    "bench/runners/runner.py:check_reachable:open": _HTTP,
    "sandbox/components.py:repository_index:open": _HTTP,
    "sandbox/components.py:repository_index:json.load": _HTTP,
    "sandbox/gcs_emulator.py:_answers:open": _HTTP,
    "sandbox/prometheus.py:LocalPrometheus._ready:open": _HTTP,
    "sandbox/triton.py:TritonServer.health:open": _HTTP,
    "bench/runners/remote.py:_call:open": _HTTP + " (bench tune --url: Triton's model configuration and load answers)",
    "sandbox/rollout.py:Replica.read_counts:open": _HTTP,
    "sandbox/rollout.py:_ready_versions:open": _HTTP,
    "sandbox/rollout.py:_ready_versions:json.load": _HTTP,
    "sandbox/prometheus.py:LocalPrometheus.api:open": _HTTP,
    "sandbox/prometheus.py:LocalPrometheus.api:json.load": _HTTP,
    "bench/runners/perf_analyzer.py:parse_csv:open": _OWN,
    "bench/tuners/loop_check.py:run_tool:read_bytes": _OWN + " (the last 2,000 bytes of perf_analyzer's own output)",
    "bench/runners/perf_analyzer.py:parse_search_csv:open": _OWN,
    "bench/runners/perf_analyzer.py:_unpack:open": _OWN + " (a member of the perf_analyzer wheel being unpacked)",
    "bench/runners/runner.py:run_locust:read_text": _OWN + " (Locust's steps file)",
    "bench/tuners/model_analyzer.py:ensure_installed:read_text": _OWN
    + " (the install marker beside the venv it names)",
    "bench/tuners/model_analyzer.py:_last_error:read_text": _OWN + " (Model Analyzer's log of this run)",
    "bench/tuners/model_analyzer.py:_constraints_hash:read_bytes": _PACKAGE + " (the pins file, hashed)",
    "model_repo/digests.py:published:read_text": _PACKAGE + " (the published digests of the built-in models)",
    "triton_gke/reference.py:committed_schema:read_text": _PACKAGE
    + " (the provider schema the reference is made from)",
    "bench/runners/runner.py:_tail:read_text": _OWN,
    "bench/runners/runner.py:_new_steps:read_text": _OWN
    + " (Locust's steps file, read while Locust runs for progress lines)",
    "bench/metrics/conditions.py:_read:open": _PROC + " (/proc/stat, /proc/loadavg; at most 4 KiB read)",
    "sandbox/balancer.py:LocalBalancer.log_lines:open": _OWN,
    "sandbox/balancer.py:LocalBalancer._log_tail:read_text": _OWN,
    "sandbox/components.py:LocustLoad.last_log_line:read_text": _OWN,
    "sandbox/gcs_emulator.py:GcsEmulator.log:read_text": _OWN,
    "sandbox/prometheus.py:LocalPrometheus.log_tail:read_text": _OWN,
    "sandbox/triton.py:TritonServer.log_lines:read_text": _OWN,
    "k8s/loadtest.py:LoadTest.__init__:read_text": _PACKAGE + " (the locustfile shipped in a ConfigMap)",
    "settings/keys.py:provider_config_keys:read_text": _PACKAGE + " (the installed provider's source)",
    "settings/keys.py:_kubernetes_provider_args:read_text": _PACKAGE + " (the installed provider's source)",
    "offline/lifecycle_table.py:main:read_text": _PACKAGE,
    "observability/dashboards.py:stale_dashboards:read_text": _PACKAGE + " (the committed dashboards)",
    "offline/plan_out.py:_open:open": _WRITE,
    "sandbox/out_folder.py:_write_list:open": _WRITE,
    "sandbox/netns.py:_setns:open": _WRITE + " (a namespace file of /proc, for setns)",
    "model_repo/build.py:_sha256:open": _BLOCKS,
    "model_repo/build.py:_file_hash:open": _BLOCKS,
    "model_repo/build.py:_copy_verified:open": _BLOCKS,
    "model_repo/manifest.py:sha256_file:open": _BLOCKS,
    "model_repo/sync.py:_upload_chunked:open": _BLOCKS,
    "model_repo/sync_source.py:file_hashes:open": _BLOCKS,
    "model_repo/build.py:_uint8_copy.produce:onnx.load": _ONNX,
    "model_repo/quantize.py:quantize_int8:onnx.load": _ONNX,
    "k8s/on_cluster_args.py:kubeconfig_problem:yaml.safe_load": _TEXT,
    "settings/stack_file.py:_readings:yaml.safe_load": _TEXT,
    "sandbox/leftovers.py:RunState.open:open": _CALL,
    "sandbox/netns.py:NetworkNamespace.__enter__:open": _CALL,
    "sandbox/run.py:open_namespace:open": _CALL,
    "sandbox/run.py:track_this_run:open": _CALL,
    "sandbox/run_folder.py:RunFolder.__enter__:open": _CALL,
    "sandbox/triton.py:TritonServer.__init__:open": _CALL,
    "sandbox/rollout.py:Proof.open:open": _CALL,
    "sandbox/rollout.py:run:open": _CALL,
}
# Functions that read through the one bounded reader on behalf of the READERS rows' functions (their callers).
HELPERS = {
    "settings/stack_file.py:read_yaml_file",  # config_schema, check_folder, read_program_folder, load_rules
    "settings/keys.py:check_stack_file",  # read_stack_file
    "settings/stack.py:stack_config",  # read_stack_file
    # read_stack_file of the OTHER stack files, for a warning: its error is dropped, never shown (a FIFO, a folder,
    # a huge or broken file among them: tests/unit/settings/test_shared_project.py)
    "settings/shared_project.py:_project_in",
}
BOUNDED = {"read_regular_file", "read_capped_file", "read_text_file", "read_yaml_file", "read_stack_file"}


# ---------------------------------------------------------------- hostile input


class StillReading(BaseException):  # noqa: N818 - not an Exception, so no reader's `except OSError` takes it
    """Raised into a read that blocks: a BaseException, as KeyboardInterrupt, which no reader catches."""


@contextmanager
def _bounded_call(hang_limit_s: float = HANG_LIMIT_S) -> Iterator[None]:
    """A read that would block (a FIFO) is cut after `hang_limit_s` without progress; one that would read /dev/zero
    into memory runs out of address space (MemoryError) at READ_LIMIT_BYTES more than the process holds, instead of
    filling the machine's memory (a reader without a cap did: 22 GB, then the kernel's OOM killer)."""

    started = time.monotonic()
    read_so_far = [_bytes_read()]

    def cut(signum: int, frame: object) -> None:
        # A time limit alone failed CI: a 2-core machine under four test workers took over 3 s to read 128 MiB.
        now = _bytes_read()
        if now - read_so_far[0] > _PROGRESS_BYTES and time.monotonic() - started < READ_TIME_LIMIT_S:
            read_so_far[0] = now
            return
        raise StillReading(f"still reading after {time.monotonic() - started:.0f} s, {hang_limit_s} s without progress")

    previous = signal.signal(signal.SIGALRM, cut)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    mapped = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (min(mapped + READ_LIMIT_BYTES, hard), hard))
    signal.setitimer(signal.ITIMER_REAL, hang_limit_s, hang_limit_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _special(kind: str, place: Path) -> Path:
    """A FIFO, a device or a folder to read, made under `place` where it can be made."""
    if kind == "fifo":
        os.mkfifo(place)
        return place
    if kind == "folder":
        place.mkdir()
        return place
    return Path(kind)  # /dev/zero never ends, /dev/null is empty: both character devices


def _nested(kind: str, depth: int, block: bool) -> bytes:
    if kind == "json" or not block:
        return ("[" * depth + "]" * depth).encode()
    return "".join(f"{'  ' * level}a:\n" for level in range(depth)).encode() + b"  " * depth + b"b: 1\n"


def _hostile(reader: Reader, folder: Path, name: str, data: st.DataObject) -> Iterator[tuple[str, Path]]:
    """(what, path) for each kind of hostile input, each in a fresh folder beside the reader's other files."""
    kinds = ["fifo", "/dev/zero", "/dev/null", "folder", "dangling link", "NUL bytes", "huge"]
    kinds += ["invalid UTF-8"] if reader.utf8 else []
    kinds += ["nested"] if reader.nesting else []
    for number, kind in enumerate(kinds):
        where = folder / f"{number}"
        where.mkdir()
        reader.prepare(where)
        path = where / name
        if kind in ("fifo", "/dev/zero", "/dev/null", "folder"):
            link = data.draw(st.booleans(), label=f"{kind} through a link") or kind.startswith("/dev")
            target = _special(kind, where / "target" if link else path)
            if link:
                path.symlink_to(target)
        elif kind == "dangling link":
            path.symlink_to(where / "nothing")
        elif kind == "NUL bytes":
            head = data.draw(st.binary(max_size=40), label="before the NUL")
            path.write_bytes(head + b"\0" + data.draw(st.binary(max_size=40), label="after the NUL"))
        elif kind == "invalid UTF-8":
            text = data.draw(
                st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=20),
                label="text",
            )
            bad = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80abc"]), label="bad bytes")
            path.write_bytes(text.encode() + bad)
        elif kind == "huge":
            with path.open("wb") as handle:  # sparse: no block is written
                over = data.draw(st.integers(2 * _SLACK_BYTES, 1 << 20), label="bytes over the cap")
                handle.truncate(reader.cap + over)
        else:
            depth = reader.depth + data.draw(st.integers(1, 64), label="levels over the cap")
            path.write_bytes(_nested(reader.nesting or "json", depth, data.draw(st.booleans(), label="block")))
        yield kind, path


_NAMES = st.text(st.sampled_from("abcxyz019-_ é"), min_size=1, max_size=12).filter(lambda s: s.strip() == s)


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
# No shrinking: the inputs are small already, and each try of a reader that hangs costs HANG_LIMIT_S.
@settings(
    max_examples=4,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_every_reader_refuses_hostile_files_in_one_line_naming_them(
    reader: Reader, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    name = reader.file or data.draw(_NAMES, label="file name") + ".txt"
    folder = tmp_path_factory.mktemp("reader")
    for kind, path in _hostile(reader, folder, name, data):
        before = _bytes_read()
        with _bounded_call(), pytest.raises(reader.error) as refused:
            reader.read(path)
        message = str(refused.value)
        assert len(message.splitlines()) == 1, (kind, message)
        assert name in message, (kind, message)
        if kind == "huge":  # the cap holds: the file is refused after at most cap + 1 bytes, not read to its end
            assert _bytes_read() - before <= reader.cap + _SLACK_BYTES, message


def test_the_cut_stops_a_read_that_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(StillReading, match="without progress"), _bounded_call(hang_limit_s=0.2):
        fifo.read_bytes()  # open(2) of a FIFO without a writer blocks


def test_the_cut_lets_a_slow_read_that_progresses_finish(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_bytes(b"x" * 8 * 2 * _PROGRESS_BYTES)
    with _bounded_call(hang_limit_s=0.5), data.open("rb", buffering=0) as handle:
        while handle.read(2 * _PROGRESS_BYTES):  # each chunk is progress; the whole read outlasts the limit
            time.sleep(0.1)


def _bytes_read() -> int:
    """Bytes this process has read so far (rchar of proc_pid_io(5), https://man7.org/linux/man-pages/man5/proc_pid_io.5.html)."""
    return int(next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar:"))[6:])


# ---------------------------------------------------------------- no reader left out


def _rooms() -> Iterator[tuple[str, Path]]:
    """(name as this file's table writes it, file) of every module of the package: a room's module by its room
    (infra/cluster.py), a module of triton_gke/ itself by the package (triton_gke/reference.py)."""
    package = PROJECT_DIR / "triton_gke"
    for module in sorted(package.rglob("*.py")):
        relative = module.relative_to(package)
        yield (relative.as_posix() if len(relative.parts) > 1 else f"triton_gke/{relative.name}"), module


def _read_mode(call: ast.Call) -> bool:
    """False for an open() whose mode or flags say it writes (a literal mode with w/a/x, O_WRONLY/O_RDWR/O_CREAT)."""
    words = ast.unparse(call)
    modes = [a.value for a in (*call.args, *(k.value for k in call.keywords)) if isinstance(a, ast.Constant)]
    if any(isinstance(m, str) and set(m) & set("wax") and set(m) <= set("rwabxt+") for m in modes):
        return False
    return not any(flag in words for flag in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_DIRECTORY", "_DIRECTORY"))


def _reads(tree: ast.AST) -> Iterator[tuple[str, str]]:
    """(enclosing function, call) of every call that reads a file, or reads through the one bounded reader."""
    scope: list[str] = []

    def visit(node: ast.AST) -> Iterator[tuple[str, str]]:
        named = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if named:
            scope.append(node.name)
        if isinstance(node, ast.Call):
            func = node.func
            attr = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            where = ".".join(scope)
            if attr in ("read_text", "read_bytes") or attr == "open" and _read_mode(node):
                yield where, attr
            elif (owner, attr) in {("json", "load"), ("yaml", "safe_load"), ("yaml", "load"), ("onnx", "load")}:
                yield where, f"{owner}.{attr}"
            elif (owner, attr) == ("tomllib", "load") or attr in BOUNDED:
                yield where, attr
        for child in ast.iter_child_nodes(node):
            yield from visit(child)
        if named:
            scope.pop()

    yield from visit(tree)


def test_no_reader_is_missing_from_the_table() -> None:
    covered = {site for reader in READERS for site in reader.sites} | HELPERS
    unlisted, used = [], set()
    for relative, module in _rooms():
        if relative == "triton_gke/bounded_files.py":
            continue
        for function, call in _reads(ast.parse(module.read_text(encoding="utf-8"))):
            site, key = f"{relative}:{function}", f"{relative}:{function}:{call}"
            if site in covered:
                used.add(site)
            elif key in ALLOWED and call not in BOUNDED:
                used.add(key)
            else:
                unlisted.append(key)
    assert unlisted == [], "read a file outside the one bounded reader and READERS (or add it to ALLOWED, with why)"
    assert sorted((covered | set(ALLOWED)) - used) == [], "READERS or ALLOWED name code that no longer reads"


def test_the_scan_finds_a_new_reader(tmp_path: Path) -> None:
    """The scan is not blind: a plain read_text or json.load, or a new bounded read, is found where it is."""
    source = (
        "def load(p):\n    return json.load(p.open())\n"
        "def text(p):\n    return p.read_text()\n"
        "def bounded(p):\n    return read_text_file(p, 1, 'x')\n"
        "def written(p):\n    p.open('w')\n"
    )
    found = list(_reads(ast.parse(source)))
    assert found == [("load", "json.load"), ("load", "open"), ("text", "read_text"), ("bounded", "read_text_file")]
