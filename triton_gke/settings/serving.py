"""What is served and how it is driven: model variants, the Triton image and its driver, autoscaling, Locust."""

from __future__ import annotations

from triton_gke.contracts.paths import project_dir
from triton_gke.contracts.triton import INFERENCE_KEY_SLOTS
from triton_gke.loadtest import arrivals
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.recipes import (
    driver_needed,
    image_runs_on_driver,
    job_problem,
    load_toolchains,
    recipe,
    toolchain_row,
)
from triton_gke.model_repo.settings import (
    FIELD_MAXIMUM,
    REFERENCE_VARIANTS,
    ModelRepoSettings,
    VariantSettings,
    gpu_memory_problem,
    image_release,
    is_saved_model_dir,
    validate_source,
)
from triton_gke.settings import catalogue
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.gpu_types import shipped_gpu_types
from triton_gke.settings.reader import Reader
from triton_gke.settings.values import (
    ClusterSettings,
    GpuPoolSettings,
    LoadTestSettings,
    ServingSettings,
    StackSettings,
)

# Triton's batch sizes and instance counts are int32, its queue delay uint64: model_repo.settings.FIELD_MAXIMUM, the
# one home of those widths (model_config.proto), bounds the stack keys that set them.
MAX_LOCUST_WORKERS = 100
LOCUST_ARRIVALS = tuple(k for k in arrivals.KINDS if k != "trace")
# Longest startup budget accepted for one Triton pod (tritonStartupMinutes): 3 hours.
MAX_STARTUP_MINUTES = 180
# Longest queue time the HPA may target (autoscaleQueueTimeMs; TritonOnCluster's queue_time_target_us): a minute.
# Far below a Kubernetes quantity's 2^63-1 (the HPA target's averageValue,
# https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/): a pod whose requests queue for a
# minute has long missed any latency SLO this toolkit sizes for, so a larger target is a typo. One bound for the stack
# and the component: a value the settings layer let through and the component refused would stop a plan inside the
# program, not before it.
MAX_QUEUE_TIME_TARGET_MS = 60_000


# The stack key of each ModelRepoSettings field a model rule judges (ModelRepoError.field).
MODEL_FIELD_KEYS = {"triton_image_tag": "tritonImageTag", "source": "modelSource", "variants": "modelVariants"}


def _model_error(reader: Reader, err: ModelRepoError) -> ConfigError:
    """A model rule's refusal as the stack's line: its field's key (by the table, never by the text), its reason."""
    return ConfigError(f"{reader.full(MODEL_FIELD_KEYS[str(err.field)])}: {err.reason}")


def model_repo(reader: Reader, gpu: GpuPoolSettings, build_engines: bool = False) -> ModelRepoSettings:
    """modelVariants, modelUint8Input, the variants' tuning keys, modelSource and tritonImageTag; with
    `build_engines` (tritonBuildEngines) the TensorRT variants are served as the plans the cluster builds for the GPU
    pool's compute capability.

    The variants' own bounds are read here (FIELD_MAXIMUM), so of model_repo.settings.validate_settings only the
    rules no read covers apply: the image tag (image_release) and the source against it (validate_source).
    """
    known = {v.name: v for v in REFERENCE_VARIANTS}
    names = reader.strings("modelVariants")
    if not names:
        raise reader.fail("modelVariants", [], f"list at least one of {', '.join(known)}")
    for name in names:
        if name not in known:
            raise reader.fail("modelVariants", name, f"unknown variant; allowed: {', '.join(known)}")
        if names.count(name) > 1:
            raise reader.fail("modelVariants", name, "each variant may be listed once")
    uint8 = reader.strings("modelUint8Input")
    for name in uint8:
        if name not in names:
            raise reader.fail("modelUint8Input", name, f"not in modelVariants ({', '.join(names)})")
    variants = tuple(_variant(reader, known[name], uint8_input=name in uint8) for name in names)
    source = reader.path("modelSource")
    trt = any(v.uses_tensorrt for v in variants)
    if build_engines and trt and source and is_saved_model_dir(project_dir() / source):
        raise reader.fail("tritonBuildEngines", True, f"plans build from ONNX; modelSource {source} is a SavedModel")
    settings = ModelRepoSettings(
        variants=variants,
        source=str(project_dir() / source) if source else None,
        triton_image_tag=reader.string("tritonImageTag"),
        plan_compute_capabilities=(shipped_gpu_types()[gpu.accelerator_type].compute_capability,)
        if build_engines
        else (),
    )
    validate_image(reader, settings)
    _check_fits_gpu(reader, settings, gpu.accelerator_type)
    if build_engines:
        _check_job_builds(reader, settings)
    return settings


