"""Values a real deploy rejects are refused by the config check: generated values for each bounded key.

Each test generates values (wrong types, unicode, zero, negative, huge, each limit +-1) and asserts the stack is
accepted exactly when the documented rule says so, else a ConfigError in one line naming the key. The rules are
written here from the documentation (sources next to each oracle), independently of settings/' code.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT
from tests.unit.model_repo.test_gpu_bounds import largest_fitting
from triton_gke.offline.runtime import config_string
from triton_gke.settings import catalogue, versions
from triton_gke.settings import from_stack_file as load_settings
from triton_gke.settings.errors import ConfigError

INT32_MAX = 2**31 - 1
EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(stack: str, today: datetime.date | None = None, **overrides: Any) -> str | None:
    """None when the stack is accepted, else the one-line refusal (kubernetesVersion judged on `today`)."""
    config = {f"{PROJECT}:{key}": config_string(value) for key, value in overrides.items()}
    try:
        load_settings(stack, config, today=today)
    except ConfigError as err:
        return str(err)
    return None


def assert_outcome(accepted: bool, refusal: str | None, key: str) -> None:
    if accepted:
        assert refusal is None, refusal
        return
    assert refusal is not None, f"{key}: accepted, but a real deploy rejects it"
    assert "\n" not in refusal
    assert refusal.startswith(f"{PROJECT}:{key}: "), refusal


def whole_number(value: Any) -> int | None:
    """The integer a config value stands for (Pulumi config text, JSON for typed keys), or None."""
    text = config_string(value)
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, int) and not isinstance(parsed, bool) else None


def around(*limits: int) -> st.SearchStrategy[int]:
    """Each limit and its neighbours, zero, negatives and huge numbers."""
    edges = [n + d for n in limits for d in (-1, 0, 1)]
    return st.one_of(st.sampled_from(edges + [0, -1, 2**31, 2**63, 2**64, 10**30]), st.integers(-(10**6), 10**20))


WRONG_TYPES = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["１２", "٣", "10GB", "1e3", "0x10", " 7 "]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.lists(st.integers(0, 9), max_size=2),
)

# The longest SLO a stack can have: Triton's exit timeout must cover the longest request at the SLO, and on dev's Spot
# pool preStop + exit timeout + 2 s fit the 15 s a preempted pod gets (settings/lifecycle.py). With the fastest
# health check (1 s, 1 failure, the least programming allowance, 1 s) preStop is 2 s, so the exit timeout and the SLO
# reach 11 s.
LONGEST_SLO_MS = 11_000
LONGEST_SLO_LIFECYCLE = {
    "lbHealthCheckIntervalSeconds": 1,
    "lbHealthCheckTimeoutSeconds": 1,
    "lbUnhealthyThreshold": 1,
    "lbProgrammingSeconds": 1,
    "tritonPreStopSeconds": 2,
    "tritonExitTimeoutSeconds": LONGEST_SLO_MS // 1000,
    "lbDrainingTimeoutSeconds": LONGEST_SLO_MS // 1000,
}
# Alert threshold and SLO at the top, so the SLO knobs nest for every delay and HPA target below them.
NESTED_ABOVE = {"sloQueueTimeMs": LONGEST_SLO_MS - 1, "sloLatencyMs": LONGEST_SLO_MS} | LONGEST_SLO_LIFECYCLE
# key -> (lowest, highest, context that keeps every other key valid).
BOUNDS = {
    # Persistent Disk pd-balanced 10 GB to 64 TiB (https://cloud.google.com/compute/docs/disks/persistent-disks).
    "gpuDiskSizeGb": (10, 65536, {}),
    "prometheusStorageGb": (1, 65536, {}),
    # Triton model_config.proto: int32 max_batch_size, preferred_batch_size, instance count; uint64 queue delay
    # (https://github.com/triton-inference-server/common/blob/main/protobuf/model_config.proto). Far below int32:
    # what fits a T4's 16 GB with the other model keys at their defaults (tests/unit/model_repo/test_gpu_bounds.py's
    # sum).
    "modelMaxBatchSize": (1, largest_fitting("modelMaxBatchSize"), {"modelPreferredBatchSize": 1}),
    "modelPreferredBatchSize": (
        1,
        largest_fitting("modelMaxBatchSize"),
        {"modelMaxBatchSize": largest_fitting("modelMaxBatchSize")},
    ),
    "modelSmallBatchSize": (1, largest_fitting("modelSmallBatchSize"), {}),
    "modelInstanceCount": (1, largest_fitting("modelInstanceCount"), {}),
    "modelSmallBatchInstanceCount": (1, largest_fitting("modelSmallBatchInstanceCount"), {}),
    # The SLO knobs must nest (settings/capacity.py): the delay below the HPA target, itself below the alert threshold
    # and the SLO, which the lifecycle bounds (LONGEST_SLO_MS), so the delay's own uint64 limit and the HPA target's
    # quantity limit lie above what can nest; the context puts the rest at the top.
    "modelMaxQueueDelayUs": (
        0,
        (LONGEST_SLO_MS - 2) * 1000 - 1,
        NESTED_ABOVE | {"autoscaleQueueTimeMs": LONGEST_SLO_MS - 2},
    ),
    # ms * 1000 is a Kubernetes quantity, at most 2^63-1
    # (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/), far above the SLO.
    "autoscaleQueueTimeMs": (1, LONGEST_SLO_MS - 2, NESTED_ABOVE | {"modelMaxQueueDelayUs": 0}),
    # GKE: 1,000 nodes per node pool per zone (https://cloud.google.com/kubernetes-engine/quotas); dev has one zone.
    "cpuMaxNodes": (1, 1000, {"cpuMinNodes": 1}),
    "gpuMaxNodes": (1, 1000, {"gpuMinNodes": 0}),
    # At least 1: every zone's NEG needs a node there (settings/cluster.py CPU_MIN_NODES).
    "cpuMinNodes": (1, 1000, {"cpuMaxNodes": 1000}),
    "gpuMinNodes": (0, 1000, {"gpuMaxNodes": 1000}),
}


@pytest.mark.parametrize("key", BOUNDS)
@EXAMPLES
@given(data=st.data())
def test_bounded_numbers_are_refused_outside_their_limits(key: str, data: st.DataObject) -> None:
    low, high, context = BOUNDS[key]
    value = data.draw(st.one_of(around(low, high), WRONG_TYPES), label=key)
    number = whole_number(value)
    accepted = number is not None and low <= number <= high
    assert_outcome(accepted, outcome("dev", **context, **{key: value}), key)


def fewest_zones(regions: list[str]) -> int:
    """prod's regions use up to three T4 zones each from the shipped catalogue."""
    offers = catalogue.load_gpu_catalogue(catalogue.DEFAULT_GPU_CATALOGUE)
    return min(len(offers.zones_with("nvidia-tesla-t4", r)[:3]) for r in regions)


