"""The GCS model repository bucket and the identity Triton reads it with.

Triton's pods run as a Kubernetes service account bound by Workload Identity to a Google service
account that may read this bucket and nothing else. objectViewer alone is not enough: Triton reads
bucket metadata too, which needs legacyBucketReader (triton-inference-server/server#2253).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from triton_gke.contracts.naming import model_bucket_name
from triton_gke.contracts.workloads import workload_identity_member
from triton_gke.infra.naming import gcp_name

READER_ROLES = ("roles/storage.objectViewer", "roles/storage.legacyBucketReader")
# Old model versions stay recoverable for a while after a sync replaces them, then go.
KEEP_NONCURRENT_DAYS = 30


@dataclass(frozen=True)
class ModelStoreArgs:
    project: str
    stack: str
    location: str
    force_destroy: bool
    # The Kubernetes service account Triton runs as, the same in every cluster of the stack and named per stack
    # (policy/principals.py triton_service_account): the principal is per project, not per cluster.
    kubernetes_namespace: str
    kubernetes_service_account: str
    # The Workload Identity clusters: GKE creates the project's pool (PROJECT.svc.id.goog) with the first of them,
    # and IAM refuses a binding to a pool that does not exist yet ("Identity Pool does not exist",
    # terraform-google-modules/terraform-google-kubernetes-engine#916; the module orders the two since #301).
    # An Output where the clusters are declared after this component (infra/system.py: a deferred Output).
    workload_identity_clusters: pulumi.Input[Sequence[pulumi.Resource]] = field(default_factory=tuple)


class ModelStore(pulumi.ComponentResource):
    bucket: gcp.storage.Bucket
    reader: gcp.serviceaccount.Account
    # Everything that must exist before a pod can read the bucket as `reader`: Triton waits for these.
    read_access: list[pulumi.Resource]

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:ModelStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=model_bucket_name(args.project, args.stack),  # the sandbox names its emulator bucket alike
            project=args.project,
            location=args.location,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            lifecycle_rules=[
                gcp.storage.BucketLifecycleRuleArgs(
                    action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                    condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                        with_state="ARCHIVED", days_since_noncurrent_time=KEEP_NONCURRENT_DAYS
                    ),
                )
            ],
            force_destroy=args.force_destroy,
            labels={"app": "triton", "stack": gcp_name(args.stack, max_len=63)},
            # Where models must survive (no force-destroy), Pulumi refuses any deployment that would delete the
            # bucket; `destroy` fails in its preview, before deleting anything (pulumi/pulumi#8158).
            opts=pulumi.ResourceOptions(parent=self, protect=not args.force_destroy),
        )
        self.reader = gcp.serviceaccount.Account(
            f"{name}-reader",
            account_id=gcp_name(args.stack, "triton-reader", max_len=30),
            display_name=f"Triton model reader ({args.stack})",
            project=args.project,
            opts=child,
        )
        member = self.reader.email.apply(lambda email: f"serviceAccount:{email}")
        self.read_access = [
            gcp.storage.BucketIAMMember(
                f"{name}-{role.split('.')[-1]}", bucket=self.bucket.name, role=role, member=member, opts=child
            )
            for role in READER_ROLES
        ]
        # One binding serves every cluster: the workload pool (PROJECT.svc.id.goog) is per project, so the member is
        # every pod of the project's clusters that runs as NAMESPACE/KSA, which is why the KSA is named per stack.
        self.read_access.append(
            gcp.serviceaccount.IAMMember(
                f"{name}-workload-identity",
                service_account_id=self.reader.name,
                role="roles/iam.workloadIdentityUser",
                member=workload_identity_member(
                    args.project, args.kubernetes_namespace, args.kubernetes_service_account
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=_resources(args.workload_identity_clusters)),
            )
        )
        self.register_outputs({"bucket": self.bucket.name, "reader": self.reader.email})


def _resources(resources: pulumi.Input[Sequence[pulumi.Resource]]) -> pulumi.Input[list[pulumi.Resource]]:
    """depends_on takes a list of resources or an Output of one (pulumi.ResourceOptions.depends_on)."""
    if isinstance(resources, pulumi.Output):
        return resources.apply(list)
    return list(resources)  # type: ignore[arg-type]
