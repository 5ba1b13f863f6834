"""A target request rate sizes the stack (settings/capacity.py), and the SLO knobs must nest.

Through the real program under Pulumi's mock runtime: changing targetRps, capacityHeadroomPercent or the capacity
record changes the GPU pools' minimum, the load balancer's maxRatePerEndpoint and the HPA's queue-time target
exactly as the arithmetic in settings/capacity.py says (recomputed here in whole numbers); unreachable targets and
incoherent knobs are refused by `make plan`'s command in one line with exit code 2.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import triton_gke.settings.capacity as sizing
from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate, stack_settings
from triton_gke.capacity.records import FILE_KEYS, RECORDS_DIR, SCHEMA
from triton_gke.offline import plan as plan_command
from triton_gke.offline.runtime import Plan
from triton_gke.settings import ConfigError, load_stack_settings

NODE_POOL = "gcp:container/nodePool:NodePool"
BACKEND = "gcp:compute/backendService:BackendService"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
DELAY_US = 20_000  # modelMaxQueueDelayUs' default
ALERT_MS = 50  # sloQueueTimeMs' default
ORIGINAL_RECORD = "capacity/records/nvidia-tesla-t4__original__tensorrtserver-19.05-py3-tutorial__slo-100ms.json"


@pytest.fixture(scope="module")
def in_project() -> Iterator[Path]:
    """A folder inside the project (build/ is git-ignored) for record files: capacityRecord must lie in the project."""
    (PROJECT_DIR / "build").mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="test-capacity-", dir=PROJECT_DIR / "build"))
    yield folder
    shutil.rmtree(folder)


def relative(path: Path) -> str:
    """The path as a stack file names a capacity record: relative to the project."""
    return str(path.relative_to(PROJECT_DIR))


def write_record(
    folder: Path, rps_tenths: int, p50_ms: int | None, variant: str = "original", **changes: object
) -> Path:
    """A measured T4 record at the stack's 100 ms SLO serving rps_tenths / 10 requests/s per GPU."""
    record = {
        "schema": SCHEMA,
        "gpu": "nvidia-tesla-t4",
        "variant": variant,
        "image_tag": "25.06-py3",
        "slo_latency_ms": 100.0,
        "slo_percentile": 95.0,
        "max_failure_percent": 1.0,
        "max_rps_per_gpu": rps_tenths / 10,
        "batch": None,
        "p50_ms": None if p50_ms is None else float(p50_ms),
        "p95_ms": None,
        "source": "measured",
        "method": "written by tests/unit/settings/test_capacity.py",
        "measured_at": "2026-01-01",
        "revision": 1,
    } | changes
    assert set(record) == set(FILE_KEYS)
    path = folder / f"{variant}.json"
    path.write_text(json.dumps(record))
    return path