@EXAMPLES
@given(total=around(1000, 2000, 3000))
def test_node_maxima_follow_the_zones_of_each_region(total: int) -> None:
    """A pool-wide maximum needs 1,000 nodes per zone of the region with fewest zones."""
    most = 1000 * fewest_zones(["us-central1", "europe-west4", "asia-east1"])
    refusal = outcome("prod", gpuMinNodes=0, gpuMaxNodes=total, cpuMinNodes=1, cpuMaxNodes=3)
    assert_outcome(1 <= total <= most, refusal, "gpuMaxNodes")


# ---------------------------------------------------------------- machine types

# GPU machine types (https://cloud.google.com/compute/docs/gpus#t4-gpus): T4 count -> (vCPUs, GB) a VM may have.
T4 = {1: (48, 312), 2: (48, 312), 4: (96, 624)}
# N1 predefined sizes and memory per vCPU (https://cloud.google.com/compute/docs/general-purpose-machines#n1_machines).
N1_SIZES = {
    "standard": (1, 2, 4, 8, 16, 32, 64, 96),
    "highmem": (2, 4, 8, 16, 32, 64, 96),
    "highcpu": (2, 4, 8, 16, 32, 64, 96),
}
N1_MB = {"standard": 3840, "highmem": 6656, "highcpu": 921.6}


def plain(digits: str) -> bool:
    """An ASCII count without leading zeros, as Compute Engine writes machine type names."""
    return digits.isascii() and digits.isdigit() and str(int(digits)) == digits


