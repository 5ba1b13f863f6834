"""Capacity: a target request rate sizes each region from a capacity record; the SLO knobs must nest.

With `targetRps` set, the record of the served variant (capacity/records/, or the file `capacityRecord` names) says
how many requests/s one GPU serves at the stack's SLO, and the stack derives from it, per region: the GPU pool's
minimum, the load balancer's rate per pod and the HPA's queue-time target. Without a target the explicit
gpuMinNodes, lbMaxRatePerPod and autoscaleQueueTimeMs apply, and the record (when one exists) only fills the
capacity table of `make plan`.

The arithmetic is exact (fractions), so a node count never flips on a float's last bit.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

from triton_gke.capacity.records import (
    RECORDS_DIR,
    CapacityError,
    CapacityRecord,
    NoRecordError,
    escaped,
    find_record,
    image_mismatch,
    load_record,
    load_records,
    number,
    percent_of,
    slo_mismatch,
)
from triton_gke.contracts.paths import PACKAGE_DIR, project_dir
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.reader import Reader
from triton_gke.settings.values import CapacitySettings, StackSettings

# The keys a target derives: set beside targetRps they would give the stack two answers, so both are refused.
DERIVED_KEYS = ("gpuMinNodes", "lbMaxRatePerPod", "autoscaleQueueTimeMs")
# A factor of 11 is no longer headroom but a different target.
MAX_HEADROOM_PERCENT = 1000
# More requests/s than any cluster GKE allows could serve: 15,000 nodes (contracts/gke_limits.py) of
# 4 T4s at the fastest variant's few thousand requests/s each stay below 10^9. A larger target is a typo, and an
# unbounded one would overflow the sizing arithmetic's floats.
MAX_TARGET_RPS = 10**9


def sized(reader: Reader, settings: StackSettings) -> StackSettings:
    """The settings with the capacity read and, with a target, the derived pool minimum, LB rate and HPA target."""
    target = reader.integer(
        "targetRps", maximum=MAX_TARGET_RPS, too_large=f"expected at most {MAX_TARGET_RPS} requests/s"
    )
    headroom = _headroom_percent(reader)
    if target:
        _refuse_derived_keys_set(reader, target)
    variant = _variant(reader, settings)
    record, missing = _record(reader, settings, variant, target)
    capacity = CapacitySettings(target_rps=target, headroom_percent=headroom, variant=variant, missing=missing)
    if record is not None:
        capacity = dataclasses.replace(
            capacity,
            # A record of another image tag is the best estimate there is, but never silently: the plan's capacity
            # line and every message quoting the record name the mismatch.
            record_path=_shown_path(record.path) + _mismatch_note(record, settings.model_repo.triton_image_tag),
            record_source=record.source,
            rps_per_gpu=record.max_rps_per_gpu,
            rps_per_node=float(per_node(record, settings.gpu_pool.accelerator_count)),
        )
    settings = dataclasses.replace(settings, capacity=capacity)
    if target and record is not None:
        settings = _derive(reader, settings, record)
    check_slo_knobs(reader, settings)
    return settings


def _mismatch_note(record: CapacityRecord, image_tag: str) -> str:
    mismatch = image_mismatch(record, image_tag)
    return f" ({mismatch})" if mismatch else ""


def factor(headroom_percent: int) -> Fraction:
    """capacityHeadroomPercent as the factor provisioned capacity stands to the target (25 -> 5/4)."""
    return Fraction(100 + headroom_percent, 100)


def per_node(record: CapacityRecord, gpus_per_node: int) -> Fraction:
    """Requests/s one GPU node serves at the SLO: one Triton pod per node uses all its GPUs (k8s/triton.py asks for
    gpus_per_node), and capacity is taken as linear in GPUs and pods. The reference architecture makes the same
    assumption: one pod per GPU node, scaled out by adding nodes, measured on one
    (https://cloud.google.com/architecture/scalable-tensorflow-inference-system and its measure-deployment page)."""
    return _exact(record.max_rps_per_gpu) * gpus_per_node


def nodes_for(target_rps: int, headroom_percent: int, rps_per_node: Fraction) -> int:
    """GPU nodes a region needs: the target with its headroom over what one node serves, rounded up; and at least
    enough that pods limited to their whole capacity (floor: lbMaxRatePerPod is a whole number) accept the target,
    which only adds a node with little headroom and a fractional capacity (0 %, 253.4 req/s, target 507: 3 nodes,
    not 2 that would need 254 req/s each). Needs rps_per_node >= 1 (_derive refuses less)."""
    with_headroom = math.ceil(target_rps * factor(headroom_percent) / rps_per_node)
    return max(with_headroom, math.ceil(target_rps / math.floor(rps_per_node)))


def lb_rate_per_pod(target_rps: int, headroom_percent: int, rps_per_node: Fraction, nodes: int) -> int:
    """The backend's maxRatePerEndpoint, the most requests/s the load balancer sends one pod before it sends the
    next to another region (RATE balancing mode,
    https://cloud.google.com/load-balancing/docs/backend-service#rate_balancing_mode):

        rate = max(floor(capacity / factor), ceil(targetRps / nodes))

    A pod's capacity over the headroom factor, rounded down, so a region spills before its pods reach their SLO
    capacity; but never so low that the minimum size, `nodes` pods, accepts less than the target (5 nodes x
    floor(253 / 1.25) = 1010 < 1012: the rate becomes 203). It stays <= capacity: nodes_for makes nodes >=
    targetRps / floor(capacity). So nodes x rate >= targetRps and rate <= capacity, always.

    It is the pod's rate over both protocols: the HTTP and the gRPC backend service reach the same pods and each
    counts only its own requests, so settings/load_balancer.py backend_rates splits it between them (even shares by
    default) and the two maxRatePerEndpoint add up to at most this rate."""
    return max(math.floor(rps_per_node / factor(headroom_percent)), math.ceil(Fraction(target_rps, nodes)))


def queue_at_capacity_us(record: CapacityRecord, alert_ms: float) -> Fraction:
    """Q, the queue time per request (us) taken for a pod at the record's capacity: its p50 latency there (the whole
    latency bounds its queue share; the record does not split them), capped at sloQueueTimeMs, the queueing the stack
    calls overload (GpuIdleWhileRequestsQueue). A record without p50_ms (most published figures) gives the cap."""
    cap = _exact(alert_ms) * 1000
    return cap if record.p50_ms is None else min(_exact(record.p50_ms) * 1000, cap)


def hpa_target_us(record: CapacityRecord, headroom_percent: int, delay_us: int, alert_ms: float) -> int:
    """The HPA's queue-time target (us per request) derived from the record.

    Queue time per request rises with a pod's load from D, the batcher's delay (a lone request waits D for a batch
    to fill), to Q at the record's capacity (queue_at_capacity_us). The HPA treats its metric as proportional to
    load: desiredReplicas = ceil(currentReplicas x currentMetric / target)
    (https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/#algorithm-details). Taking
    queue time linear in load from D to Q, a pod at capacity / factor (the rate the load balancer gives it before
    spilling to another region) queues D + (Q - D) / factor: that is the target, so the HPA adds a pod where the
    load balancer starts spilling:
        target_us = floor(D + (Q - D) / factor)   e.g. D 20 ms, Q 50 ms, 25 % headroom -> 20 + 30 / 1.25 = 44 ms
    It lies above D when Q does, and at most Q <= sloQueueTimeMs; check_slo_knobs checks the strict order.
    """
    queue_us = queue_at_capacity_us(record, alert_ms)
    return math.floor(delay_us + (queue_us - delay_us) / factor(headroom_percent))


def _exact(value: float) -> Fraction:
    # The decimal the record file shows (344.4), not the binary float nearest to it.
    return Fraction(repr(value))


def _headroom_percent(reader: Reader) -> int:
    percent = reader.integer("capacityHeadroomPercent")
    if percent > MAX_HEADROOM_PERCENT:
        raise reader.fail(
            "capacityHeadroomPercent", percent, f"expected 0 to {MAX_HEADROOM_PERCENT} (percent above targetRps)"
        )
    return percent


def is_set(reader: Reader, key: str) -> bool:
    """Whether the stack gives `key` a value other than Pulumi.yaml's default.

    Not "whether the key is present": under `pulumi up` the engine merges every project-level default into the
    config the program receives (the merge order pgavlin describes in https://github.com/pulumi/pulumi/issues/14499),
    so a key at its default looks set there and unset in the plan. A value equal to the default means the same
    stack either way.
    """
    return reader.raw(key) != reader.keys[key].default


def _refuse_derived_keys_set(reader: Reader, target: int) -> None:
    for key in DERIVED_KEYS:
        if is_set(reader, key):
            raise ConfigError(
                f"{reader.full(key)}: {reader.raw(key)} set together with {reader.full('targetRps')}={target}, "
                "which derives it from the capacity record; remove one of them"
            )


def _variant(reader: Reader, settings: StackSettings) -> str:
    served = [v.name for v in settings.model_repo.variants]
    variant = reader.string("capacityVariant") or settings.load_test.model
    if variant not in served:
        raise reader.fail("capacityVariant", variant, f"not a served model; modelVariants: {', '.join(served)}")
    return variant


def _record(reader: Reader, settings: StackSettings, variant: str, target: int) -> tuple[CapacityRecord | None, str]:
    """(the record, "") or, when none applies and no target needs one, (None, why). A broken file among the
    committed records fails every plan, whichever record applies: it is the project's data, and the next stack to
    look for its key would otherwise size from nothing."""
    gpu = settings.gpu_pool.accelerator_type
    slo_ms = settings.monitoring.slo.latency_ms
    try:
        load_records(RECORDS_DIR)
    except CapacityError as err:
        raise ConfigError(f"capacity record {err} (every plan reads capacity/records/: fix or remove it)") from None
    named = reader.path("capacityRecord")
    if named:
        return _named_record(reader, named, gpu, variant, settings), ""
    try:
        tag = settings.model_repo.triton_image_tag
        return find_record(gpu, variant, slo_ms, image_tag=tag, records_dir=RECORDS_DIR, slo=stack_slo(settings)), ""
    except NoRecordError as err:
        if target:
            raise ConfigError(f"{reader.full('targetRps')}: {target} needs a capacity record: {err}") from None
        return None, str(err)


def stack_slo(settings: StackSettings) -> tuple[float, float]:
    """(latency percentile, failure percent) of the stack's SLO, as a record states them: 95 and 1 by default
    (SloSettings.quantile 0.95, sloMaxFailurePercent)."""
    slo = settings.monitoring.slo
    return percent_of(slo.quantile), percent_of(slo.max_failure_ratio)  # as bench writes them: the same decimals


def _project_file(reader: Reader, named: str) -> Path:
    """capacityRecord as a file of the project: Pulumi.yaml says "relative to the project", and a stack file is
    shared, so it must not size from whatever a path outside the checkout (absolute, `..`, a link out) holds on one
    machine."""
    if Path(named).is_absolute():
        raise reader.fail("capacityRecord", named, "an absolute path; give the record's path relative to the project")
    if ".." in Path(named).parts:  # even one that comes back in (mine/../mine/x.json): README says '..' is refused
        raise reader.fail("capacityRecord", named, "a '..' component; give the record's path within the project")
    path = (project_dir() / named).resolve()
    if not path.is_relative_to(project_dir().resolve()):
        raise reader.fail("capacityRecord", named, f"resolves to {escaped(path)}, outside the project")
    return path


def _named_record(reader: Reader, named: str, gpu: str, variant: str, settings: StackSettings) -> CapacityRecord:
    path = _project_file(reader, named)
    try:
        record = load_record(path)
    except CapacityError as err:
        raise reader.fail("capacityRecord", named, str(err)) from None
    slo_ms = settings.monitoring.slo.latency_ms
    if record.slo_key != (gpu, variant, float(slo_ms)):
        raise reader.fail(
            "capacityRecord",
            named,
            f"it is for gpu {record.gpu}, variant {record.variant}, SLO {number(record.slo_latency_ms)} ms; the "
            f"stack needs gpu {gpu}, variant {variant} (capacityVariant), SLO {slo_ms} ms (sloLatencyMs)",
        )
    mismatch = slo_mismatch(record, *stack_slo(settings))
    if mismatch:
        raise reader.fail("capacityRecord", named, mismatch)
    return record


def _shown_path(path: Path) -> str:
    """A shipped record by its place in the package (capacity/records/..., the same in a checkout and installed);
    another relative to the project when it lies inside it (as the stack file would name it)."""
    path = Path(path).resolve()
    for base in (PACKAGE_DIR, project_dir()):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


def _derive(reader: Reader, settings: StackSettings, record: CapacityRecord) -> StackSettings:
    capacity, gpu = settings.capacity, settings.gpu_pool
    node_rps = per_node(record, gpu.accelerator_count)
    where = f"{float(node_rps):g} req/s per node from {capacity.record_path}"
    if node_rps < 1:
        raise ConfigError(
            f"{reader.full('targetRps')}: the record's capacity ({where}) is below 1 req/s per pod, "
            "the least lbMaxRatePerPod the load balancer takes"
        )
    nodes = nodes_for(capacity.target_rps, capacity.headroom_percent, node_rps)
    if nodes > gpu.max_nodes:
        raise ConfigError(
            f"{reader.full('gpuMaxNodes')}: {gpu.max_nodes} nodes cannot serve {reader.full('targetRps')}="
            f"{capacity.target_rps} at the SLO with {capacity.headroom_percent} % headroom: needs {nodes} ({where})"
        )
    rate = lb_rate_per_pod(capacity.target_rps, capacity.headroom_percent, node_rps, nodes)
    delay_us = max(v.max_queue_delay_us for v in settings.model_repo.variants)
    queue_us = hpa_target_us(record, capacity.headroom_percent, delay_us, settings.monitoring.slo.queue_ms)
    return dataclasses.replace(
        settings,
        gpu_pool=dataclasses.replace(gpu, min_nodes=nodes),
        load_balancer=dataclasses.replace(settings.load_balancer, max_rate_per_pod=rate),
        serving=dataclasses.replace(settings.serving, queue_time_target_us=queue_us),
    )


def check_slo_knobs(reader: Reader, settings: StackSettings) -> None:
    """modelMaxQueueDelayUs < autoscaleQueueTimeMs < sloQueueTimeMs < sloLatencyMs, strictly.

    Why each: a request the batcher holds for a batch to fill must not count as queueing, neither to the HPA (it
    would scale out an idle stack) nor to the GpuIdleWhileRequestsQueue alert; the HPA must act before that alert
    fires; and queueing that leaves no time to compute within the SLO is not an early warning. Checked in every
    monitoring mode: the alert exists in both, and an HPA target that breaks the order is wrong wherever it acts.
    """
    delay_us = max(v.max_queue_delay_us for v in settings.model_repo.variants)
    hpa_key = "targetRps" if settings.capacity.sized else "autoscaleQueueTimeMs"
    hpa_ms = Fraction(settings.serving.queue_time_target_us, 1000)
    slo = settings.monitoring.slo
    knobs = (
        ("modelMaxQueueDelayUs", Fraction(delay_us, 1000), f"{delay_us} us"),
        (hpa_key, hpa_ms, _hpa_shown(settings, hpa_ms)),
        ("sloQueueTimeMs", Fraction(slo.queue_ms), f"{slo.queue_ms:g} ms"),
        ("sloLatencyMs", Fraction(slo.latency_ms), f"{slo.latency_ms} ms"),
    )
    for (low_key, low, low_shown), (high_key, high, high_shown) in pairwise(knobs):
        if low < high:
            continue
        order = "modelMaxQueueDelayUs < autoscaleQueueTimeMs < sloQueueTimeMs < sloLatencyMs"
        # Name the lower key when the stack sets it (it is the one to lower), else the higher one: the lower may be
        # a default the user never wrote.
        if is_set(reader, low_key):
            raise ConfigError(
                f"{reader.full(low_key)}: {low_shown} is not below {reader.full(high_key)} ({high_shown}); "
                f"the SLO knobs must nest: {order}"
            )
        raise ConfigError(
            f"{reader.full(high_key)}: {high_shown} is not above {reader.full(low_key)} ({low_shown}); "
            f"the SLO knobs must nest: {order}"
        )


def _hpa_shown(settings: StackSettings, hpa_ms: Fraction) -> str:
    if not settings.capacity.sized:
        return f"{float(hpa_ms):g} ms"
    capacity = settings.capacity
    return (
        f"HPA target {float(hpa_ms):g} ms derived from {capacity.record_path} "
        f"with {capacity.headroom_percent} % headroom"
    )