def validate_image(reader: Reader, settings: ModelRepoSettings) -> None:
    """The Triton image tag's own rules and the model source against its release (settings/region_overrides.py judges
    a region's image by these too)."""
    try:
        validate_source(settings, image_release(settings.triton_image_tag))
    except ModelRepoError as err:
        raise _model_error(reader, err) from None


def _check_job_builds(reader: Reader, settings: ModelRepoSettings) -> None:
    """Every TensorRT variant's recipe is one the engine-build Job can run (model_repo.recipes.job_problem): the INT8
    variants' ONNX carries Q/DQ nodes (model_repo/quantize.py, as engine_recipe's `qdq`), so only FP16 on TensorRT 11
    asks for ModelOpt."""
    tag = settings.triton_image_tag
    for variant in (v for v in settings.variants if v.uses_tensorrt):
        try:
            calibration = None if variant.precision == "INT8" else "calibration"
            problem = job_problem(recipe(tag, variant.precision, calibration=calibration))
        except ModelRepoError as err:
            raise _model_error(reader, err) from None
        if problem:
            raise reader.fail(
                "tritonImageTag",
                tag,
                f"{problem}: leave {variant.name} out of modelVariants, set tritonBuildEngines false, or use a "
                f"TensorRT 10 tag ({_last_tensorrt_10_tag()} or earlier)",
            )


def _last_tensorrt_10_tag() -> str:
    last = max(t.last for t in load_toolchains() if t.tensorrt_major == 10)
    return f"{last[0]:02d}.{last[1]:02d}-py3"


def _check_fits_gpu(reader: Reader, settings: ModelRepoSettings, gpu: str) -> None:
    """Every variant's instances and batches within one GPU's memory (model_repo.settings.gpu_memory_problem)."""
    memory = catalogue.gpu_memory_bytes(gpu)
    problem = gpu_memory_problem(settings, gpu, memory) if memory else None
    if problem:
        variant, field, why = problem
        small = reads_small_batch_keys(variant)
        keys = {
            "max_batch_size": "modelSmallBatchSize" if small else "modelMaxBatchSize",
            "instance_count": "modelSmallBatchInstanceCount" if small else "modelInstanceCount",
        }
        raise reader.fail(keys[field], getattr(variant, field), why)


def reads_small_batch_keys(variant: VariantSettings) -> bool:
    """The variant's batch and instances come from modelSmallBatchSize/modelSmallBatchInstanceCount (see _variant):
    a reference variant whose batch differs from original's. The one home of that rule (bench tune asks here too)."""
    reference = next((v for v in REFERENCE_VARIANTS if v.name == variant.name), None)
    return reference is not None and reference.max_batch_size != REFERENCE_VARIANTS[0].max_batch_size