def n1_accepts(name: str, gpus: int) -> bool:
    """N1 with `gpus` T4: predefined, or custom per
    https://cloud.google.com/compute/docs/instances/creating-instance-with-custom-machine-type (1 or an even vCPU
    count up to 96; memory a multiple of 256 MB, 0.9-6.5 GB per vCPU, more only with -ext, at most 624 GB)."""
    cpus, gb = T4[gpus]
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "n1" and parts[1] in N1_SIZES and parts[2].isdigit():
        vcpus = int(parts[2])
        if not plain(parts[2]) or vcpus not in N1_SIZES[parts[1]]:
            return False
        return vcpus <= cpus and vcpus * N1_MB[parts[1]] <= gb * 1024
    ext = parts[-1] == "ext"
    core = parts[:-1] if ext else parts
    if len(core) != 4 or core[:2] != ["n1", "custom"] or not (plain(core[2]) and plain(core[3])):
        return False
    vcpus, mb = int(core[2]), int(core[3])
    shape = vcpus == 1 or (vcpus % 2 == 0 and 2 <= vcpus <= 96)
    memory = mb % 256 == 0 and vcpus * 922 <= mb and (mb <= vcpus * 6656 or (ext and mb <= 624 * 1024))
    return shape and memory and vcpus <= cpus and mb <= gb * 1024


N1_NAMES = st.one_of(
    st.builds(lambda kind, vcpus: f"n1-{kind}-{vcpus}", st.sampled_from([*N1_SIZES, "ultramem"]), st.integers(0, 130)),
    st.builds(
        lambda vcpus, mb, ext: f"n1-custom-{vcpus}-{mb}{'-ext' if ext else ''}",
        st.integers(0, 100),
        st.one_of(st.integers(0, 700_000), st.integers(1, 2800).map(lambda n: n * 256)),
        st.booleans(),
    ),
    st.sampled_from(["e2-standard-4", "g2-standard-4", "a2-highgpu-1g", "f1-micro", "g1-small", "n1-standard-4-lssd"]),
    st.text(max_size=12),
)


@EXAMPLES
@given(name=N1_NAMES, gpus=st.sampled_from([1, 2, 4]))
def test_gpu_machine_type_is_a_real_n1_shape_within_the_t4_limits(name: str, gpus: int) -> None:
    refusal = outcome("dev", gpuMachineType=name, gpuAcceleratorCount=gpus)
    assert_outcome(n1_accepts(name.strip(), gpus), refusal, "gpuMachineType")


def test_one_t4_allows_48_vcpus_not_24() -> None:
    assert outcome("dev", gpuMachineType="n1-standard-32") is None
    assert outcome("dev", gpuMachineType="n1-custom-48-199680") is None
    assert "48 vCPUs" in outcome("dev", gpuMachineType="n1-standard-64")
    assert "312 GB" in outcome("dev", gpuMachineType="n1-custom-8-399360-ext")


@EXAMPLES
@given(count=st.one_of(around(1, 2, 4), WRONG_TYPES))
def test_t4_count_per_node_is_1_2_or_4(count: Any) -> None:
    assert_outcome(whole_number(count) in T4, outcome("dev", gpuAcceleratorCount=count), "gpuAcceleratorCount")


# "Machine families resource and comparison guide" (https://cloud.google.com/compute/docs/machine-resource).
CPU_FAMILIES = ("e2", "n1", "n2", "n2d", "n4", "c3", "c3d", "c4", "c2", "c2d", "m3", "t2d")
GPU_FAMILIES = ("a2", "a3", "g2", "g4")  # accelerator-optimized: GPUs attached
ARM = (
    "t2a",
    "c4a",
)  # arm64 nodes are tainted on GKE (https://cloud.google.com/kubernetes-engine/docs/concepts/arm-on-gke)
E2_SIZES = {"standard": (2, 4, 8, 16, 32), "highmem": (2, 4, 8, 16), "highcpu": (2, 4, 8, 16, 32)}


def cpu_pool_accepts(family: str, kind: str, vcpus: int) -> bool:
    if family not in CPU_FAMILIES or kind not in ("standard", "highmem", "highcpu") or vcpus < 1:
        return False
    sizes = {"n1": N1_SIZES, "e2": E2_SIZES}.get(family)
    return sizes is None or vcpus in sizes[kind]


@EXAMPLES
@given(
    family=st.sampled_from(CPU_FAMILIES + GPU_FAMILIES + ARM + ("x9", "n3", "k8s")),
    kind=st.sampled_from(["standard", "highmem", "highcpu", "turbo"]),
    vcpus=st.integers(0, 200),
)
def test_cpu_machine_type_is_a_known_shape_off_accelerator_and_arm_families(family: str, kind: str, vcpus: int) -> None:
    refusal = outcome("dev", cpuMachineType=f"{family}-{kind}-{vcpus}")
    assert_outcome(cpu_pool_accepts(family, kind, vcpus), refusal, "cpuMachineType")


