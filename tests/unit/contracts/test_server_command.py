"""One tritonserver command line for every place that starts one (contracts/triton.py triton_command).

Every start site is found by reading the source (START: a file that builds tritonserver's flags or starts it) and
must have a collector here that runs its real argv-building code without starting anything; each argv collected
holds no single-valued flag twice (tritonserver keeps the last, a reader the first: REPEATABLE_FLAGS cites which
repeat). The sandbox once ran --http-port twice and --exit-timeout-secs 5, then 3, then the rollout's value.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate
from triton_gke.contracts.triton import (
    REPEATABLE_FLAGS,
    ServerFlags,
    cluster_flags,
    compose_flags,
    triton_command,
    triton_server_args,
)

# A file that composes tritonserver's flags or starts one: a TritonServer, the cluster's flags, the sandbox's start
# (prepare_triton: its callers choose the keys and the exit timeout), Model Analyzer's flags, the binary itself.
START = re.compile(
    r"\bTritonServer\(|\btriton_server_args\(|\bcluster_flags\(|\bprepare_triton\(|\"triton_server_flags\""
    r"|\btritonserver_binary\(\)"
)
SCANNED = ("triton_gke", "tests/support")
# Where the command line is composed, not a start site.
HOMES = {"triton_gke/contracts/triton.py", "triton_gke/sandbox/triton.py", "triton_gke/sandbox/triton_wheel.py"}
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def start_site_files() -> set[str]:
    files = {
        path.relative_to(PROJECT_DIR).as_posix()
        for root in SCANNED
        for path in (PROJECT_DIR / root).rglob("*.py")
        if START.search(path.read_text(encoding="utf-8"))
    }
    return files - HOMES


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> None:
    """TritonServers built, never started: no network namespace or private /tmp probe (each starts a process)."""
    from tests.support import triton_fixtures
    from triton_gke.sandbox import components, netns

    monkeypatch.setattr(components, "private_tmp_available", lambda: False)
    monkeypatch.setattr(triton_fixtures, "isolation_available", lambda: False)
    monkeypatch.setattr(netns, "isolation_available", lambda: False)  # twin_check imports it when it serves


def _argv(server) -> list[str]:  # noqa: ANN001 - a TritonServer, closed once its command line is read
    try:
        return server.command()
    finally:
        server.close()


GCS = SimpleNamespace(internal_endpoint="http://127.0.0.1:9")


def _cluster() -> Iterator[list[str]]:
    for stack in ("dev", "prod"):
        for deployment in evaluate(stack).of_type(DEPLOYMENT):
            for container in deployment.inputs["spec"]["template"]["spec"]["containers"]:
                if container["name"] == "tritonserver":
                    yield container["args"]


def _sandbox() -> Iterator[list[str]]:
    from triton_gke.sandbox import components

    for inference_key in (None, "IKEY"):
        yield _argv(components.prepare_triton("gs://b/m", GCS, None, "KEY", inference_key, "b"))


def _sandbox_run(tmp: Path) -> Iterator[list[str]]:
    from triton_gke.sandbox import run

    with contextlib.ExitStack() as cleanup:
        server, _, _ = run.prepare_triton("gs://b/m", GCS, None, tmp, cleanup, {"h": "IKEY"}, "a")
        yield server.command()


def _rollout() -> Iterator[list[str]]:
    from triton_gke.sandbox.balancer import Slot
    from triton_gke.sandbox.rollout import Fleet

    slot = Slot("pod0", "ns0", 8000)
    for keys in ({}, {"a": "KA", "b": "KB"}):
        fleet = Fleet(SimpleNamespace(slots=[slot]), GCS, {"ns0": None}, "gs://b/m", keys, "a")  # type: ignore[arg-type]
        yield _argv(fleet.prepare(slot, 20))


def _inference_key(tmp: Path) -> Iterator[list[str]]:
    from triton_gke.sandbox import inference_key

    yield _argv(inference_key.new_server(tmp, "IKEY", "b"))


def _bench(tmp: Path) -> Iterator[list[str]]:
    from triton_gke.bench.runners import runner

    yield _argv(runner.sandbox_triton(tmp, "original"))


def _twin_check(tmp: Path) -> Iterator[list[str]]:
    from triton_gke.bench.truth import twin_check

    yield _argv(twin_check.serve([], tmp))


def _model_analyzer(tmp: Path) -> Iterator[list[str]]:
    """The command line MA builds from its configuration: our triton_server_flags, then the flags it sets itself
    (MA_OWN_FLAGS) as --flag=value (triton/server/server_config.py to_cli_string)."""
    from triton_gke.bench.tuners import model_analyzer as ma

    flags = ma.profile_config(
        model="original",
        repository=tmp,
        workdir=tmp,
        out_dir=tmp,
        latency_ms=100,
        percentile=95,
        limits=ma.SearchLimits(),
        ports=ma.Endpoints(1, 2, 3),
        server={"binary": "tritonserver", "backends": str(tmp), "shm_prefix": "P_", "perf_analyzer": "pa"}
        | {"libraries": "", "path": ""},
    )["triton_server_flags"]
    yield ["tritonserver", *(f"--{k.replace('_', '-')}={v}" for k, v in flags.items())] + [
        f"--{flag}=set-by-ma" for flag in sorted(ma.MA_OWN_FLAGS)
    ]


def _fixtures(tmp: Path) -> Iterator[list[str]]:
    from tests.support import bench_fixtures, monitoring_fixtures, triton_fixtures

    yield _argv(triton_fixtures.cpu_triton_server(tmp))
    yield _argv(bench_fixtures.slow_triton_server(tmp))
    yield _argv(monitoring_fixtures.monitoring_triton(tmp))


# Start site -> its argv(s), from its own code.
SITES: dict[str, Callable[[Path], Iterator[list[str]]]] = {
    "triton_gke/k8s/triton.py": lambda _: _cluster(),
    "triton_gke/sandbox/components.py": lambda _: _sandbox(),
    "triton_gke/sandbox/run.py": _sandbox_run,
    "triton_gke/sandbox/rollout.py": lambda _: _rollout(),
    "triton_gke/sandbox/inference_key.py": _inference_key,
    "triton_gke/bench/runners/runner.py": _bench,
    "triton_gke/bench/tuners/model_analyzer.py": _model_analyzer,
    "triton_gke/bench/truth/twin_check.py": _twin_check,
    "tests/support/triton_fixtures.py": _fixtures,
    "tests/support/bench_fixtures.py": _fixtures,
    "tests/support/monitoring_fixtures.py": _fixtures,
}


def flags_given_twice(argv: list[str]) -> list[str]:
    flags = [arg.split("=", 1)[0].removeprefix("--") for arg in argv[1:]]
    return sorted({f for f in flags if f not in REPEATABLE_FLAGS and flags.count(f) > 1})


def test_every_start_site_has_a_collector() -> None:
    """A new place that starts tritonserver fails here until its command line is collected below."""
    assert start_site_files() == set(SITES)


@pytest.mark.parametrize("site", sorted(SITES))
def test_no_start_site_gives_a_flag_twice(site: str, local: None, tmp_path: Path) -> None:
    argvs = list(SITES[site](tmp_path))
    assert argvs
    for argv in argvs:
        assert flags_given_twice(argv) == [], (site, argv)


def test_the_sandbox_runs_the_cluster_line_with_its_own_values_replacing_the_clusters(local: None) -> None:
    """Each cluster flag once, with the cluster's value but where the local server owns it (ports, repository,
    addresses) or the rollout asks for another (--exit-timeout-secs)."""
    from triton_gke.sandbox.balancer import Slot
    from triton_gke.sandbox.rollout import Fleet

    slot = Slot("pod0", "ns0", 8000)
    fleet = Fleet(SimpleNamespace(slots=[slot]), GCS, {"ns0": None}, "gs://b/m", {}, "a")  # type: ignore[arg-type]
    server = fleet.prepare(slot, 20)
    local_flags = _parsed(_argv(server))
    cluster = cluster_flags("gs://b/m", gpu=False, admin_key=fleet.key)
    assert local_flags["exit-timeout-secs"] == "20" != cluster["exit-timeout-secs"]
    assert local_flags["http-port"] == str(server.http_port) and local_flags["http-address"] == "127.0.0.1"
    owned = {"exit-timeout-secs", "http-port", "grpc-port", "metrics-port"}
    shared = [flag for flag in cluster if flag not in owned]
    assert {f: cluster[f] for f in shared} == {f: local_flags[f] for f in shared}


def _parsed(argv: list[str]) -> ServerFlags:
    from triton_gke.contracts.triton import parse_flags

    return parse_flags(argv[1:])


def test_an_override_replaces_the_clusters_value_where_it_was() -> None:
    cluster = cluster_flags("gs://b/m", inference_key="K")
    base = triton_server_args("gs://b/m", inference_key="K")
    argv = triton_command("tritonserver", cluster, {"exit-timeout-secs": "20"})
    assert argv == [a.replace("--exit-timeout-secs=3", "--exit-timeout-secs=20") for a in base]
    argv = triton_command("tritonserver", cluster, {"metrics-config": ["a=b"]})  # a repeatable flag: all replaced
    first = base.index("--metrics-config=summary_latencies=true")
    assert argv == [*base[:first], "--metrics-config=a=b", *base[first + 2 :]]


def test_the_cluster_line_keeps_its_argument_order() -> None:
    """The Deployment's args (plans byte for byte): the admin and inference restrictions alternate HTTP, gRPC."""
    argv = triton_server_args("gs://b/m", inference_key="K")
    restricted = [a.split("=", 1)[0] for a in argv if "restricted" in a]
    assert restricted == ["--http-restricted-api", "--grpc-restricted-protocol"] * 2
    assert argv == triton_command("tritonserver", cluster_flags("gs://b/m", inference_key="K"))


@pytest.mark.parametrize("flag", ["exit-timeout-secs", "http-port", "model-control-mode"])
def test_a_single_valued_flag_twice_is_refused(flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        ServerFlags([(flag, "1"), ("load-model", "a"), (flag, "2")])
    with pytest.raises(ValueError, match=flag):
        compose_flags({flag: ["1", "2"]})


def test_a_repeatable_flag_keeps_every_value_and_none_drops_a_flag() -> None:
    flags = compose_flags({"load-model": ["a", "b"], "exit-timeout-secs": "5"}, {"exit-timeout-secs": None})
    assert flags.argv("t") == ["t", "--load-model=a", "--load-model=b"] and dict(flags) == {"load-model": ("a", "b")}


def test_the_collector_finds_a_repeated_flag() -> None:
    """The check the site test makes, on an argv that repeats a single-valued flag and one that repeats a repeatable."""
    assert flags_given_twice(["t", "--http-port=1", "--load-model=a", "--http-port=2", "--load-model=b"]) == [
        "http-port"
    ]
