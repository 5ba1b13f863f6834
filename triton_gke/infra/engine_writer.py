"""EngineWriter: the Google service account the engine-build Jobs (k8s/engine_build.py) act as through Workload
Identity: it reads the model bucket (the ONNX models, the version folders) and may create `.plan` objects only.

Least privilege, apart from Triton's reader (infra/model_store.py), which never gets a write role:
- roles/storage.objectViewer and roles/storage.legacyBucketReader, as the reader (get and list objects);
- roles/storage.objectCreator under an IAM condition: the object's name under the model prefix, ending in `.plan`
  (plan_condition; an object's resource.name is "projects/_/buckets/BUCKET/objects/OBJECT", IAM's attribute reference
  https://cloud.google.com/iam/docs/conditions-resource-attributes#resource-name): BucketIAMMember "supports
  IAM Conditions" (https://www.pulumi.com/registry/packages/gcp/api-docs/storage/bucketiammember/), which the bucket's
  uniform bucket-level access allows (Google's sample "Add a conditional role binding" sets a resource.name condition
  on a bucket, https://cloud.google.com/storage/docs/samples/storage-add-bucket-conditional-iam-binding). No delete:
  the Job copies with --no-clobber and the plan names are new per (Triton release, compute capability).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_gcp as gcp

from triton_gke.contracts.paths import built_repository
from triton_gke.contracts.workloads import workload_identity_member
from triton_gke.infra.model_store import READER_ROLES
from triton_gke.infra.naming import gcp_name
from triton_gke.k8s.engine_build import ENGINE_NAMESPACE, EngineBuildArgs
from triton_gke.k8s.on_cluster import GKE_ACCELERATOR_LABEL
from triton_gke.model_repo.engines import plan_models
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.policy.principals import engine_service_account
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.gpu_types import shipped_gpu_types


def plan_condition(bucket: str, prefix: str) -> str:
    """The IAM condition of the writer's objectCreator grant: a `.plan` object under gs://BUCKET/PREFIX/ only."""
    return (
        f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix.strip("/")}/") '
        '&& resource.name.endsWith(".plan")'
    )


@dataclass(frozen=True)
class EngineWriterArgs:
    project: str
    stack: str
    bucket: pulumi.Input[str]
    prefix: str  # the model repository's folder in the bucket: the only place the writer may create plans
    kubernetes_service_account: str
    # What the Workload Identity binding waits for (GKE creates the project's identity pool with the first cluster).
    workload_identity_clusters: pulumi.Input[list[pulumi.Resource]] | None = None


class EngineWriter(pulumi.ComponentResource):
    account: gcp.serviceaccount.Account
    # The grants and binding a build pod needs before it can read and write: the Job waits for them.
    access: list[pulumi.Resource]

    def __init__(self, name: str, args: EngineWriterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:EngineWriter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            f"{name}-account",
            account_id=gcp_name(args.stack, "engine-writer", max_len=30),
            display_name=f"TensorRT engine writer ({args.stack})",
            project=args.project,
            opts=child,
        )
        member = self.account.email.apply(lambda email: f"serviceAccount:{email}")
        self.access = [
            gcp.storage.BucketIAMMember(
                f"{name}-{role.split('.')[-1]}", bucket=args.bucket, role=role, member=member, opts=child
            )
            for role in READER_ROLES
        ]
        self.access.append(
            gcp.storage.BucketIAMMember(
                f"{name}-objectCreator",
                bucket=args.bucket,
                role="roles/storage.objectCreator",
                member=member,
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    title="tensorrt-plans-only",
                    expression=pulumi.Output.from_input(args.bucket).apply(lambda b: plan_condition(b, args.prefix)),
                ),
                opts=child,
            )
        )
        clusters = args.workload_identity_clusters
        self.access.append(
            gcp.serviceaccount.IAMMember(
                f"{name}-workload-identity",
                service_account_id=self.account.name,
                role="roles/iam.workloadIdentityUser",
                member=workload_identity_member(args.project, ENGINE_NAMESPACE, args.kubernetes_service_account),
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=clusters.apply(list) if isinstance(clusters, pulumi.Output) else None
                ),
            )
        )
        self.register_outputs({"account": self.account.email})


def engine_build_args(
    settings: Any,
    repository: pulumi.Input[str],
    writer: EngineWriter,
    digest: str,
    after: Sequence[pulumi.Resource],
    model_dir: Path | None = None,
) -> EngineBuildArgs | None:
    """The EngineBuildArgs of a stack's GPU pool (StackSettings: model_repo, gpu_pool, stack); None without a TensorRT
    variant. `after`: what the Job waits for besides the writer's access (the model upload, the APIs). `model_dir`: the
    built repository (default the project's build/model_repository), whose plan models say what each plan is built
    for: precision and batch as built, inputs as their configs name them (a user's ONNX has its own)."""
    if not any(v.uses_tensorrt for v in settings.model_repo.variants):
        return None
    try:
        variants = plan_models(model_dir if model_dir is not None else built_repository())
    except ModelRepoError as err:
        raise ConfigError(f"tritonBuildEngines: {err}") from None
    accelerator = settings.gpu_pool.accelerator_type
    return EngineBuildArgs(
        triton_image_tag=settings.model_repo.triton_image_tag,
        model_repository=repository,
        variants=variants,
        accelerator_type=accelerator,
        compute_capability=shipped_gpu_types()[accelerator].compute_capability,
        writer_email=writer.account.email,
        service_account=engine_service_account(settings.stack),
        model_digest=digest,
        node_selector={GKE_ACCELERATOR_LABEL: accelerator},
        depends_on=(*writer.access, *after),
    )