def test_cpu_pool_refuses_gpu_named_types_and_garbage() -> None:
    for name in ("a2-highgpu-1g", "a3-megagpu-8g", "n1-standard", "", "n1_standard_8", "ñ1-standard-8"):
        assert_outcome(False, outcome("dev", cpuMachineType=name), "cpuMachineType")


# ---------------------------------------------------------------- bucket location

# "Bucket locations" (https://cloud.google.com/storage/docs/locations): predefined dual-regions and multi-regions;
# EU excludes London (europe-west2) and Zurich (europe-west6).
DUALS = {
    "ASIA1": {"asia-northeast1", "asia-northeast2"},
    "EUR4": {"europe-north1", "europe-west4"},
    "EUR5": {"europe-west1", "europe-west2"},
    "EUR7": {"europe-west10", "europe-west3"},
    "EUR8": {"europe-west3", "europe-west6"},
    "NAM4": {"us-central1", "us-east1"},
}
# Cluster regions to place the bucket for: dev's, prod's, and London alone (outside the EU multi-region).
CLUSTERS = {
    "dev": ("us-central1",),
    "prod": ("us-central1", "europe-west4", "asia-east1"),
    "london": ("europe-west2",),
}


def place(clusters: str, location: str) -> str | None:
    return outcome("dev", regions=list(CLUSTERS[clusters]), zones=[], bucketLocation=location)


def location_suits(location: str, clusters: tuple[str, ...]) -> bool:
    regions = set(catalogue.load_regions())
    name = location.upper()
    if name in DUALS:
        return bool(DUALS[name] & set(clusters))
    if name == "US":
        return any(r.startswith("us-") for r in clusters)
    if name == "EU":
        return any(r.startswith("europe-") and r not in ("europe-west2", "europe-west6") for r in clusters)
    if name == "ASIA":
        return any(r.startswith("asia-") for r in clusters)
    return location.lower() in regions and location.lower() in clusters


LOCATIONS = st.one_of(
    st.sampled_from(sorted(catalogue.load_regions())),
    st.sampled_from([*DUALS, "US", "EU", "ASIA", "eu", "nam4", "EUR9", "NAM5", "US-CENTRAL1", "us-central1-a"]),
    st.text(max_size=10).filter(lambda t: t.strip()),
)


@EXAMPLES
@given(clusters=st.sampled_from(sorted(CLUSTERS)), location=LOCATIONS)
def test_bucket_location_exists_and_holds_a_cluster_region(clusters: str, location: str) -> None:
    assert_outcome(location_suits(location.strip(), CLUSTERS[clusters]), place(clusters, location), "bucketLocation")


# ---------------------------------------------------------------- Triton image on the GKE driver


# Release notes index (https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/): monthly
# releases, none in 25.07; 26.10 is the newest this project knows (server v2.74.0).
def released(year: int, month: int) -> bool:
    return 1 <= month <= 12 and (21, 8) <= (year, month) <= (26, 10) and (year, month) != (25, 7)


def supported_on(minor: int) -> datetime.date:
    """A day GKE still supported 1.`minor` (the day before its end; the tables' day for minors after the table), so
    the driver rule is judged on each minor whatever the tests' today (settings/versions.py)."""
    table = versions.load_versions()
    if minor in table:
        return table[minor].end_of_standard_support - datetime.timedelta(days=1)
    return versions.TABLE_WRITTEN


def driver_runs(year: int, month: int, branch: int) -> bool:
    """rel-25-08 onwards: CUDA 13, needs R575+ or, on a data-center GPU, R470/R525/R535/R545; 26.06 onwards
    (TensorRT 11) R580+ with no forward-compatible branch left (R535's end of life, infra/data/triton_toolchain.csv)."""
    if (year, month) >= (26, 6):
        return branch >= 580
    return (year, month) < (25, 8) or branch >= 575 or branch in (470, 525, 535, 545)


