"""The Google Cloud APIs the stack calls, enabled by the stack itself, and every Google Cloud resource made to wait for
the API it is created through.

On a project where an API is off, the first call fails with "... API has not been used in project ... before or it
is disabled" (e.g. terraform-google-modules/terraform-google-project-factory#715), so the first `pulumi up` on a fresh
project would fail half-way. Each API is a `gcp.projects.Service`; a stack transformation gives every `gcp:` resource
created after it an explicit dependency on the service of its API (API_BY_MODULE), so no resource races the enablement,
whichever component declares it now or later.

Enabling a service is itself a Service Usage API call
(https://www.pulumi.com/registry/packages/gcp/api-docs/projects/service/: "This resource requires the Service Usage API
to use"), so serviceusage.googleapis.com cannot be enabled from here; it is on by default in new projects
(https://cloud.google.com/service-usage/docs/enabled-service, cited in hashicorp/terraform-provider-google#16883).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

SERVICE_TYPE = "gcp:projects/service:Service"
# The API each pulumi-gcp module calls (the module is the part of the type token before the slash).
API_BY_MODULE: dict[str, str] = {
    "compute": "compute.googleapis.com",  # VPC, NAT, firewall, load balancer, Cloud Armor, managed certificate
    "container": "container.googleapis.com",  # clusters, node pools
    "storage": "storage.googleapis.com",  # the model bucket and its IAM members
    "serviceaccount": "iam.googleapis.com",  # service accounts and their IAM members
    "projects": "cloudresourcemanager.googleapis.com",  # project IAM members (projects.setIamPolicy)
}
# Called by the pods, not by Pulumi: Workload Identity lets Triton act as its Google service account through short-lived
# tokens of the IAM Service Account Credentials API, which must be enabled
# (https://cloud.google.com/iam/docs/create-short-lived-credentials-direct#before-you-begin).
WORKLOAD_APIS: tuple[str, ...] = ("iamcredentials.googleapis.com",)
REQUIRED_APIS: tuple[str, ...] = (*API_BY_MODULE.values(), *WORKLOAD_APIS)


def api_of(type_token: str) -> str | None:
    """The API a `gcp:` resource type is created through; None for other providers and for unknown modules."""
    package, _, rest = type_token.partition(":")
    if package != "gcp" or type_token == SERVICE_TYPE:
        return None
    return API_BY_MODULE.get(rest.split("/", 1)[0])


@dataclass(frozen=True)
class ProjectServicesArgs:
    project: str


class ProjectServices(pulumi.ComponentResource):
    """One `gcp.projects.Service` per required API, left enabled on destroy."""

    services: dict[str, gcp.projects.Service]

    def __init__(self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:ProjectServices", name, None, opts)
        self.services = {
            api: gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=args.project,
                service=api,
                # Destroying this stack must not switch an API off for the whole project: other stacks and tools in
                # the same project use it too, and the provider's own docs advise true only where the configuration
                # manages the project itself (https://www.pulumi.com/registry/packages/gcp/api-docs/projects/service/;
                # Google made false the default for that reason, hashicorp/terraform-provider-google#18058).
                disable_on_destroy=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in REQUIRED_APIS
        }
        self.register_outputs({"services": list(self.services)})

    @property
    def for_workloads(self) -> list[pulumi.Resource]:
        """What pods that call Google APIs through Workload Identity must wait for."""
        return [self.services[api] for api in WORKLOAD_APIS]

    def wait_for_apis(self, args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        """A resource transform: a `gcp:` resource also depends on the service of its API.

        Explicit dependencies order creation and, reversed, deletion
        (https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/). Where it runs decides whether the
        dependency is kept: see infra/system.py.
        """
        api = api_of(args.type_)
        if api is None:
            return None
        needs = pulumi.ResourceOptions(depends_on=[self.services[api]])
        return pulumi.ResourceTransformResult(args.props, pulumi.ResourceOptions.merge(args.opts, needs))