def _variant(reader: Reader, reference: VariantSettings, uint8_input: bool) -> VariantSettings:
    small = reads_small_batch_keys(reference)
    batch_key, count_key = (
        ("modelSmallBatchSize", "modelSmallBatchInstanceCount")
        if small
        else ("modelMaxBatchSize", "modelInstanceCount")
    )
    max_batch = reader.integer(
        batch_key,
        minimum=1,
        maximum=FIELD_MAXIMUM["max_batch_size"],
        why="int32 max_batch_size in Triton's model config",
    )
    preferred = (
        max_batch
        if small
        else reader.integer(
            "modelPreferredBatchSize",
            minimum=1,
            maximum=FIELD_MAXIMUM["preferred_batch_size"],
            why="int32 in Triton's model config",
        )
    )
    if preferred > max_batch:
        raise reader.fail("modelPreferredBatchSize", preferred, f"must not exceed modelMaxBatchSize ({max_batch})")
    return VariantSettings(
        name=reference.name,
        precision=reference.precision,
        max_batch_size=max_batch,
        preferred_batch_size=preferred,
        max_queue_delay_us=reader.integer(
            "modelMaxQueueDelayUs", maximum=FIELD_MAXIMUM["max_queue_delay_us"], why="uint64 in Triton's model config"
        ),
        instance_count=reader.integer(
            count_key, minimum=1, maximum=FIELD_MAXIMUM["instance_count"], why="int32 instance_group count in Triton"
        ),
        input_dtype="UINT8" if uint8_input else "FP32",
    )


def nodes_driver_branch(kubernetes_minor: int, driver_version: str) -> int:
    """The NVIDIA driver branch GKE installs on GPU nodes of Kubernetes 1.`kubernetes_minor` given gpuDriverVersion
    (the one home of this rule: the stack's check below and TritonGkeRegion, infra/region.py, both ask here)."""
    # INSTALLATION_DISABLED deploys k8s/nvidia_driver.py's preloaded COS installer without a version, which installs
    # the COS image's default driver, the same branch as DEFAULT.
    choice = "DEFAULT" if driver_version == "INSTALLATION_DISABLED" else driver_version
    return catalogue.gke_driver_branch(kubernetes_minor, choice)


def check_image_runs_on_driver(
    reader: Reader, model_repo: ModelRepoSettings, gpu: GpuPoolSettings, cluster: ClusterSettings
) -> None:
    """The Triton image must run on the NVIDIA driver branch the GPU nodes get (infra/data/gke_gpu_drivers.csv): as
    the image's row of infra/data/triton_toolchain.csv says (its minimum branch, or a forward-compatible one), and
    for a release before that table by model_repo/settings.py's CUDA 12 rule."""
    tag = model_repo.triton_image_tag
    minor = int(cluster.kubernetes_version.split(".")[1])
    branch = nodes_driver_branch(minor, gpu.driver_version)
    row = toolchain_row(image_release(tag))

    def runs(on_branch: int) -> bool:
        return image_runs_on_driver(image_release(tag), on_branch)

    if runs(branch):
        return
    needs = driver_needed(image_release(tag))
    working = [c for c in ("DEFAULT", "LATEST") if runs(nodes_driver_branch(minor, c))]
    fix = f"gpuDriverVersion {working[0]}" if working else "a kubernetesVersion whose GKE driver is new enough"
    raise reader.fail(
        "tritonImageTag",
        tag,
        f"this CUDA {row.cuda if row else 12} image needs driver {needs} (infra/data/triton_toolchain.csv), and "
        f"gpuDriverVersion {gpu.driver_version} on Kubernetes {cluster.kubernetes_version} installs R{branch}; "
        f"use {fix} (infra/data/gke_gpu_drivers.csv) or tritonImageTag 25.06-py3",
    )


def serving(reader: Reader) -> ServingSettings:
    """autoscaleQueueTimeMs, tritonStartupMinutes, tritonBuildEngines, inferenceAuth and inferenceKeySlot; the image
    is model_repo.triton_image_tag's (one field)."""
    return ServingSettings(
        queue_time_target_us=reader.integer(
            "autoscaleQueueTimeMs",
            minimum=1,
            maximum=MAX_QUEUE_TIME_TARGET_MS,
            too_large=f"expected at most {MAX_QUEUE_TIME_TARGET_MS} ms (a minute of queueing)",
        )
        * 1000,
        startup_minutes=_startup_minutes(reader),
        build_engines=reader.boolean("tritonBuildEngines"),
        inference_auth=reader.boolean("inferenceAuth"),
        inference_key_slot=reader.choice("inferenceKeySlot", INFERENCE_KEY_SLOTS),
    )


