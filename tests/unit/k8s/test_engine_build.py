"""The engine-build Job (k8s/engine_build.py): one per GPU type per region in the prod plan, Triton waiting for it,
its command lines for a TensorRT 10 and a TensorRT 11 tag, its manifest valid; plan names unique per compute
capability and a cc_model_filenames config that maps every capability of a stack (model_repo/engines.py, configs.py)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.stacks import evaluate, stack_settings
from triton_gke.k8s.engine_build import (
    BACKOFF_LIMIT,
    EngineBuildArgs,
    build_commands,
    deadline_s,
    fetch_commands,
    upload_commands,
)
from triton_gke.k8s.schema import validate_manifest
from triton_gke.model_repo import configs
from triton_gke.model_repo.engines import PlanModel, cc_model_filenames, engine_filename
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import REFERENCE_VARIANTS
from triton_gke.offline.plan_view import kubernetes_objects
from triton_gke.settings import ConfigError, load_stack_settings

RESNET50_INPUT = (("input", (224, 224, 3)),)  # model_repo/resnet50.py: NHWC, the batch first
VARIANTS = (
    PlanModel("trt_fp16", "FP16", 64, RESNET50_INPUT),
    PlanModel("trt_int8_bs16_count4", "INT8", 16, RESNET50_INPUT),
)


def _args(tag: str, cc: str = "7.5") -> EngineBuildArgs:
    return EngineBuildArgs(
        triton_image_tag=tag,
        model_repository="gs://b/models",
        variants=VARIANTS,
        accelerator_type="nvidia-tesla-t4",
        compute_capability=cc,
        writer_email="w@p.iam.gserviceaccount.com",
    )


@pytest.fixture(scope="module")
def prod(engine_plan):
    return engine_plan("prod")  # opt-in (Pulumi.yaml tritonBuildEngines)


def _jobs(plan):
    return [r for r in plan.resources if r.type == "kubernetes:batch/v1:Job"]


def test_the_prod_plan_has_one_engine_job_per_region_and_triton_waits_for_it(prod):
    regions = [r.name for r in prod.resources if r.type == "triton-gke:index:TritonGkeRegion"]
    jobs = _jobs(prod)
    assert len(regions) >= 2 and sorted(j.name for j in jobs) == sorted(f"engines-{r}-job" for r in regions)
    for region in regions:
        job = next(j for j in jobs if j.name == f"engines-{region}-job")
        deployment = next(
            r
            for r in prod.resources
            if r.type == "kubernetes:apps/v1:Deployment" and r.name == f"triton-{region}-deployment"
        )
        assert job.urn in deployment.dependencies, region
        # On the region's GPU pool, one GPU, the T4's compute capability in its plan names.
        pod = job.inputs["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
        assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
        build = next(c for c in pod["initContainers"] if c["name"] == "build")
        assert build["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert build["image"] == "nvcr.io/nvidia/tensorrt:25.06-py3"
        assert "--saveEngine=model.25.06.cc75.plan" in build["args"][0]
        spec = job.inputs["spec"]
        assert spec["backoffLimit"] == BACKOFF_LIMIT and spec["activeDeadlineSeconds"] == deadline_s(4)
        assert job.custom_timeouts["create"] == f"{deadline_s(4) // 60 + 15}m"
    # The writer may create .plan objects only; Triton's reader gets no write role.
    creator = [r for r in prod.resources if r.type == "gcp:storage/bucketIAMMember:BucketIAMMember"
               and r.inputs.get("role") == "roles/storage.objectCreator"]  # fmt: skip
    assert len(creator) == 1
    bucket = creator[0].inputs["bucket"]
    assert creator[0].inputs["condition"]["expression"] == (
        f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/models/") && resource.name.endsWith(".plan")'
    )


def _commands(plan):
    return {r.name: r for r in plan.resources if r.type == "command:local:Command"}


def test_new_versions_are_pinned_only_after_every_regions_job(prod):
    """With engine-build Jobs, the upload stages new versions (`sync --stage`: configs keep the last good pin) and the
    pinning sync waits for every region's Job: a Job that fails (pulumi-kubernetes fails it on its Failed condition,
    https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/) stops the update before any config
    names a version without its plan. Every Triton Deployment waits for the pin, so no pod is rolled before it."""
    commands = _commands(prod)
    stage, pin = commands["models-sync"], commands["models-pin-sync"]
    assert stage.inputs["create"].endswith(" --stage") and stage.inputs["update"] == stage.inputs["create"]
    assert pin.inputs["create"] == stage.inputs["create"].removesuffix(" --stage") + " --pin"
    jobs = _jobs(prod)
    assert len(jobs) == 3 and all(j.urn in pin.dependencies for j in jobs) and stage.urn in pin.dependencies
    for job in jobs:  # the Jobs read what the stage wrote
        assert stage.urn in job.dependencies
    deployments = [r for r in prod.resources if r.type == "kubernetes:apps/v1:Deployment" and r.name.startswith(
        "triton-") and r.name.endswith("-deployment")]  # fmt: skip
    assert len(deployments) == 3 and all(pin.urn in d.dependencies for d in deployments)


def test_without_jobs_one_sync_uploads_and_pins():
    plan = evaluate("dev")
    commands = _commands(plan)
    assert "models-pin-sync" not in commands and not commands["models-sync"].inputs["create"].endswith("--stage")


def test_a_stack_without_a_tensorrt_variant_gets_no_job_and_no_writer(engine_plan):
    """tritonBuildEngines with modelVariants [original]: nothing to build, so no Job, and no writer account or grant."""
    plan = engine_plan("dev", modelVariants=["original"], locustModel="original", capacityVariant=None)
    assert _jobs(plan) == [] and not [r for r in plan.resources if r.name.startswith("engines")]


def _plan_configs(repository):
    """Variant -> its config.pbtxt, parsed, for the variants served as TensorRT plans."""
    found = {}
    for path in sorted(repository.glob("*/config.pbtxt")):
        config = configs.validate_config_text(path.read_text(), path)
        if config.platform == "tensorrt_plan":
            found[config.name] = config
    return found


@pytest.mark.parametrize(
    ("overrides", "cc"),
    [({}, "7.5"), ({"gpuAcceleratorType": "nvidia-l4", "gpuMachineType": "g2-standard-8"}, "8.9")],
    ids=["T4", "L4"],
)
def test_triton_serves_the_plans_the_job_writes(engine_plan, overrides, cc):
    """With tritonBuildEngines the repository's TensorRT variants are plans (not ONNX Runtime with its accelerator):
    each config names, for the pool's compute capability, the very file the Job's build and upload steps write, and
    keeps the model.onnx the Job builds it from; `original` stays ONNX Runtime."""
    plan = engine_plan("dev", **overrides)
    repository = engine_plan.repository("dev", **overrides)
    served = _plan_configs(repository)
    trt = [v.name for v in REFERENCE_VARIANTS if v.uses_tensorrt]
    assert sorted(served) == sorted(trt)
    (job,) = _jobs(plan)
    pod = job.inputs["spec"]["template"]["spec"]
    build = next(c for c in pod["initContainers"] if c["name"] == "build")["args"][0]
    upload = pod["containers"][0]["args"][0]
    for name, config in served.items():
        (plan_file,) = config.cc_model_filenames.values()
        assert dict(config.cc_model_filenames) == {cc: plan_file} and f"--saveEngine={plan_file}" in build
        assert f"/work/{name}/{plan_file} gs://" in upload, name
        assert (repository / name / "1" / "model.onnx").is_file()
        assert not config.optimization.execution_accelerators.gpu_execution_accelerator
        assert config.model_warmup[0].batch_size == 1  # READY only once a plan answers (startup probe: readiness)
    original = repository / "original" / "config.pbtxt"
    assert configs.validate_config_text(original.read_text(), original).backend == "onnxruntime"


def test_a_repository_built_for_onnx_runtime_is_refused_when_the_stack_builds_engines():
    """build/model_repository was built without tritonBuildEngines: its TensorRT variants would load through ONNX
    Runtime while the Job builds plans nobody loads; the program stops before planning and says how to rebuild."""
    with pytest.raises(ConfigError, match="built from other model settings than stack 'dev'"):
        evaluate("dev", tritonBuildEngines=True)


def test_the_engine_manifests_are_schema_valid(prod):
    objects = [m for _, m in kubernetes_objects(prod) if m.get("kind") == "Job" or
               (m.get("metadata") or {}).get("namespace") == "triton-engines"]  # fmt: skip
    assert any(m["kind"] == "Job" for m in objects)
    for manifest in objects:
        validate_manifest(manifest, "1.35")


def test_tensorrt_10_command_lines():
    lines = "\n".join(build_commands(_args("25.06-py3")))
    assert ("trtexec --onnx=model.onnx --saveEngine=model.25.06.cc75.plan --minShapes=input:1x224x224x3 "
            "--optShapes=input:64x224x224x3 --maxShapes=input:64x224x224x3 --fp16") in lines  # fmt: skip
    # The INT8 variants' ONNX carries Q/DQ nodes (model_repo/quantize.py): --int8 alone, no calibration cache.
    assert "--maxShapes=input:16x224x224x3 --int8;" in lines and "--calib" not in lines


def test_tensorrt_11_command_lines():
    """TensorRT 11: the Q/DQ INT8 variants build --stronglyTyped with trtexec alone; an FP16 variant would need a
    ModelOpt step the Job cannot run (model_repo/recipes.py job_problem), so build_commands refuses it by name."""
    with pytest.raises(ValueError, match="variant 'trt_fp16' under 26.10-py3: .*ModelOpt"):
        build_commands(_args("26.10-py3", cc="8.9"))
    int8_only = _args("26.10-py3", cc="8.9")
    int8_only = dataclasses.replace(int8_only, variants=tuple(v for v in int8_only.variants if v.precision == "INT8"))
    lines = "\n".join(build_commands(int8_only))
    assert "--saveEngine=model.26.10.cc89.plan" in lines and "--stronglyTyped" in lines
    assert "--fp16" not in lines and "--int8" not in lines and "modelopt" not in lines


def test_a_stack_asking_the_job_for_a_tensorrt_11_fp16_plan_is_refused_in_one_line():
    refusal = _refusal(tritonBuildEngines=True, tritonImageTag="26.10-py3", gpuDriverVersion="LATEST")
    assert refusal.startswith("triton-gke:tritonImageTag") and "ModelOpt" in refusal and "trt_fp16" in refusal
    assert "26.05-py3" in refusal and len(refusal.splitlines()) == 1
    # Without the FP16 variant the same stack gets past this rule (its plans build with trtexec alone).
    other = _refusal(
        tritonBuildEngines=True, tritonImageTag="26.10-py3", gpuDriverVersion="LATEST",
        modelVariants=["original", "trt_int8"],
    )  # fmt: skip
    assert other is None or "ModelOpt" not in other


def test_a_plan_needs_fixed_inputs_with_names_trtexec_can_take():
    """trtexec's shapes are NAME:BATCHxD1x..., comma-joined: a dynamic dimension besides the batch, or a name with
    ',' or ':', cannot be built into a plan here; refused when the repository is built, naming the input."""
    variant = next(v for v in REFERENCE_VARIANTS if v.name == "trt_fp16")
    out = (configs.TensorSpec("scores", "TYPE_FP32", (10,)),)
    for spec, why in (
        (configs.TensorSpec("x", "TYPE_FP32", (3, -1, -1)), "has dims [3, -1, -1]"),
        (configs.TensorSpec("a,b", "TYPE_FP32", (3, 32, 32)), "without ',' or ':'"),
    ):
        with pytest.raises(ModelRepoError, match=re.escape(why)):
            configs.tensorrt_plan_config(
                variant, configs.ModelIO((spec,), out), False, {"7.5": "model.25.06.cc75.plan"}
            )


def test_the_job_uploads_plainly_and_stays_once_finished(prod):
    """No parallel composite upload (its temporary objects are not .plan, and the writer may not delete them); no TTL
    (a Job the TTL removed would be recreated by the next `up` after a refresh, needing a spare GPU again)."""
    (job, *_) = _jobs(prod)
    spec = job.inputs["spec"]
    assert "ttlSecondsAfterFinished" not in spec
    pod = spec["template"]["spec"]
    for container in [*pod["initContainers"], *pod["containers"]]:
        if container["name"] != "build":
            assert "export CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED=False" in container["args"][0]


def test_a_pool_with_no_spare_gpu_node_is_warned_about():
    """dev (gpuMaxNodes 1, Triton's minimum 1 pod): the Job would wait in vain; prod (6 and 2) has room."""
    dev = load_stack_settings(stack_settings("dev", tritonBuildEngines=True), stack="dev")
    (warning,) = [w for w in dev.warnings if "tritonBuildEngines" in w]
    assert "triton-gke:gpuMaxNodes 1 leaves none" in warning and "\n" not in warning
    prod = load_stack_settings(stack_settings("prod", tritonBuildEngines=True), stack="prod")
    assert not [w for w in prod.warnings if "tritonBuildEngines" in w]
    assert not [w for w in load_stack_settings(stack_settings("dev"), stack="dev").warnings if "tritonBuild" in w]


def test_fetch_and_upload_name_the_newest_version_folder_and_never_overwrite():
    fetch = "\n".join(fetch_commands(_args("25.06-py3"), "gs://b/models"))
    upload = "\n".join(upload_commands(_args("25.06-py3"), "gs://b/models"))
    assert "gcloud storage ls gs://b/models/trt_fp16/" in fetch and "sort -n | tail -1" in fetch
    assert 'gcloud storage cp --no-clobber /work/trt_fp16/model.25.06.cc75.plan gs://b/models/trt_fp16/"$(cat' in upload


def test_a_bad_compute_capability_is_refused():
    with pytest.raises(ModelRepoError, match="not MAJOR.MINOR"):
        engine_filename("25.06-py3", "75")


CCS = st.builds(lambda major, minor: f"{major}.{minor}", st.integers(1, 99), st.integers(0, 9))


@given(st.sets(CCS, min_size=1, max_size=6), st.sampled_from(["25.06-py3", "26.05-py3", "26.10-py3"]))
def test_plan_names_are_unique_per_capability_and_the_config_maps_every_one(tmp_path_factory, ccs, tag):
    filenames = cc_model_filenames(tag, ccs)
    assert set(filenames) == ccs and len(set(filenames.values())) == len(ccs)
    variant = next(v for v in REFERENCE_VARIANTS if v.name == "trt_fp16")
    io = configs.ModelIO(
        inputs=(configs.TensorSpec("input", "TYPE_FP32", (224, 224, 3)),),
        outputs=(configs.TensorSpec("probabilities", "TYPE_FP32", (1000,)),),
    )
    config = configs.tensorrt_plan_config(variant, io, False, filenames)
    folder = tmp_path_factory.mktemp("repo") / variant.name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.onnx").write_bytes(b"")  # the source the Job builds the plans from
    (folder / "config.pbtxt").write_text(configs.render(config, "test"))
    parsed = configs.validate_config_text((folder / "config.pbtxt").read_text(), folder / "config.pbtxt")
    assert parsed.platform == "tensorrt_plan" and dict(parsed.cc_model_filenames) == filenames
    assert parsed.model_warmup[0].batch_size == 1


def test_a_plan_config_without_its_plans_or_their_source_is_refused(tmp_path):
    folder = tmp_path / "trt_fp16"
    (folder / "1").mkdir(parents=True)
    text = 'name: "trt_fp16"\nplatform: "tensorrt_plan"\nmax_batch_size: 8\n' \
        'input { name: "i" data_type: TYPE_FP32 dims: [3] }\noutput { name: "o" data_type: TYPE_FP32 dims: [3] }\n' \
        'cc_model_filenames { key: "7.5" value: "model.25.06.cc75.plan" }\n'  # fmt: skip
    with pytest.raises(ModelRepoError, match="model.25.06.cc75.plan is missing, and no model.onnx"):
        configs.validate_config_text(text, folder / "config.pbtxt")
    bad = text.replace('key: "7.5"', 'key: "sm75"')
    with pytest.raises(ModelRepoError, match="not a compute capability"):
        configs.validate_config_text(bad, folder / "config.pbtxt")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_shipped_stacks_build_no_engines_unless_asked(stack):
    """Opt-in: on a pool at gpuMaxNodes (dev: one node, Triton's) the Job's pod would never be scheduled, so an `up`
    that changes it would wait for it in vain; and no plan built here has run on a GPU yet (docs/gpus.md)."""
    plan = evaluate(stack)
    assert _jobs(plan) == []
    assert not [r for r in plan.resources if r.name.startswith("engines")]


def _refusal(**overrides: object) -> str | None:
    """The settings layer's one line for prod with `overrides`, None when accepted."""
    try:
        load_stack_settings(stack_settings("prod", **overrides), stack="prod")
    except ConfigError as err:
        return str(err)
    return None
