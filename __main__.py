"""The stack: read the settings once, declare the whole system (infra/system.py TritonGkeSystem), export its outputs.

A thin user of the public component, as any program that installs triton-gke would be. The system's children were
this program's top-level resources before the component existed: the alias to the root stack keeps their identity
(https://www.pulumi.com/docs/iac/operations/stack-management/refactoring-with-aliases/, "wrapping resources in a
component"), so `pulumi up` on an existing stack moves them in its state instead of replacing them.
"""

import pulumi

from triton_gke.infra.config import load_stack_settings
from triton_gke.infra.system import TritonGkeSystem, TritonGkeSystemArgs

system = TritonGkeSystem(
    "triton-gke",
    TritonGkeSystemArgs(settings=load_stack_settings()),
    child_aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)],
)
for output, value in {
    **system.load_balancer_outputs,
    **system.inference_outputs,
    "clusters": system.clusters,
    "endpoints": system.endpoints,
    "kubeconfigs": system.kubeconfigs,
    "access": system.access,
    "modelRepository": system.model_repository,
    "tritonAdminKey": system.triton_admin_key,
    "grafanaAdminPassword": system.grafana_admin_password,
    "estimatedCost": system.estimated_cost,
}.items():
    pulumi.export(output, value)