@EXAMPLES
@given(
    year=st.integers(19, 28),
    month=st.integers(0, 13),
    suffix=st.sampled_from(["-py3", "-py3", "-py3-sdk", "-py3-min", "-py3-igpu", "-pyt-python-py3", "", "-py4"]),
    driver=st.sampled_from(["DEFAULT", "LATEST", "INSTALLATION_DISABLED"]),
    minor=st.integers(25, 37),
)
def test_triton_tag_is_a_released_server_image_that_runs_on_the_driver(year, month, suffix, driver, minor) -> None:
    tag = f"{year:02d}.{month:02d}{suffix}"
    refusal = outcome(
        "dev", supported_on(minor), tritonImageTag=tag, gpuDriverVersion=driver, kubernetesVersion=f"1.{minor}"
    )
    choice = "DEFAULT" if driver == "INSTALLATION_DISABLED" else driver
    branch = catalogue.gke_driver_branch(minor, choice)
    accepted = suffix == "-py3" and released(year, month) and driver_runs(year, month, branch)
    assert_outcome(accepted, refusal, "tritonImageTag")


def test_cuda13_image_with_latest_on_an_r570_gke_is_refused_with_why() -> None:
    on = supported_on(33)
    refusal = outcome("dev", on, tritonImageTag="25.10-py3", gpuDriverVersion="LATEST", kubernetesVersion="1.33")
    assert refusal is not None and "R570" in refusal and "CUDA 13" in refusal and "DEFAULT" in refusal
    assert outcome("dev", on, tritonImageTag="25.10-py3", gpuDriverVersion="DEFAULT", kubernetesVersion="1.33") is None
    assert outcome("dev", tritonImageTag="25.10-py3", gpuDriverVersion="LATEST", kubernetesVersion="1.35") is None


# ---------------------------------------------------------------- every edge, not left to chance


@pytest.mark.parametrize("key", BOUNDS)
def test_each_limit_and_its_neighbours(key: str) -> None:
    low, high, context = BOUNDS[key]
    for value in (low - 1, low, low + 1, high - 1, high, high + 1):
        assert_outcome(low <= value <= high, outcome("dev", **context, **{key: value}), key)


def test_every_predefined_n1_type_against_each_t4_count() -> None:
    for kind, sizes in N1_SIZES.items():
        for vcpus in sorted({*sizes, 3, 48}):
            for gpus in T4:
                name = f"n1-{kind}-{vcpus}"
                refusal = outcome("dev", gpuMachineType=name, gpuAcceleratorCount=gpus)
                assert_outcome(n1_accepts(name, gpus), refusal, "gpuMachineType")


def test_every_month_on_both_gke_driver_choices() -> None:
    for year in range(21, 28):
        for month in range(1, 13):
            for driver, minor in (("LATEST", 33), ("DEFAULT", 33), ("LATEST", 34)):
                tag = f"{year:02d}.{month:02d}-py3"
                refusal = outcome(
                    "dev",
                    supported_on(minor),
                    tritonImageTag=tag,
                    gpuDriverVersion=driver,
                    kubernetesVersion=f"1.{minor}",
                )
                branch = catalogue.gke_driver_branch(minor, driver)
                accepted = released(year, month) and driver_runs(year, month, branch)
                assert_outcome(accepted, refusal, "tritonImageTag")


def test_every_bucket_location_name_for_each_stack() -> None:
    names = [*catalogue.load_regions(), *DUALS, "US", "EU", "ASIA"]
    for clusters, regions in CLUSTERS.items():
        for location in names:
            assert_outcome(location_suits(location, regions), place(clusters, location), "bucketLocation")


@EXAMPLES
@given(
    field=st.sampled_from(["max_batch_size", "preferred_batch_size", "instance_count", "max_queue_delay_us"]),
    value=around(INT32_MAX, 2**64 - 1),
)
def test_model_settings_fit_their_model_config_fields(field: str, value: int) -> None:
    """The model_repo CLI path (--set) too: int32 counts, uint64 queue delay (model_config.proto, above)."""
    from triton_gke.model_repo.errors import ModelRepoError
    from triton_gke.model_repo.settings import ModelRepoSettings, VariantSettings, validate_settings

    fields = {"max_batch_size": INT32_MAX, "preferred_batch_size": 1, "instance_count": 1, "max_queue_delay_us": 0}
    fields[field] = value
    low = 0 if field == "max_queue_delay_us" else 1
    high = 2**64 - 1 if field == "max_queue_delay_us" else INT32_MAX
    variant = VariantSettings("original", "none", **fields)
    try:
        validate_settings(ModelRepoSettings(variants=(variant,)), gpu=None)  # field widths; GPU memory: test_gpu_bounds
    except ModelRepoError as err:
        assert not low <= value <= high, err
        assert field in str(err) and "\n" not in str(err)
    else:
        assert low <= value <= high