def expected(target: int, headroom: int, rps_tenths: int, gpus: int, p50_ms: int | None) -> tuple[int, int, int]:
    """(GPU nodes, LB rate per pod, HPA target in us) in whole numbers, independent of settings/capacity.py: nodes
    for the target with headroom, and enough that pods at their whole capacity accept it; the rate a pod's capacity
    over the headroom, but at least the target's share of the minimum size."""
    node_tenths = rps_tenths * gpus  # requests/s per node x 10
    whole = node_tenths // 10  # a pod's capacity rounded down (0: refused)
    nodes = -(-(target * (100 + headroom) * 10) // (100 * node_tenths))  # ceil
    nodes = max(nodes, -(-target // whole)) if whole else nodes
    rate = max((node_tenths * 100) // (10 * (100 + headroom)), -(-target // nodes))  # floor, ceil
    queue_us = ALERT_MS * 1000 if p50_ms is None else min(p50_ms, ALERT_MS) * 1000
    hpa_us = DELAY_US + ((queue_us - DELAY_US) * 100) // (100 + headroom)  # floor (D is whole)
    return nodes, rate, hpa_us


def per_pod_rates(plan: Plan) -> dict[tuple[str, str], Fraction]:
    """(zone, NEG name less its port) -> maxRatePerEndpoint summed over the backend services on those pods."""
    totals: dict[tuple[str, str], Fraction] = {}
    for service in plan.of_type(BACKEND):
        for backend in service.inputs["backends"]:
            zone, neg = re.search(r"zones/([^/]+)/networkEndpointGroups/([^/]+)$", backend["group"]).groups()
            pods = (zone, neg.rsplit("-", 1)[0])
            totals[pods] = totals.get(pods, Fraction(0)) + Fraction(repr(backend["maxRatePerEndpoint"]))
    return totals


def derived_in_plan(plan: Plan) -> tuple[set[int], set[int], set[str], set[int]]:
    """(GPU pools' totalMinNodeCount, the rate the backends offer a pod over both protocols (lbMaxRatePerPod),
    HPA averageValue, HPA minReplicas)."""
    gpu_pools = [p for p in plan.of_type(NODE_POOL) if p.name.endswith("-gpu")]
    pools = {int(p.inputs["autoscaling"]["totalMinNodeCount"]) for p in gpu_pools}
    rates = {math.ceil(total) for total in per_pod_rates(plan).values()}  # the split rounds each share down
    hpas = plan.of_type(HPA)
    targets = {h.inputs["spec"]["metrics"][0]["pods"]["target"]["averageValue"] for h in hpas}
    return pools, rates, targets, {int(h.inputs["spec"]["minReplicas"]) for h in hpas}


# dev with the load balancer on and room to grow: one region, so one plan is quick.
ROOMY = {"globalLoadBalancer": True, "gpuMaxNodes": 40}


@settings(max_examples=25, deadline=None)
@given(
    target=st.integers(min_value=1, max_value=20_000),
    headroom=st.integers(min_value=0, max_value=200),
    rps_tenths=st.integers(min_value=10, max_value=30_000),
    gpus=st.sampled_from([1, 2, 4]),
    p50_ms=st.none() | st.integers(min_value=21, max_value=99),
)
def test_target_headroom_and_record_size_pools_lb_and_hpa(
    in_project: Path, target: int, headroom: int, rps_tenths: int, gpus: int, p50_ms: int | None
) -> None:
    record = write_record(Path(tempfile.mkdtemp(dir=in_project)), rps_tenths, p50_ms)
    nodes, rate, hpa_us = expected(target, headroom, rps_tenths, gpus, p50_ms)
    machine = {1: "n1-standard-4", 2: "n1-standard-8", 4: "n1-standard-16"}[gpus]
    overrides = ROOMY | {
        "targetRps": target,
        "capacityHeadroomPercent": headroom,
        "capacityRecord": relative(record),
        "gpuAcceleratorCount": gpus,
        "gpuMachineType": machine,
    }
    positive = rps_tenths * gpus >= 10
    reachable, coherent = nodes <= ROOMY["gpuMaxNodes"], DELAY_US < hpa_us < ALERT_MS * 1000
    event("planned" if reachable and coherent and positive else "refused")
    if not (reachable and coherent and positive):
        with pytest.raises(ConfigError) as refused:
            load_stack_settings(stack_settings("dev", **overrides), stack="dev")
        message = str(refused.value)
        assert "\n" not in message
        if not positive:
            assert message.startswith("triton-gke:targetRps:") and "below 1 req/s per pod" in message
        elif not reachable:
            assert message.startswith("triton-gke:gpuMaxNodes: 40 nodes cannot serve triton-gke:targetRps=")
            assert f"needs {nodes} (" in message and relative(record) in message
        else:
            assert message.startswith("triton-gke:targetRps: HPA target") and "SLO knobs must nest" in message
        return
    pools, rates, targets, min_replicas = derived_in_plan(evaluate("dev", **overrides))
    assert pools == {nodes} and min_replicas == {nodes}
    assert rates == {rate}
    assert targets == {str(hpa_us)}
    assert nodes * rate >= target  # the load balancer accepts the target at the minimum size


@settings(max_examples=60, deadline=None)
@given(
    target=st.integers(min_value=1, max_value=10**6),
    headroom=st.integers(min_value=0, max_value=sizing.MAX_HEADROOM_PERCENT),
    hundredths=st.integers(min_value=100, max_value=10**8),  # req/s per node x 100: 1 to 1e6 (the record's bounds)
)
def test_the_minimum_size_accepts_the_target_and_no_pod_gets_more_than_it_serves(
    target: int, headroom: int, hundredths: int
) -> None:
    capacity = Fraction(hundredths, 100)
    nodes = sizing.nodes_for(target, headroom, capacity)
    rate = sizing.lb_rate_per_pod(target, headroom, capacity, nodes)
    assert nodes * rate >= target and 1 <= rate <= capacity
    assert rate == max(math.floor(capacity * 100 / (100 + headroom)), math.ceil(Fraction(target, nodes)))
    assert nodes * capacity >= target * Fraction(100 + headroom, 100)  # the headroom is provisioned


def test_five_nodes_at_1012_get_203_not_202_per_pod() -> None:
    """The tester's case: 5 x floor(253 / 1.25) = 1010 < 1012 left 2 req/s of the target with nowhere to go."""
    sized = load_stack_settings(stack_settings("staging", targetRps=1012, gpuMaxNodes=5), stack="staging")
    assert (sized.gpu_pool.min_nodes, sized.load_balancer.max_rate_per_pod) == (5, 203)
    plan = evaluate("staging", targetRps=1012, gpuMaxNodes=5)
    assert derived_in_plan(plan)[1] == {203}


def test_without_a_target_the_explicit_counts_stand_and_the_record_changes_nothing(in_project: Path) -> None:
    record = write_record(in_project, 5000, 40)
    plan = evaluate("staging", capacityRecord=relative(record), capacityHeadroomPercent=80)
    assert derived_in_plan(plan) == ({1}, {1000}, {"30000"}, {1})


def test_a_derived_key_left_at_its_default_value_is_not_a_second_answer() -> None:
    """Under `pulumi up` the engine passes Pulumi.yaml's defaults as set keys; the same value means the same stack."""
    sized = load_stack_settings(stack_settings("staging", targetRps=300, lbMaxRatePerPod=1000), stack="staging")
    assert sized.load_balancer.max_rate_per_pod == 202  # floor(253 / 1.25), from the reference record


@pytest.mark.parametrize(
    ("overrides", "first_words", "named"),
    [
        ({"targetRps": 1000}, "triton-gke:gpuMaxNodes: 3 nodes cannot serve triton-gke:targetRps=1000", ["needs 5"]),
        ({"targetRps": 300, "lbMaxRatePerPod": 300}, "triton-gke:lbMaxRatePerPod: 300 set together", ["targetRps"]),
        ({"targetRps": 300, "gpuMinNodes": 2}, "triton-gke:gpuMinNodes: 2 set together", ["targetRps"]),
        ({"autoscaleQueueTimeMs": 20}, "triton-gke:autoscaleQueueTimeMs: 20 ms is not above", ["modelMaxQueueDelayUs"]),
        ({"modelMaxQueueDelayUs": 40000}, "triton-gke:modelMaxQueueDelayUs: 40000 us is not below", ["30 ms"]),
        ({"sloQueueTimeMs": 25}, "triton-gke:sloQueueTimeMs: 25 ms is not above", ["autoscaleQueueTimeMs (30 ms)"]),
        ({"sloLatencyMs": 50}, "triton-gke:sloLatencyMs: 50 ms is not above", ["sloQueueTimeMs (50 ms)"]),
        ({"targetRps": 10, "sloLatencyMs": 200}, "triton-gke:targetRps: 10 needs a capacity record", ["200 ms"]),
        ({"capacityVariant": "trt_fp16", "capacityRecord": ORIGINAL_RECORD}, "triton-gke:capacityRecord:", ["fp16"]),
        ({"capacityVariant": "resnet"}, "triton-gke:capacityVariant: 'resnet' is not valid", ["modelVariants"]),
        ({"capacityHeadroomPercent": 1001}, "triton-gke:capacityHeadroomPercent: 1001 is not valid", ["1000"]),
    ],
)
def test_make_plan_refuses_in_one_line_with_exit_2(
    overrides: dict[str, object],
    first_words: str,
    named: list[str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    args = ["--stack", "staging", "--out", str(tmp_path / "plan")]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    assert plan_command.main(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {first_words}"), captured.err
    assert all(part in lines[0] for part in named), lines[0]
    assert captured.out == ""


KNOB_MS = st.integers(min_value=1, max_value=200)


@settings(max_examples=60, deadline=None)
@given(delay_ms=KNOB_MS, hpa_ms=KNOB_MS, alert_ms=KNOB_MS, slo_ms=KNOB_MS)
def test_slo_knobs_are_accepted_exactly_when_they_nest(delay_ms: int, hpa_ms: int, alert_ms: int, slo_ms: int) -> None:
    knobs = {
        "modelMaxQueueDelayUs": delay_ms * 1000,
        "autoscaleQueueTimeMs": hpa_ms,
        "sloQueueTimeMs": alert_ms,
        "sloLatencyMs": slo_ms,
    }
    try:
        loaded = load_stack_settings(stack_settings("staging", **knobs), stack="staging")
    except ConfigError as err:
        message = str(err)
        assert "\n" not in message and "the SLO knobs must nest" in message
        knob = "modelMaxQueueDelayUs|autoscaleQueueTimeMs|sloQueueTimeMs|sloLatencyMs"
        assert re.match(rf"triton-gke:({knob}): ", message)
        loaded = None
    assert (loaded is not None) == (delay_ms < hpa_ms < alert_ms < slo_ms)
    if loaded is not None:
        assert loaded.monitoring.slo.queue_ms == alert_ms and loaded.serving.queue_time_target_us == hpa_ms * 1000


def test_the_shipped_stacks_keep_their_knobs_nested() -> None:
    for stack in ("dev", "staging", "prod"):
        assert load_stack_settings(stack_settings(stack), stack=stack).capacity.target_rps == 0


def _capacity_rows(output: str) -> dict[str, list[str]]:
    table = output[output.index("\nCapacity of ") :]
    return {m[1]: m[2].split() for m in re.finditer(r"^  ([a-z]+-[a-z]+\d)\s+(.*)$", table, flags=re.M)}


def test_plan_prints_a_capacity_table_at_the_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert plan_command.main(["--stack", "staging", "--out", str(out), "--set", "targetRps=500"]) == 0
    output = capsys.readouterr().out
    assert f"253 req/s per node, from the reference record {ORIGINAL_RECORD}" in output
    assert "Sized for targetRps 500 req/s per region with 25 % headroom: GPU minimum 3 nodes" in output
    rows = _capacity_rows(output)
    assert set(rows) == {"us-central1", "europe-west4"}
    for target, nodes, serves, on_demand_h, on_demand_m, spot_h, spot_m in rows.values():
        assert (target, nodes, serves) == ("500", "3/3", "759.0-759.0")  # ceil(500 x 1.25 / 253) = 3 nodes
        for per_hour, per_million in ((on_demand_h, on_demand_m), (spot_h, spot_m)):
            if per_hour == "n/a":  # a price infra/data lacks (n1-standard-4 Spot in europe-west4)
                assert per_million == "n/a"
                continue
            assert float(per_million) == pytest.approx(float(per_hour) / (500 * 3600) * 1e6, abs=1e-4)
    us_spot, us_on_demand = rows["us-central1"][5], rows["us-central1"][3]
    assert float(us_spot) < float(us_on_demand)


def test_without_a_target_the_table_shows_what_the_explicit_nodes_serve(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "plan"
    assert plan_command.main(["--stack", "dev", "--out", str(out)]) == 0
    output = capsys.readouterr().out
    assert "No targetRps: the explicit gpuMinNodes and gpuMaxNodes" in output
    [(target, nodes, serves, *_)] = _capacity_rows(output).values()
    assert (target, nodes, serves) == ("-", "1/1", "253.0-253.0")


@settings(max_examples=6, deadline=None)
@given(rate=st.integers(min_value=1, max_value=600))
def test_without_a_target_an_lb_rate_above_a_pods_capacity_is_flagged(rate: int) -> None:
    """With explicit counts, a load balancer that fills each pod beyond its SLO capacity (253 req/s for original on a
    T4, the reference record) is worth a warning in the table: the region never spills to another in time."""
    stack = load_stack_settings(stack_settings("prod", lbMaxRatePerPod=rate), stack="prod")
    table = plan_command.capacity_table(stack)
    assert ("Warning: lbMaxRatePerPod" in table) == (rate > 253), table
    without_lb = load_stack_settings(stack_settings("dev", lbMaxRatePerPod=rate), stack="dev")
    assert "Warning" not in plan_command.capacity_table(without_lb)  # dev has no global load balancer


def test_json_output_stays_a_json_array_with_a_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert plan_command.main(["--stack", "staging", "--json", "--out", str(out), "--set", "targetRps=500"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert isinstance(records, list) and all("type" in r for r in records)


def plan_refusal(capsys: pytest.CaptureFixture[str], out: Path, *sets: str) -> str:
    """`make plan`'s command on staging with the --set pairs: exit 2 and one line on stderr, nothing on stdout."""
    args = ["--stack", "staging", "--out", str(out)]
    for pair in sets:
        args += ["--set", pair]
    assert plan_command.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1, captured.err
    return captured.err.strip()


def test_capacity_record_must_lie_in_the_project(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, in_project: Path
) -> None:
    """Pulumi.yaml: "relative to the project"; a path out of it sized from one machine's file."""
    outside = write_record(tmp_path, 2530, None)
    link = in_project / "link-out.json"
    link.symlink_to(outside)
    refusals = {
        str(outside): "is not valid; an absolute path; give the record's path relative to the project",
        "../x.json": "is not valid; a '..' component; give the record's path within the project",
        relative(link): f"is not valid; resolves to {outside}, outside the project",
    }
    for named, why in refusals.items():
        line = plan_refusal(capsys, tmp_path / "plan", "targetRps=300", f"capacityRecord={named}")
        assert line == f"error: triton-gke:capacityRecord: {named!r} {why}"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"slo_percentile": 50.0, "max_failure_percent": 99.0}, "it is for p50; the stack's SLO is p95"),
        ({"max_failure_percent": 99.0}, "it allows 99 % failures; the stack's SLO allows 1 % (sloMaxFailurePercent)"),
        ({"slo_latency_ms": 99.9999999}, "SLO 99.9999999 ms; the stack needs gpu nvidia-tesla-t4, variant original"),
    ],
)
def test_a_named_record_of_another_slo_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, in_project: Path, changes: dict[str, float], why: str
) -> None:
    record = write_record(Path(tempfile.mkdtemp(dir=in_project)), 9990, None, **changes)
    for target in ("targetRps=300", "targetRps=0"):
        line = plan_refusal(capsys, tmp_path / "plan", target, f"capacityRecord={relative(record)}")
        assert line.startswith(f"error: triton-gke:capacityRecord: {relative(record)!r} is not valid;") and why in line


def test_the_automatic_lookup_skips_a_record_of_a_looser_failure_budget(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The shipped records allow 1 % failures: a stack allowing none finds no record, and says why."""
    line = plan_refusal(capsys, tmp_path / "plan", "targetRps=300", "sloMaxFailurePercent=0")
    assert line.startswith("error: triton-gke:targetRps: 300 needs a capacity record: no capacity record for gpu")
    assert "skipped: it allows 1 % failures; the stack's SLO allows 0 % (sloMaxFailurePercent)" in line
    assert (
        plan_command.main(["--stack", "staging", "--out", str(tmp_path / "p2"), "--set", "sloMaxFailurePercent=0"]) == 0
    )
    assert "Capacity: no record for original, so no table: " in capsys.readouterr().out


@pytest.mark.parametrize("target", ["targetRps=0", "targetRps=300"])
def test_a_broken_committed_record_fails_every_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """A corrupt file beside the records (not the one that applies) was 'no record, so no table' and exit 0."""
    records = tmp_path / "records"
    shutil.copytree(RECORDS_DIR, records)
    text = (
        (records / Path(ORIGINAL_RECORD).name).read_text().replace('"max_rps_per_gpu": 253.0', '"max_rps_per_gpu": NaN')
    )
    bad = "zz-bad__original__x__slo-100ms.json"  # a record's name: only such files are records (hidden ones are not)
    (records / bad).write_text(text)
    monkeypatch.setattr(sizing, "RECORDS_DIR", records)
    line = plan_refusal(capsys, tmp_path / "plan", target)
    assert line.startswith(f"error: capacity record {records / bad}: NaN is not JSON"), line


def test_the_sizing_line_names_the_hpas_derived_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["--stack", "staging", "--out", str(tmp_path / "plan"), "--set", "targetRps=500"]
    assert plan_command.main(args) == 0
    assert "lbMaxRatePerPod 202, HPA queue-time target 44 ms (derived)" in capsys.readouterr().out


def test_what_the_nodes_serve_is_shown_to_one_decimal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """trt_fp16's reference is 1072.5 req/s: 1 to 3 nodes serve 1072.5-3217.5 (it showed 1072-3218)."""
    args = ["--stack", "staging", "--out", str(tmp_path / "plan"), "--set", "capacityVariant=trt_fp16"]
    assert plan_command.main(args) == 0
    rows = _capacity_rows(capsys.readouterr().out)
    assert {row[2] for row in rows.values()} == {"1072.5-3217.5"}
