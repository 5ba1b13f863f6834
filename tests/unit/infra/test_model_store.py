"""The model bucket and Triton's identity, as the dev and prod stacks declare them."""

from __future__ import annotations

from tests.support.stacks import evaluate_component, stack_settings
from triton_gke.infra.config import load_stack_settings
from triton_gke.infra.model_store import ModelStore, ModelStoreArgs

BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
DEV_PROJECT = stack_settings("dev")["gcp:project"]  # Pulumi.dev.yaml's


def test_dev_declares_a_locked_down_bucket_with_the_two_reader_roles(dev_plan):
    (bucket,) = dev_plan.of_type(BUCKET)
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["versioning"]["enabled"] is True
    assert bucket.inputs["forceDestroy"] is True  # dev is disposable
    assert bucket.inputs["location"] == "us-central1"
    # The reader's grants; the engine writer's (infra/engine_writer.py, issue 36 part D) are checked in
    # tests/unit/k8s/test_engine_build.py: the reader never gets a write role.
    grants = [g for g in dev_plan.of_type(BUCKET_IAM) if not g.name.startswith("engines-")]
    assert {g.inputs["role"] for g in grants} == {"roles/storage.objectViewer", "roles/storage.legacyBucketReader"}
    (reader,) = [a for a in dev_plan.of_type("gcp:serviceaccount/account:Account") if "reader" in a.name]
    for grant in grants:
        assert grant.inputs["bucket"] == bucket.inputs["name"], "granted on this bucket only"
        assert (
            grant.inputs["member"]
            == f"serviceAccount:{reader.inputs['accountId']}@{DEV_PROJECT}.iam.gserviceaccount.com"
        )
    assert not [g for g in dev_plan.of_type("gcp:projects/iAMMember:IAMMember") if "storage" in g.inputs["role"]]


def test_triton_service_account_is_bound_by_workload_identity(dev_plan):
    bindings = dev_plan.of_type("gcp:serviceaccount/iAMMember:IAMMember")
    (binding,) = bindings  # no engine writer unless the stack asks for engine builds (tritonBuildEngines)
    assert binding.inputs["role"] == "roles/iam.workloadIdentityUser"
    # The stack's own Kubernetes service account (issue 32: a shared triton/triton let dev act as prod's reader).
    assert binding.inputs["member"] == f"serviceAccount:{DEV_PROJECT}.svc.id.goog[triton/triton-dev]"
    assert binding.inputs["serviceAccountId"].endswith(f"dev-triton-reader@{DEV_PROJECT}.iam.gserviceaccount.com")


def test_prod_keeps_its_models_on_destroy(prod_plan):
    (bucket,) = prod_plan.of_type(BUCKET)
    assert bucket.inputs["forceDestroy"] is False


def test_model_store_alone_respects_force_destroy_and_location():
    args = ModelStoreArgs(
        "demo-project", "qa", "EU", force_destroy=False, kubernetes_namespace="ns", kubernetes_service_account="sa"
    )
    plan = evaluate_component(lambda: ModelStore("store", args))
    (bucket,) = plan.of_type(BUCKET)
    assert (bucket.inputs["location"], bucket.inputs["forceDestroy"]) == ("EU", False)
    assert bucket.inputs["name"] == "demo-project-qa-triton-models"


def test_model_settings_come_from_stack_config():
    loaded = []
    overrides = dict(
        modelVariants=["original", "trt_int8_bs16_count4"],
        modelMaxBatchSize=32,
        modelPreferredBatchSize=8,
        modelMaxQueueDelayUs=500,
        modelSmallBatchSize=8,
        modelSmallBatchInstanceCount=2,
    )
    evaluate_component(lambda: loaded.append(load_stack_settings()), "dev", **overrides)
    original, small = loaded[0].model_repo.variants
    assert (original.name, original.max_batch_size, original.preferred_batch_size) == ("original", 32, 8)
    assert (small.name, small.max_batch_size, small.preferred_batch_size, small.instance_count) == (
        "trt_int8_bs16_count4",
        8,
        8,
        2,
    )
    assert original.max_queue_delay_us == small.max_queue_delay_us == 500


def test_reference_defaults_when_the_stack_says_nothing():
    loaded = []
    evaluate_component(lambda: loaded.append(load_stack_settings()), "prod")
    variants = {v.name: v for v in loaded[0].model_repo.variants}
    assert list(variants) == ["original", "trt_fp32", "trt_fp16", "trt_int8", "trt_int8_bs16_count4"]
    assert {
        (v.max_batch_size, v.preferred_batch_size, v.max_queue_delay_us, v.instance_count)
        for n, v in variants.items()
        if n != "trt_int8_bs16_count4"
    } == {(64, 64, 20000, 1)}
    small = variants["trt_int8_bs16_count4"]
    assert (small.max_batch_size, small.preferred_batch_size, small.instance_count) == (16, 16, 4)


def test_the_engine_writer_has_its_own_principal_when_engine_builds_are_on(engine_plan):
    bindings = engine_plan("dev").of_type("gcp:serviceaccount/iAMMember:IAMMember")
    (writer,) = [b for b in bindings if b.name.startswith("engines-")]  # the engine writer's own (issue 36 part D)
    assert writer.inputs["member"] == f"serviceAccount:{DEV_PROJECT}.svc.id.goog[triton-engines/engine-builder-dev]"
