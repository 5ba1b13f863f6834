"""Each naming and bound rule has one home, and the sides that ask it agree (issue 34): bucket names (the component's
model_repository and the sync's destination), Triton's replica bounds (the stack's gpuMaxNodes and the component's
max_replicas) and the SLO's latency bound (the stack, the monitoring component, `bench --slo-ms`, capacity records)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.settings_probes import largest_gpu_max_nodes
from tests.support.stacks import evaluate
from triton_gke.bench.__main__ import FLOAT_RANGES
from triton_gke.capacity.records import BOUNDS
from triton_gke.contracts.gke_limits import MAX_TRITON_REPLICAS
from triton_gke.contracts.naming import BUCKET_NAME_MAX, BUCKET_NAME_MAX_DOTTED, bucket_name_problem
from triton_gke.contracts.slo import MAX_SLO_LATENCY_MS
from triton_gke.k8s import on_cluster_args
from triton_gke.k8s.on_cluster import DEFAULT_ACCELERATOR
from triton_gke.model_repo.sync import SyncError, parse_gs_url
from triton_gke.observability.settings import MonitoringError, SloSettings
from triton_gke.settings import stack as stack_module
from triton_gke.settings.catalogue import DEFAULT_GPU_CATALOGUE, load_gpu_catalogue
from triton_gke.settings.monitoring import MAX_SLO_MS

# Names near every edge of the rule: lengths around 3, 63 and 222, dots, upper case, "goog", IP addresses.
PARTS = st.text(alphabet="abz09-_", min_size=1, max_size=70)
BUCKETISH = st.one_of(
    st.text(alphabet="abz09-_.Gog", min_size=0, max_size=240),
    st.lists(PARTS, min_size=1, max_size=5).map(".".join),
    st.sampled_from(["goog-models", "my-g00gle-bucket", "192.168.1.1", "a" * 63, "a" * 64, "ab", "a.b"]),
)


def component_accepts(bucket: str) -> bool:
    return on_cluster_args.repository_problem(f"gs://{bucket}/models") is None


def sync_accepts(bucket: str) -> bool:
    try:
        parse_gs_url(f"gs://{bucket}/models")
    except SyncError:
        return False
    return True


@given(BUCKETISH)
def test_the_component_and_the_sync_accept_the_same_bucket_names(bucket: str) -> None:
    assert component_accepts(bucket) == sync_accepts(bucket) == (bucket_name_problem(bucket) is None), bucket


@pytest.mark.parametrize(
    ("bucket", "valid"),
    [
        ("a" * BUCKET_NAME_MAX, True),
        ("a" * (BUCKET_NAME_MAX + 1), False),  # no dots: 63 at most
        (".".join(["a" * 63] * 3) + ".ab", True),  # 194 characters with dots (the sync refused it before)
        ("a" * 63 + "." + "a" * 64, False),  # a part over 63
        (".".join(["a" * 55] * 4)[:-1], True),  # 222 characters with dots: the longest
        (".".join(["a" * 55] * 4), False),  # 223: only the dotted limit refuses it
    ],
)
def test_bucket_name_edges(bucket: str, valid: bool) -> None:
    assert len(bucket) <= BUCKET_NAME_MAX_DOTTED or not valid
    why = bucket_name_problem(bucket)
    assert component_accepts(bucket) is valid and sync_accepts(bucket) is valid, (len(bucket), why)


def test_the_largest_gpu_pool_the_settings_accept_is_a_replica_count_the_component_accepts() -> None:
    """Triton runs one pod per GPU node: the stack passes gpuMaxNodes as max_replicas, so every gpuMaxNodes the
    settings accept must be a max_replicas the component accepts. Asked of the settings for a region of each zone
    count the shipped T4 catalogue has (the bound grows with the zones), so a settings bound that moves is seen."""
    catalogue = load_gpu_catalogue(DEFAULT_GPU_CATALOGUE)
    by_zones = {
        len(catalogue.zones_with(DEFAULT_ACCELERATOR, r)): r for r in catalogue.regions_with(DEFAULT_ACCELERATOR)
    }
    for count, region in sorted(by_zones.items()):
        most = largest_gpu_max_nodes(stack_module, region, catalogue.zones_with(DEFAULT_ACCELERATOR, region))
        args = {"min_replicas": 1, "max_replicas": most}
        assert on_cluster_args.whole_number_problem("max_replicas", most, args) is None, (region, count, most)
    too_many = MAX_TRITON_REPLICAS + 1
    assert on_cluster_args.whole_number_problem("max_replicas", too_many, {"max_replicas": too_many})


def test_a_three_zone_stack_with_1001_gpu_nodes_plans() -> None:
    """staging's regions have three T4 zones each: 1,001 GPU nodes pass the settings (3,000 allowed) and, since the
    component shares the bound, the program too (it refused max_replicas above 1,000 before)."""
    plan = evaluate("staging", gpuMaxNodes=1001)
    hpas = [r for r in plan.resources if r.type == "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"]
    assert hpas and all(r.inputs["spec"]["maxReplicas"] == 1001 for r in hpas)


def test_every_reader_of_the_slo_shares_one_ceiling() -> None:
    assert MAX_SLO_MS == MAX_SLO_LATENCY_MS
    assert FLOAT_RANGES["slo_ms"][1] == MAX_SLO_LATENCY_MS
    assert BOUNDS["slo_latency_ms"][1] == MAX_SLO_LATENCY_MS
    SloSettings(latency_ms=MAX_SLO_LATENCY_MS)
    with pytest.raises(MonitoringError):
        SloSettings(latency_ms=MAX_SLO_LATENCY_MS + 1)


@given(st.integers(min_value=1, max_value=2 * MAX_SLO_LATENCY_MS))
def test_the_stack_and_the_monitoring_component_accept_the_same_slo(latency_ms: int) -> None:
    try:
        SloSettings(latency_ms=latency_ms)
    except MonitoringError:
        component = False
    else:
        component = True
    assert component == (latency_ms <= MAX_SLO_MS)


# ---------------------------------------------------------------- variant names

VARIANTISH = st.one_of(
    st.text(alphabet="aZ09_.-\n é/", min_size=0, max_size=70),
    st.sampled_from(["original", "trt_int8_b16x4", "a" * 64, "a" * 65, "-x", ".x", "x\n", "x/y", ".."]),
)


def repository_accepts(name: str) -> bool:
    from triton_gke.model_repo.errors import ModelRepoError
    from triton_gke.model_repo.settings import VariantSettings, _validate_variant

    try:
        _validate_variant(VariantSettings(name, "FP32", 8, 4, 100, 1))
    except ModelRepoError as err:
        return "variant name" not in str(err)
    return True


def record_accepts(name: str) -> bool:
    from triton_gke.capacity.records import _VARIANT_RE

    return _VARIANT_RE.fullmatch(name) is not None


@given(VARIANTISH)
def test_the_repository_and_the_capacity_records_accept_the_same_variant_names(name: str) -> None:
    assert repository_accepts(name) == record_accepts(name)


def test_a_variant_name_with_a_trailing_line_break_is_refused() -> None:
    """`$` matches before a final newline: the shared rule is used with fullmatch, so "x\\n" is no model folder."""
    assert not repository_accepts("original\n") and not record_accepts("original\n")
