"""The lifecycle of one region's zonal NEGs, which GKE's NEG controller (not Pulumi) creates and deletes.

Triton's `triton-neg` Service carries a `cloud.google.com/neg` annotation; the controller then creates one NEG per
named port in each zone of the cluster that has nodes, and deletes them with the Service, but only when it gets to.
GKE's standalone-NEG guide, "Prevent leaked NEGs"
(https://cloud.google.com/kubernetes-engine/docs/how-to/standalone-neg): when you delete a cluster, standalone NEGs
are not deleted if the NEGs are still referenced by a backend service, or if the cluster deletion process shuts down
the NEG controller before the controller deletes the NEGs; to prevent leaked NEGs, dereference them from the backend
service and delete all NEGs before you delete the cluster. A leaked NEG keeps its subnet and VPC from being deleted,
and a later cluster of the same name cannot create its NEG under the taken name. Hence two commands per region:

- `cleanup` removes every NEG of the region's names in the region's zones on delete, and on create only stale ones
  (what a destroyed earlier cluster of the same name left: no endpoints, no backend service using them), so adding
  this component to a running stack keeps its live NEGs. It depends on the cluster, and the NEG Service depends on
  it, so
  `pulumi destroy` runs it after the Service and the backend services that use the NEGs are gone and before the
  cluster (and so the subnet and the VPC) is deleted: Pulumi deletes in the reverse order of dependencies
  (https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/).
- `ready` waits, after the NEG Service exists, until the NEGs exist in every zone of the region, so the backend
  services that name them (by URL, never by a lookup) are created or updated only then.

What pulumi-command v1.2.1 does with a change (provider/pkg/provider/common/inputs.go,
provider/pkg/provider/local/commandController.go, https://github.com/pulumi/pulumi-command/tree/v1.2.1): `triggers` is
tagged replaceOnChanges, so a new value REPLACES the resource (create the new one, then run the old one's `delete`);
any other changed input (`create`, `update`, `delete`, `environment`) is an in-place update that runs `update` if
given, else `create`; `delete` runs with the inputs recorded in the state. So `cleanup` never names a zone (it finds
the NEGs with the aggregated list), its triggers are only the project, region and NEG names (which NEGs it owns:
a new set replaces it, and the old one removes the old names once nothing uses them), and its `update` does nothing,
so no update ever deletes the live NEGs. `ready` has the zone list in its triggers: an added zone replaces it, so it
waits again, and it has no `delete`.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_command as command

from triton_gke.infra.model_upload import VENV_PYTHON

MODULE = "triton_gke.infra.neg_cleanup"
# The node start-up budget, the one place it is defined: how long a zone may take from "a node is asked for" to "its
# NEGs exist". A new zone's NEGs appear only once a node runs there (GKE creates a zone's NEGs only where it has nodes;
# ingress-gce transaction.go listTargetZonesPerSubnet), so:
# - a node becoming ready: at most 15 minutes, the time after which the cluster autoscaler itself gives up on a node
#   it asked for (kubernetes/autoscaler cluster-autoscaler/FAQ.md, its parameters table: "max-node-provision-time |
#   Maximum time CA waits for node to be provisioned | 15 minutes"); a new GPU node takes ~4-7 min plus driver
#   install and image pull (../shared/reference/architecture.md, "Lessons from the original's users");
# - then the NEG controller creating the zone's NEGs: a node in a new zone triggers a sync of the GCE_VM_IP_PORT
#   syncers at once (kubernetes/ingress-gce@acbcf5d66dd9d31297a2a52a2d7d83d4c1a94539 pkg/neg/manager.go SyncNodes,
#   "When a zone change occurs ... a sync should be triggered"), and an event it missed is picked up at the
#   informers' resync at the latest (pkg/flags/flags.go --sync-period, default 10 minutes, "Relist and confirm cloud
#   resources this often"): that period is the controller's share.
NODE_READY_BUDGET_S = 15 * 60
NEG_CONTROLLER_RESYNC_S = 10 * 60
NODE_STARTUP_BUDGET_S = NODE_READY_BUDGET_S + NEG_CONTROLLER_RESYNC_S
# Bounds of the two waits: deleting waits out backend services that still use a NEG and the NEG controller's own
# deletes; readiness waits out the node start-up budget.
CLEANUP_TIMEOUT_S = 900
READY_TIMEOUT_S = NODE_STARTUP_BUDGET_S
UPDATE_NOTHING = "echo 'NEG cleanup runs on create and delete only'"


def neg_url(project: str, zone: str, name: str) -> str:
    """The NEG's URL as the Compute API returns it (selfLink) and the Google provider stores a backend's `group`.

    The provider reads `group` back as ConvertSelfLinkToV1(selfLink) (flattenComputeBackendServiceBackendGroup)
    and keys the backends set on GetRelativePath(group) (resourceGoogleComputeBackendServiceBackendHash), both in
    google/services/compute/resource_compute_backend_service.go of hashicorp/terraform-provider-google (v7.45.0 and
    main): this v1 URL is exactly what it reads back, so a second `pulumi up` sees no diff.
    """
    return f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/networkEndpointGroups/{name}"


@dataclass(frozen=True)
class ZonalNegsArgs:
    project: str
    region: str
    zones: tuple[str, ...]
    # The NEG names of the region's cluster (k8s.triton.neg_names), one per port.
    neg_names: tuple[str, ...]
    # The cluster the NEG controller runs in (the GkeCluster component: its cluster and node pools): `cleanup` runs
    # after it exists and before it is deleted.
    cluster: pulumi.Resource
    # The Service whose annotation makes GKE create the NEGs. An Output (pulumi.deferred_output) where that Service is
    # declared after this component, as it must be: it waits for `cleanup`.
    neg_service: pulumi.Input[pulumi.Resource]
    cleanup_timeout_s: int = CLEANUP_TIMEOUT_S
    ready_timeout_s: int = READY_TIMEOUT_S
    # The interpreter that runs triton_gke.infra.neg_cleanup (infra/model_upload.py VENV_PYTHON: why this default).
    python: str = VENV_PYTHON


def _command_line(python: str, subcommand: str, options: Sequence[tuple[str, str | int]]) -> str:
    words = [python, "-m", MODULE, subcommand]
    for option, value in options:
        words += [f"--{option}", str(value)]
    return shlex.join(words)


class ZonalNegs(pulumi.ComponentResource):
    cleanup: command.local.Command
    ready: command.local.Command

    def __init__(self, name: str, args: ZonalNegsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:ZonalNegs", name, None, opts)
        names = [("name", n) for n in args.neg_names]
        remove = _command_line(
            args.python,
            "remove",
            [("project", args.project), ("region", args.region), *names, ("timeout-s", args.cleanup_timeout_s)],
        )
        self.cleanup = command.local.Command(
            f"{name}-cleanup",
            # On create only stale NEGs: a stack deployed before this component has live NEGs under these names.
            create=f"{remove} --stale-only",
            update=UPDATE_NOTHING,
            delete=remove,
            triggers=[args.project, args.region, *args.neg_names],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster]),
        )
        wait = _command_line(
            args.python,
            "wait",
            [
                ("project", args.project),
                *(("zone", z) for z in args.zones),
                *names,
                ("timeout-s", args.ready_timeout_s),
            ],
        )
        self.ready = command.local.Command(
            f"{name}-ready",
            create=wait,
            triggers=list(args.zones),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.cleanup, args.neg_service]),
        )
        self.register_outputs({"cleanup": self.cleanup.id, "ready": self.ready.id})
