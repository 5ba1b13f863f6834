"""A corpus of invalid inputs, each given to the real command line it targets, in a real subprocess.

The table is tests/data/bad_inputs/corpus.yaml. Every input must be refused with exit code 2 and one
line on stderr naming the key or file, without a traceback, and leave nothing behind: no plan YAML,
no model repository folder, no Locust CSV, no change to the bucket. The cases run two at a time
(these are 2-core machines) in one fixture; each test then reads its case's outcome.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import yaml
from google.cloud import storage
from onnx import TensorProto, helper, numpy_helper

from tests.support.checkout import PROJECT_DIR

pytest_plugins = ("tests.support.gcs_fixtures",)

DATA = PROJECT_DIR / "tests" / "data" / "bad_inputs"
CORPUS: list[dict[str, Any]] = yaml.safe_load((DATA / "corpus.yaml").read_text())
CASES = {case["id"]: case for case in CORPUS}
LOCUST = Path(sys.executable).parent / "locust"
CASE_TIMEOUT_S = 120  # far above any refusal (~1-5 s); a case that hangs fails instead of blocking the run
PARALLEL = 2
# google-auth must never look for a metadata server beyond 127.0.0.1; proxies must not see loopback traffic.
CLEAN_ENV = {"GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9", "NO_GCE_CHECK": "True"}
LOCUST_KEYS = ("model", "saddr", "rps", "protocol", "payload", "input_name", "output_name", "batch", "timeout_s")
SEED_OBJECT = "models/keep/config.pbtxt"
TEST_NAME = "test_bad_input_is_refused_cleanly"


@dataclass
class Outcome:
    code: int | None
    stdout: str
    stderr: str
    leftovers: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- ONNX files for the corpus


def _model(inputs: list[Any], outputs: list[Any], nodes: list[Any], ir_version: int = 8, **graph: Any) -> Any:
    model = helper.make_model(
        helper.make_graph(nodes, "bad", inputs, outputs, **graph),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
    )
    model.ir_version = ir_version  # 8: what every onnxruntime of the last years loads
    return model


def _float(name: str, shape: list[Any]) -> Any:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _valid(ir_version: int = 8) -> Any:
    weights = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    return _model([_float("x", ["N", 4])], [_float("y", ["N", 4])], [node], ir_version, initializer=[weights])


def write_onnx_files(folder: Path) -> Path:
    """The ONNX files the corpus names as {onnx}/NAME.onnx."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(_valid(), folder / "valid.onnx")
    whole = (folder / "valid.onnx").read_bytes()
    (folder / "truncated.onnx").write_bytes(whole[: len(whole) // 2])
    onnx.save(_valid(), folder / "external_data.onnx", save_as_external_data=True, size_threshold=0)
    onnx.save(_valid(ir_version=14), folder / "ir14.onnx")  # onnx 1.23's default IR version
    relu = helper.make_node("Relu", ["x"], ["y"])
    onnx.save(_model([_float("x", [])], [_float("y", [])], [relu]), folder / "rank0.onnx")
    onnx.save(_model([_float("x", ["N"])], [_float("y", ["N"])], [relu]), folder / "rank1.onnx")
    onnx.save(_model([_float("x", [1, 4])], [_float("y", [1, 4])], [relu]), folder / "fixed_batch.onnx")
    dangling = helper.make_node("Add", ["x", "missing"], ["y"])
    onnx.save(_model([_float("x", ["N", 4])], [_float("y", ["N", 4])], [dangling]), folder / "broken_graph.onnx")
    custom = helper.make_node("FooBar", ["x"], ["y"], domain="com.example")
    onnx.save(_model([_float("x", ["N", 4])], [_float("y", ["N", 4])], [custom]), folder / "custom_op.onnx")
    return folder


def write_small_repository(root: Path) -> Path:
    """A valid source for the sync cases: what is wrong there is never the repository."""
    # A real ONNX file: the sync refuses a .onnx that does not parse (issue 11).
    files = {"original/config.pbtxt": b'name: "original"\n', "original/1/model.onnx": _valid().SerializeToString()}
    for relative, content in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(content)
    return root


# ---------------------------------------------------------------- running one case


@dataclass
class Context:
    onnx: Path
    repo: Path
    client: storage.Client | None
    emulator_env: dict[str, str]


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(f"{{{key}}}", value)
    return text


def _command(case: dict[str, Any], args: list[str], tmp: Path) -> list[str]:
    cli = case["cli"]
    if cli == "plan":
        return [sys.executable, "-m", "triton_gke.offline.plan", "--out", str(tmp / "plan"), *args]
    if cli == "model_repo":
        out = ["--out", str(tmp / "out"), "--cpu-out", str(tmp / "cpu"), "--cache-dir", str(tmp / "cache")]
        return [sys.executable, "-m", "triton_gke.model_repo", *out, *args]
    if cli == "locust":
        run = ["--headless", "-u", "1", "-r", "1", "-t", "5s", "--only-summary", "--csv", str(tmp / "run")]
        return [str(LOCUST), "-f", str(PROJECT_DIR / "loadtest" / "locustfile.py"), *run]
    if cli == "sandbox":  # refused before anything starts: no Triton, emulator or Prometheus is needed
        return [sys.executable, "-m", "triton_gke.sandbox.run", *args]
    return [sys.executable, "-m", "triton_gke.model_repo.sync", *args]


def _environment(case: dict[str, Any], values: dict[str, str], ctx: Context) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LOCUST_KEYS and "proxy" not in k.lower()}
    env.update(CLEAN_ENV, no_proxy="*", PYTHONPATH=str(PROJECT_DIR))
    if case["cli"] == "locust":
        env["metrics_port"] = "0"
    if case["cli"] == "sync":
        env.update(ctx.emulator_env)
    env.update({k: _fill(str(v), values) for k, v in (case.get("env") or {}).items()})
    return env


def _snapshot(client: storage.Client, bucket: str) -> dict[str, tuple[str, int]]:
    return {b.name: (b.md5_hash, b.generation) for b in client.list_blobs(bucket)}


def _leftovers(
    case: dict[str, Any], tmp: Path, before: dict[str, tuple[str, int]], ctx: Context, bucket: str
) -> list[str]:
    """What the refused run left behind (it must be nothing)."""
    if case["cli"] == "sync":
        after = _snapshot(ctx.client, bucket)
        return [] if after == before else [f"bucket {bucket} changed: {sorted(set(after) ^ set(before))}"]
    watched = {"plan": ["plan"], "model_repo": ["out", "cpu"], "locust": ["run_stats.csv", "run_failures.csv"]}
    watched["sandbox"] = ["sandbox"]
    return [name for name in watched[case["cli"]] if (tmp / name).exists()]


def run_case(case: dict[str, Any], ctx: Context) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"bad-{case['id']}-") as folder:
        tmp = Path(folder)
        bucket = f"bad-{uuid.uuid4().hex[:16]}"
        values = {"data": str(DATA), "onnx": str(ctx.onnx), "tmp": folder, "repo": str(ctx.repo), "bucket": bucket}
        for made in case.get("mkdir", []):
            Path(_fill(made, values)).mkdir(parents=True)
        for relative, content in (case.get("files") or {}).items():
            made = Path(_fill(relative, values))
            made.parent.mkdir(parents=True, exist_ok=True)
            made.write_text(content)
        before: dict[str, tuple[str, int]] = {}
        if case["cli"] == "sync":
            ctx.client.create_bucket(bucket).blob(SEED_OBJECT).upload_from_string(b"keep")
            before = _snapshot(ctx.client, bucket)
        args = [_fill(a, values) for a in case.get("args", [])]
        try:
            done = subprocess.run(
                _command(case, args, tmp),
                cwd=PROJECT_DIR,
                env=_environment(case, values, ctx),
                capture_output=True,
                text=True,
                timeout=CASE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as hung:
            return Outcome(None, str(hung.stdout or ""), str(hung.stderr or ""))
        outcome = Outcome(done.returncode, done.stdout, done.stderr)
        outcome.leftovers = _leftovers(case, tmp, before, ctx, bucket)
        # Back to the corpus's placeholders, so `names` compares as written there.
        for value, placeholder in ((folder, "{tmp}"), (bucket, "{bucket}"), (str(DATA), "{data}")):
            outcome.stderr = outcome.stderr.replace(value, placeholder)
        return outcome


# ---------------------------------------------------------------- the run, and one test per case


def _selected(request: pytest.FixtureRequest) -> list[str]:
    """The cases this session runs (all of them, or those picked with -k)."""
    return [
        item.callspec.params["case_id"]
        for item in request.session.items
        if getattr(item, "originalname", "") == TEST_NAME and hasattr(item, "callspec")
    ]


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    chosen = [CASES[i] for i in _selected(request)]
    client, emulator_env = None, {}
    if any(case["cli"] == "sync" for case in chosen):
        emulator = request.getfixturevalue("gcs_emulator")
        client, emulator_env = emulator.client(), {"STORAGE_EMULATOR_HOST": emulator.endpoint}
    root = tmp_path_factory.mktemp("bad_inputs")
    ctx = Context(write_onnx_files(root / "onnx"), write_small_repository(root / "repo"), client, emulator_env)
    buckets_before = {b.name for b in client.list_buckets()} if client else set()
    # The slowest command line (the plan imports the whole program) first, so the two workers finish together.
    ordered = sorted(chosen, key=lambda case: case["cli"] != "plan")
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = dict(zip([c["id"] for c in ordered], pool.map(lambda c: run_case(c, ctx), ordered), strict=True))
    yield results
    if client:
        created = {b.name for b in client.list_buckets()} - buckets_before
        assert all(name.startswith("bad-") and not name.endswith("-missing") for name in created), created


def _params() -> list[Any]:
    return [
        pytest.param(case["id"], marks=pytest.mark.xfail(strict=True, reason=case["gap"]) if "gap" in case else ())
        for case in CORPUS
    ]


def test_the_corpus_covers_every_command_line_with_30_inputs_or_more() -> None:
    assert len(CASES) == len(CORPUS) >= 30, "case ids must be unique"
    assert {case["cli"] for case in CORPUS} == {"plan", "model_repo", "locust", "sync", "sandbox"}


@pytest.mark.parametrize("case_id", _params())
def test_bad_input_is_refused_cleanly(outcomes: dict[str, Outcome], case_id: str) -> None:
    case, outcome = CASES[case_id], outcomes[case_id]
    report = f"exit {outcome.code}\nstderr:\n{outcome.stderr}\nstdout:\n{outcome.stdout[-2000:]}"
    assert outcome.code is not None, f"still running after {CASE_TIMEOUT_S} s\n{report}"
    assert "Traceback" not in outcome.stderr + outcome.stdout, report
    assert outcome.code == 2, report
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, report
    assert case["names"] in lines[0], report
    assert outcome.leftovers == [], report