def engine_build_notice(reader: Reader, settings: StackSettings) -> str | None:
    """A warning when tritonBuildEngines asks for a Job whose pod may find no GPU node: it needs one beside Triton's,
    and a pool whose maximum is the nodes Triton's minimum of pods already holds has none to add (dev: 1 and 1), so
    an `up` that creates or changes the Job waits for it until the Job's deadline, then fails."""
    pool = settings.gpu_pool
    if not settings.serving.build_engines or not any(v.uses_tensorrt for v in settings.model_repo.variants):
        return None
    if pool.max_nodes > pool.min_triton_pods:
        return None
    return (
        f"{reader.full('tritonBuildEngines')}: the engine-build Job needs a GPU node beside Triton's "
        f"{pool.min_triton_pods}, and {reader.full('gpuMaxNodes')} {pool.max_nodes} leaves none: an `up` that creates "
        "or changes the Job waits for a node until its deadline; raise gpuMaxNodes (docs/gpus.md)"
    )


def _startup_minutes(reader: Reader) -> int:
    # Under 10 minutes is less than pulumi-kubernetes' own default wait; over 3 hours a crash-looping pod holds `up`.
    return reader.integer(
        "tritonStartupMinutes",
        minimum=10,
        maximum=MAX_STARTUP_MINUTES,
        too_large=f"expected at most {MAX_STARTUP_MINUTES} minutes",
    )


def load_test(reader: Reader, model_repo: ModelRepoSettings) -> LoadTestSettings:
    served = [v.name for v in model_repo.variants]
    model = reader.string("locustModel")
    if model not in served:
        raise reader.fail("locustModel", model, f"not a served model; modelVariants: {', '.join(served)}")
    payload = reader.choice("locustPayload", ("fp32", "uint8"))
    served_dtype = next(v.input_dtype for v in model_repo.variants if v.name == model)
    if payload.upper() != served_dtype:
        raise reader.fail("locustPayload", payload, f"{model} takes {served_dtype} input (see modelUint8Input)")
    workers = reader.integer(
        "locustWorkers",
        minimum=1,
        maximum=MAX_LOCUST_WORKERS,
        too_large=f"at most {MAX_LOCUST_WORKERS} workers per cluster",
    )
    steps = rate_steps(reader)
    return LoadTestSettings(
        workers=workers,
        model=model,
        rps_per_user=reader.integer("locustRps"),
        protocol=reader.choice("locustProtocol", ("http", "grpc")),
        payload=payload,
        rate=_rate(reader, steps),
        rate_steps=steps,
        # trace needs a file inside the Locust pods, which the stack does not ship: poisson or constant only.
        arrival=reader.choice("locustArrival", LOCUST_ARRIVALS),
    )


def _rate(reader: Reader, steps: str) -> int:
    """locustRate: 0 (unset) or a rate the locustfile takes (arrivals.MAX_RATE bounds both); steps: locustRateSteps."""
    rate = reader.integer(
        "locustRate",
        maximum=int(arrivals.MAX_RATE),  # a whole number exceeds the float cap exactly when it exceeds its floor
        too_large=f"expected requests/s from 1 to {arrivals.MAX_RATE:,.0f}, or 0 for none",
    )
    if rate and steps:
        # The locustfile's rate_steps shape sets the rate itself and would silently override `rate`.
        raise reader.fail("locustRate", rate, "set locustRate or locustRateSteps, not both")
    return rate


def rate_steps(reader: Reader) -> str:
    """locustRateSteps, checked by the locustfile's own parser (loadtest/arrivals.py) so the two cannot disagree."""
    text = reader.string("locustRateSteps")
    try:
        if text:
            arrivals.parse_steps(text)
    except arrivals.ArrivalError as err:
        raise reader.fail("locustRateSteps", text, str(err)) from None
    return text
