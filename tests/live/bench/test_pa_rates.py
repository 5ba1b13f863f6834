"""bench.runners.pa_rates against a real tritonserver and perf_analyzer, in both modes (issue 20, item 8).

`triton-gke bench pa-rates` ended in a traceback in its `--async` phase and wrote nothing: in rate mode
perf_analyzer measured time windows of 3 s, and it fails a run whose window holds no answer ("No valid requests
recorded within time interval"). Past the server's capacity the open loop's queue grows, the dynamic batcher
runs full batches, and one batch outlasted the window; the PerfAnalyzerError then escaped pa_rates. Here a twin
that takes SLOW_BATCH_MS per batch, twice a 3 s window, answers at most once every other window: the run failed
on the old windows, every time, and must now measure."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.bench_fixtures import slow_twin
from triton_gke.bench.runners import pa_rates, perf_analyzer
from triton_gke.sandbox.triton import TritonServer

SLOW_BATCH_MS = 6000  # per execution, whatever its batch size: answers arrive in bursts 6 s apart


RATE = 8.0  # requests/s: a batch of up to 48 per 6 s, under max_batch_size, so the queue stays bounded


@pytest.fixture(scope="module")
def batching_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repository = tmp_path_factory.mktemp("batching_repo")
    config = slow_twin(repository, "batching", SLOW_BATCH_MS) / "config.pbtxt"
    text = config.read_text(encoding="utf-8").replace("max_batch_size: 8", "max_batch_size: 64")
    config.write_text(text + "dynamic_batching { }\n", encoding="utf-8")
    with TritonServer(repository, ready_timeout_s=120) as server:
        yield server


def test_async_rate_measures_when_answers_come_less_often_than_a_window(
    batching_triton: TritonServer, tmp_path: Path
) -> None:
    binary = perf_analyzer.ensure_binary()
    load = perf_analyzer.Load(request_rate=RATE, asynchronous=True)
    result = perf_analyzer.run(binary, "batching", batching_triton.http_url, "http", load, tmp_path / "pa.csv")
    assert result.rps > 0 and result.p95_ms >= SLOW_BATCH_MS * 0.9, result
    args = perf_analyzer.command(binary, "batching", "u", "http", load, tmp_path / "pa.csv", 100)
    assert f"--measurement-request-count={perf_analyzer.window_requests(RATE)}" in args


# ---------------------------------------------------------------- a failed run: one line, rows kept
@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pa_rates with a built model folder and no real server or perf_analyzer."""
    project = tmp_path / "project"
    (project / "build" / "bench" / "dev" / "cpu" / "original").mkdir(parents=True)
    (project / "build" / "bench" / "dev" / "cpu" / "original" / "config.pbtxt").write_text('name: "original"\n')
    monkeypatch.chdir(project)  # the project is the working directory (contracts/paths.py project_dir)
    monkeypatch.setattr(perf_analyzer, "ensure_binary", lambda: Path("perf_analyzer"))

    @contextmanager
    def server(_repository: Path, _model: str) -> Iterator[object]:
        yield type("Endpoint", (), {"http": "127.0.0.1:1"})()

    monkeypatch.setattr(pa_rates, "sandbox_server", server)
    return tmp_path / "out"


def test_a_perf_analyzer_failure_is_one_line_and_keeps_the_rows_measured(
    built: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(_binary, _model, _url, _protocol, load, _out_csv):  # noqa: ANN001, ANN202
        if load.asynchronous:
            raise perf_analyzer.PerfAnalyzerError("perf_analyzer failed: No valid requests recorded")
        return perf_analyzer.PerfResult(load, 20.0, 50.0, 80.0, 10.0, 30.0)

    monkeypatch.setattr(perf_analyzer, "run", run)
    assert pa_rates.main(["--rates", "20,30", "--out", str(built)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: triton-gke bench pa-rates: async at 20 requests/s: perf_analyzer failed: No valid requests recorded "
        f"(2 of 4 rows in {built / 'pa_rates.csv'})"
    ]
    with (built / "pa_rates.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["mode"], r["requested_rps"]) for r in rows] == [("sync", "20.0"), ("sync", "30.0")]
    assert (built / "meta.json").is_file()


def test_a_missing_perf_analyzer_is_one_line(
    built: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing() -> Path:
        raise perf_analyzer.PerfAnalyzerError("pip download tritonclient==2.51.0 failed: no network")

    monkeypatch.setattr(perf_analyzer, "ensure_binary", missing)
    assert pa_rates.main(["--rates", "20", "--out", str(built)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "no network (0 of 2 rows" in err
