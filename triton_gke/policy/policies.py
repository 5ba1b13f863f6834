"""The guardrails of triton-gke as CrossGuard resource policies.

Every check is a plain function `validate(args, report_violation)` so tests call it directly on the
mock-registered state; __main__.py only puts the policies below into a PolicyPack (which serves gRPC
forever once built). This module needs nothing but pulumi-policy and the standard library: the pack
runs in its own virtualenv, apart from the program it checks, and never trusts that program's constants.

Properties arrive as Pulumi gives them to policies: the resource's inputs, camelCase, lists and maps
wrapped in read-only proxies (so: Mapping and Sequence, never list or dict checks).
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

if __package__:  # imported as triton_gke.policy.policies: the tests and the settings layer, beside the program
    from .address_space import internet_problem, parse, show_union
    from .principals import (
        ENGINE_ACCOUNT,
        TRITON_ACCOUNT,
        engine_service_account,
        fits,
        is_stack_principal,
        triton_service_account,
    )
else:  # the CLI runs the pack with this folder itself on sys.path (runpy.run_path of the folder)
    from address_space import internet_problem, parse, show_union
    from principals import (
        ENGINE_ACCOUNT,
        TRITON_ACCOUNT,
        engine_service_account,
        fits,
        is_stack_principal,
        triton_service_account,
    )

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
BUCKET = "gcp:storage/bucket:Bucket"
FIREWALL = "gcp:compute/firewall:Firewall"
# Who may act as a Google service account: its IAM member, binding and whole policy.
SA_IAM_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
SA_IAM_BINDING = "gcp:serviceaccount/iAMBinding:IAMBinding"
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
SERVICE = "kubernetes:core/v1:Service"
# Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "kubernetes:core/v1:Pod": ("spec",),
}

# The GPU taint of contracts/placement.py (GPU_TAINT_KEY, GPU_TAINT_EFFECT_GKE), copied, not imported: the CLI runs
# the pack with only this folder on sys.path (policy/__main__.py), so `contracts` is not importable there.
# tests/unit/contracts/test_contracts.py fails when the copies differ.
GPU_TAINT_KEY = "nvidia.com/gpu"
# NoExecute also keeps other pods off (and evicts them), so it satisfies the rule too.
GPU_TAINT_EFFECTS = ("NO_SCHEDULE", "NO_EXECUTE")
# Accelerator-optimised machine types carry GPUs without a guestAccelerators block.
GPU_MACHINE_TYPE = re.compile(r"^(a2|a3|a4|g2|g4)-")
DEFAULT_COMPUTE_SA = re.compile(r"^\d+-compute@developer\.gserviceaccount\.com$")
WEB_UIS = ("grafana", "prometheus", "locust")
# The web ports the three serve by default: Grafana 3000, Prometheus 9090, the Locust web UI 8089
# (https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/ http_port,
# https://manpages.ubuntu.com/manpages/bionic/man1/prometheus.1.html --web.listen-address,
# locust 2.47 locust/argument_parser.py --web-port default=8089).
WEB_UI_PORTS = {3000: "grafana", 9090: "prometheus", 8089: "locust"}
# Programs a container runs that serve one of the UIs (the Grafana image runs grafana-server or `grafana server`).
WEB_UI_PROGRAMS = {"grafana": "grafana", "grafana-server": "grafana", "prometheus": "prometheus", "locust": "locust"}
TRITON_PROGRAM = "tritonserver"
# NGC's Triton images run their arguments through /opt/nvidia/nvidia_entrypoint.sh: `docker run IMAGE tritonserver
# --model-repository=...` (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/
# getting_started/quickstart.html), so a container without a command of such an image runs what its args say, and
# an image built FROM it may run tritonserver as its CMD: treat both as Triton.
TRITON_REPOSITORY = "nvcr.io/nvidia/tritonserver"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
TRITON_RESTRICTED_APIS = frozenset({"model-repository", "shared-memory", "logging", "trace"})
TRITON_RESTRICTION_FLAGS = ("--http-restricted-api", "--grpc-restricted-protocol")
DEFAULT_PROD_STACKS = ("prod",)

# A stack's two Kubernetes service accounts, Triton's and the engine-build Job's (infra/engine_writer.py binds the
# second when the stack sets tritonBuildEngines), are named by principals.py, beside this file: the program imports
# the same module, so the names it binds and the names accepted here are one function's. Their namespaces are
# copied, not imported (k8s/engine_build.py ENGINE_NAMESPACE, contracts/workloads.py TRITON_NAMESPACE), and
# compared by tests/unit/policy/test_principals.py.
ENGINE_NAMESPACE = "triton-engines"
# The namespace Triton's service account lives in (contracts/workloads.py TRITON_NAMESPACE), copied likewise.
TRITON_NAMESPACE = "triton"
# The shared name every stack used before Triton's service account was named per stack.
SHARED_TRITON_PRINCIPAL = ("triton", "triton")
# Members of the GKE workload pool PROJECT.svc.id.goog (a fleet's pool has the same form), as Google writes them:
# - serviceAccount:POOL[NAMESPACE/KSA], one Kubernetes service account
#   (https://cloud.google.com/kubernetes-engine/multi-cloud/docs/attached/aks/concepts/workload-identity: "Kubernetes
#   service account principals ... serviceAccount:WORKLOAD_IDENTITY_POOL_NAME[KSA_NAMESPACE/KSA_NAME]");
# - principal://iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/subject/ns/NS/sa/KSA,
#   the same account in the principal-identifier syntax, and principalSet://.../workloadIdentityPools/POOL/ followed
#   by namespace/NS, kubernetes.cluster/https://container.googleapis.com/v1/projects/P/locations/L/clusters/C ("All
#   GKE Pods in a specific cluster"), * (the whole pool) and the attribute sets
#   (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity, the table of principal identifiers;
#   https://cloud.google.com/iam/docs/principal-identifiers).
# Only the exact one-account forms below name a single account; anything else that mentions a *.svc.id.goog pool
# (any case, any suffix) is a set of pods, or a spelling this pack cannot judge, and counts as one: fail closed.
_POOL = r"[a-z0-9][a-z0-9.-]*\.svc\.id\.goog"
# Names are parsed loosely and then compared exactly with the stack's own.
_NAME = r"[^/\[\]\s]+"
_KSA_MEMBER = re.compile(rf"serviceAccount:{_POOL}\[(?P<ns>{_NAME})/(?P<ksa>{_NAME})\]")
_KSA_PRINCIPAL = re.compile(
    rf"principal://iam\.googleapis\.com/projects/\d+/locations/global/workloadIdentityPools/{_POOL}"
    rf"/subject/ns/(?P<ns>{_NAME})/sa/(?P<ksa>{_NAME})"
)
_NAMESPACE_SET = re.compile(
    rf"principalSet://iam\.googleapis\.com/projects/\d+/locations/global/workloadIdentityPools/{_POOL}"
    rf"/namespace/(?P<ns>{_NAME})"
)
_IN_WORKLOAD_POOL = re.compile(r"svc\.id\.goog", re.IGNORECASE)
# Who may act as a Google service account, or read what it reads: IAM member, binding and whole-policy resources of
# any GCP resource (gcp:storage/bucketIAMMember:BucketIAMMember, gcp:projects/iAMPolicy:IAMPolicy, ...). Grants on a
# project, folder or organization reach every service account in it.
_IAM_GRANT = re.compile(r"gcp:(?P<module>[A-Za-z0-9]+)/[A-Za-z0-9]*?[iI][aA][mM](?P<kind>Member|Binding|Policy):\w+")
_ABOVE_SERVICE_ACCOUNTS = ("projects", "folder", "organizations")


# ---------------------------------------------------------------- property access


def get(props: Any, *path: str | int) -> Any:
    """props[path[0]][path[1]]..., or None where any step is missing (unknown values still raise)."""
    for step in path:
        if not _has(props, step):
            return None
        props = props[step]
    return props


def _has(props: Any, step: str | int) -> bool:
    if isinstance(step, int):
        return _is_list(props) and step < len(props)
    return isinstance(props, Mapping) and step in props


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


def items(value: Any) -> list[Any]:
    """A list property as a list (missing: empty)."""
    return list(value) if _is_list(value) else []


def node_configs(args: ResourceValidationArgs) -> Iterator[tuple[str, Any]]:
    """(label, nodeConfig) of every node pool a resource creates; None where the pool has no nodeConfig.

    A cluster always creates its default pool from its own nodeConfig, even when it removes that pool
    right after, and may declare more pools inline.
    """
    props = args.props
    if args.resource_type == NODE_POOL:
        yield "node pool", get(props, "nodeConfig")
    elif args.resource_type == CLUSTER and not get(props, "enableAutopilot"):
        yield "default node pool", get(props, "nodeConfig")
        for index, pool in enumerate(items(get(props, "nodePools"))):
            yield f"inline node pool {get(pool, 'name') or index}", get(pool, "nodeConfig")


def stack_of(urn: str) -> str:
    """The stack in a URN: urn:pulumi:STACK::PROJECT::TYPE::NAME."""
    head = urn.split("::", 1)[0]
    return head.split(":", 2)[2] if head.count(":") >= 2 else ""


# ---------------------------------------------------------------- GKE


def has_gpus(node_config: Any) -> bool:
    accelerators = items(get(node_config, "guestAccelerators"))
    machine_type = get(node_config, "machineType") or ""
    return any((get(a, "count") or 0) > 0 for a in accelerators) or bool(GPU_MACHINE_TYPE.match(machine_type))


def validate_gpu_taint(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for label, config in node_configs(args):
        if not has_gpus(config):
            continue
        taints = items(get(config, "taints"))
        if not any(get(t, "key") == GPU_TAINT_KEY and get(t, "effect") in GPU_TAINT_EFFECTS for t in taints):
            report_violation(
                f"{label} has GPUs but no '{GPU_TAINT_KEY}' NO_SCHEDULE taint: pods that do not ask for a GPU "
                "could take the node (and keep it, and its cost, from scaling down)",
                None,
            )


def validate_workload_identity(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    is_cluster = args.resource_type == CLUSTER and not get(args.props, "enableAutopilot")  # Autopilot: always on
    if is_cluster and not get(args.props, "workloadIdentityConfig", "workloadPool"):
        report_violation(
            "cluster has no workloadIdentityConfig.workloadPool (PROJECT.svc.id.goog): pods would act as "
            "the node's service account instead of their own",
            None,
        )
    for label, config in node_configs(args):
        mode = get(config, "workloadMetadataConfig", "mode")
        # The cluster's own pools inherit the cluster's setting; a separate NodePool must say it.
        if mode != "GKE_METADATA" and (mode is not None or args.resource_type == NODE_POOL):
            report_violation(
                f"{label} has workloadMetadataConfig.mode {mode!r}; expected 'GKE_METADATA' so pods reach the "
                "GKE metadata server (Workload Identity), never the node's credentials",
                None,
            )


def validate_node_service_account(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for label, config in node_configs(args):
        account = (get(config, "serviceAccount") or "").strip()
        if not account or account == "default" or DEFAULT_COMPUTE_SA.match(account):
            shown = repr(account) if account else "none (the default compute service account)"
            report_violation(
                f"{label} runs as service account {shown}; give nodes a dedicated least-privilege account "
                "(the default compute account is often a project Editor)",
                None,
            )


def validate_shielded_nodes(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    # The provider's default for enableShieldedNodes is true: only an explicit false is a problem.
    if args.resource_type == CLUSTER and get(args.props, "enableShieldedNodes") is False:
        report_violation("cluster sets enableShieldedNodes: false; shielded GKE nodes must stay on", None)
    for label, config in node_configs(args):
        if get(config, "shieldedInstanceConfig", "enableSecureBoot") is not True:
            report_violation(
                f"{label} does not set shieldedInstanceConfig.enableSecureBoot: true (off by default); "
                "secure boot keeps unsigned boot components and kernel modules off the nodes",
                None,
            )


def validate_prod_deletion_protection(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    prod_stacks = tuple(args.get_config().get("prodStacks") or DEFAULT_PROD_STACKS)
    stack = stack_of(args.urn)
    if stack not in prod_stacks:
        return
    # Missing deletionProtection is the provider's default, true; only an explicit false disarms it.
    if args.resource_type == CLUSTER and get(args.props, "deletionProtection") is False:
        report_violation(
            f"stack {stack!r} is a production stack: the cluster needs deletionProtection: true "
            "(set triton-gke:deletionProtection)",
            None,
        )
    if args.resource_type == BUCKET and get(args.props, "forceDestroy") is True:
        report_violation(
            f"stack {stack!r} is a production stack: the model bucket must not set forceDestroy: true "
            "(set triton-gke:bucketForceDestroy: false)",
            None,
        )


def kubernetes_principal(member: str) -> tuple[str, str | None] | None:
    """(namespace, service account) of a workload-pool member naming one Kubernetes service account, (namespace, None)
    for every account of a namespace (principalSet .../namespace/NS); None for anything else."""
    for pattern in (_KSA_MEMBER, _KSA_PRINCIPAL):
        found = pattern.fullmatch(member)
        if found:
            return found.group("ns"), found.group("ksa")
    found = _NAMESPACE_SET.fullmatch(member)
    return (found.group("ns"), None) if found else None


def is_workload_pool_member(member: str) -> bool:
    """Whether a member names Kubernetes workloads of a GKE workload pool (PROJECT.svc.id.goog), in any spelling."""
    return bool(_IN_WORKLOAD_POOL.search(member))


def stack_principals(stack: str) -> tuple[tuple[str, str], ...]:
    """The Kubernetes service accounts (namespace, name) of `stack`'s own pods: Triton's and the engine-build Job's."""
    return (TRITON_NAMESPACE, triton_service_account(stack)), (ENGINE_NAMESPACE, engine_service_account(stack))


def principal_problem(member: str, stack: str) -> str | None:
    """Why a workload-pool member is not one of `stack`'s own Kubernetes service accounts, as a phrase that follows
    the member ("... to MEMBER, which PROBLEM"); None when it is one, or names no Kubernetes workload at all.

    Every cluster of a project maps NAMESPACE/KSA to the same principal, whichever stack created the cluster
    (https://cloud.google.com/kubernetes-engine/fleet-management/docs/best-practices-workload-identity: "workloads
    running in a specific namespace share the same IAM identity across clusters within a project"). So only the
    exact principal of one of the stack's own service accounts is its own; a namespace, a cluster or the whole pool
    reaches pods of every stack (and of anyone else who may run a pod in the project's clusters).
    """
    if not is_workload_pool_member(member):
        return None
    principal = kubernetes_principal(member)
    own = " or ".join("/".join(p) for p in stack_principals(stack))
    if principal is None:
        return (
            "is a set of pods of the workload pool (a whole cluster, the whole pool or an attribute set) or a "
            f"spelling this policy cannot read, not one of the service accounts of stack {stack!r} ({own})"
        )
    namespace, account = principal
    if account is None:
        return (
            f"is every service account of namespace {namespace!r}, not one of the service accounts of stack "
            f"{stack!r} ({own})"
        )
    if (namespace, account) == SHARED_TRITON_PRINCIPAL:
        return "is the shared triton/triton, the same principal in every stack's clusters of the project"
    if (namespace, account) not in stack_principals(stack):
        return f"is {namespace}/{account}, not one of the service accounts of stack {stack!r} ({own})"
    return None


def _known(props: Any, *path: str | int) -> Any:
    """get(), with None for a value still unknown at preview (the grant is judged on `up`, when it is known)."""
    try:
        return get(props, *path)
    except UnknownValueError:
        return None


def iam_grants(args: ResourceValidationArgs) -> list[tuple[str | None, str]] | None:
    """(role, member) of every grant an IAM member, binding or policy resource makes; None for other resources.

    A policy's `policyData` is the JSON of an IAM policy ({"bindings": [{"role": ..., "members": [...]}]}); a text
    that is not one yields a single grant of role None to the text itself, judged as a member (fail closed). Values
    unknown at preview are left out.
    """
    found = _IAM_GRANT.fullmatch(args.resource_type)
    if not found:
        return None
    props = args.props
    kind = found.group("kind")
    role = _known(props, "role")
    if kind == "Member":
        pairs = [(role, _known(props, "member"))]
    elif kind == "Binding":
        pairs = [(role, _known(props, "members", i)) for i in range(len(items(_known(props, "members"))))]
    else:
        data = _known(props, "policyData")
        try:
            policy = json.loads(data) if isinstance(data, str) else None
        except ValueError:
            return [(None, str(data))]
        pairs = [(_known(b, "role"), m) for b in items(_known(policy, "bindings")) for m in items(_known(b, "members"))]
    return [(None if r is None else str(r), str(m)) for r, m in pairs if m is not None]


def validate_workload_identity_per_stack(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Only the stack's own Kubernetes service accounts are granted anything; nothing on the workload pool may act as
    every service account of a project (workloadIdentityUser on a project, folder or organization)."""
    grants = iam_grants(args)
    if grants is None:
        return
    kind = args.resource_type.rsplit(":", 1)[-1]
    level = args.resource_type.split(":", 2)[1].split("/", 1)[0]
    stack = stack_of(args.urn)
    for role, member in grants:
        if not is_workload_pool_member(member):
            continue
        if level in _ABOVE_SERVICE_ACCOUNTS and role == WORKLOAD_IDENTITY_USER:
            report_violation(
                f"{kind} {args.name!r} grants {WORKLOAD_IDENTITY_USER} on the whole {level.rstrip('s')} to "
                f"{member!r}, which lets those pods act as every service account in it; bind the role on the one "
                "service account instead (gcp.serviceaccount.IAMMember)",
                None,
            )
            continue
        problem = principal_problem(member, stack)
        if problem is None:
            continue
        if role == WORKLOAD_IDENTITY_USER:
            why = "so pods of other stacks' clusters in the project could act as this service account"
        else:
            why = "so pods of other stacks' clusters in the project could use this grant"
        report_violation(f"{kind} {args.name!r} grants {role or 'a role'} to {member!r}, which {problem}, {why}", None)


# ---------------------------------------------------------------- the Kubernetes side of Workload Identity
# The IAM side above keeps a stack's grants to its own principals; this side keeps its Kubernetes objects from BEING
# another stack's. The principal is serviceAccount:PROJECT.svc.id.goog[KSA_NAMESPACE/KSA_NAME], KSA_NAMESPACE being
# the cluster namespace the service account is in (https://cloud.google.com/kubernetes-engine/multi-cloud/docs/
# attached/aks/concepts/workload-identity), one principal for that namespace and name in every cluster of the
# project ("workloads running in a specific namespace share the same IAM identity across clusters within a project",
# https://cloud.google.com/kubernetes-engine/fleet-management/docs/best-practices-workload-identity): a
# ServiceAccount triton/triton-prod in dev's cluster, or a pod of dev's running as it, gets what prod bound to
# triton/triton-prod (its bucket reader). The same name in any other namespace is another principal that no stack's
# program binds, so only the principal namespaces are judged, each with its account's names (principals.py).
PRINCIPAL_ACCOUNTS = {TRITON_NAMESPACE: TRITON_ACCOUNT, ENGINE_NAMESPACE: ENGINE_ACCOUNT}
# Where a kind keeps the pod spec its pods run from, in every API version the provider offers and in its Patch
# resource ("Patch resources are used to modify existing Kubernetes resources by using Server-Side Apply updates",
# https://www.pulumi.com/registry/packages/kubernetes/api-docs/apps/v1/deploymentpatch/): a DeploymentPatch can set
# an existing Deployment's serviceAccountName.
POD_SPEC_BY_KIND: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
}
KSA_KIND = "ServiceAccount"
# A pod runs as spec.serviceAccountName, or the older spec.serviceAccount: "DeprecatedServiceAccount is a deprecated
# alias for ServiceAccountName" (https://pub.dev/documentation/pulumi_kubernetes/latest/core/PodSpec/serviceAccount.html,
# the PodSpec field docs the provider generates from Kubernetes' API). Both are judged.
POD_ACCOUNT_FIELDS = ("serviceAccountName", "serviceAccount")


def kubernetes_kind(resource_type: str) -> str | None:
    """The Kubernetes kind a pulumi-kubernetes resource type declares or patches (kubernetes:apps/v1:DeploymentPatch:
    Deployment); None for other packages."""
    if not resource_type.startswith("kubernetes:"):
        return None
    return resource_type.rsplit(":", 1)[-1].removesuffix("Patch")


def object_namespace(args: ResourceValidationArgs) -> str | None:
    """The namespace a namespaced object lands in, or None where the pack cannot know it.

    metadata.namespace where given; else the kubernetes provider's `namespace` where the pack sees it; else the
    kubeconfig context's namespace, which the pack never sees: pulumi-kubernetes uses "the discovered kubeconfig
    namespace when one isn't provided by the Provider configuration instead of default"
    (https://github.com/pulumi/pulumi-kubernetes/pull/1896). A value unknown at preview is unknown here too.
    """
    for props, path in (
        (args.props, ("metadata", "namespace")),
        (getattr(args.provider, "props", None), ("namespace",)),
    ):
        value = _known(props, *path) if props is not None else None
        if isinstance(value, str) and value:
            return value
    return None


def foreign_principal(namespace: str | None, name: str, stack: str) -> str | None:
    """Whose principal a Kubernetes service account `namespace`/`name` is, as a phrase, when it is not `stack`'s own:
    another stack's (a name of principals.py's shape, is_stack_principal) or the shared triton/triton; None for the
    stack's own and for names no stack's program binds. namespace None (not knowable): judged in each principal
    namespace, since the object may land in any of them (fail closed)."""
    for candidate in (namespace,) if namespace is not None else tuple(PRINCIPAL_ACCOUNTS):
        account = PRINCIPAL_ACCOUNTS.get(candidate)
        principal = (candidate, name)
        if account is None or principal in stack_principals(stack):
            continue
        if principal == SHARED_TRITON_PRINCIPAL:
            return "triton/triton, the principal every stack's Triton shared before each had its own"
        if is_stack_principal(account, name):
            other = name.removeprefix(f"{account}-")
            # A label of the shape is stack `other`'s name as it is; anything else only has another stack's shape.
            whose = (
                f"the Workload Identity principal of stack {other!r}"
                if fits(name)
                else "in the shape of another stack's Workload Identity principal"
            )
            return f"{candidate}/{name}, {whose}"
    return None


def named_accounts(args: ResourceValidationArgs) -> list[tuple[str, str]]:
    """(what the object does with it, Kubernetes service account name) for a ServiceAccount or a pod template.

    A ServiceAccount without metadata.name is auto-named: "Pulumi auto-names most resources by default, using the
    logical name and a random suffix" (https://www.pulumi.com/docs/iac/concepts/resources/names/), so its name starts
    with the resource's name and '-'; the suffix stands as '*'. Names unknown at preview are left for `up`.
    """
    kind = kubernetes_kind(args.resource_type)
    if kind == KSA_KIND:
        name = _known(args.props, "metadata", "name")
        return [("creates service account", str(name) if name else f"{args.name}-*")]
    path = POD_SPEC_BY_KIND.get(kind or "")
    spec = _known(args.props, *path) if path else None
    found = [_known(spec, field) for field in POD_ACCOUNT_FIELDS] if spec is not None else []
    return [("runs its pods as service account", str(name)) for name in dict.fromkeys(found) if name]


def validate_kubernetes_principal_per_stack(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """No ServiceAccount, and no pod template's service account, is another stack's Workload Identity principal."""
    accounts = named_accounts(args)
    if not accounts:
        return
    stack = stack_of(args.urn)
    namespace = object_namespace(args)
    where = namespace or "the namespace the provider or kubeconfig picks"
    kind = args.resource_type.rsplit(":", 1)[-1]
    own = " or ".join("/".join(p) for p in stack_principals(stack))
    for does, name in accounts:
        whose = foreign_principal(namespace, name, stack)
        if whose:
            report_violation(
                f"{kind} {args.name!r} {does} {name!r} in {where}: that is {whose}, one principal in every cluster of "
                f"the project, so these pods would get what it was granted; stack {stack!r} runs as {own}",
                None,
            )


# ---------------------------------------------------------------- storage and network


def validate_bucket(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != BUCKET:
        return  # the engine asks every policy about every resource
    if get(args.props, "uniformBucketLevelAccess") is not True:
        report_violation("bucket must set uniformBucketLevelAccess: true (IAM only, no per-object ACLs)", None)
    prevention = get(args.props, "publicAccessPrevention")
    if prevention != "enforced":
        report_violation(f"bucket has publicAccessPrevention {prevention!r}; expected 'enforced'", None)


def is_whole_internet(cidr: str) -> bool:
    try:
        return ipaddress.ip_network(str(cidr).strip(), strict=False).prefixlen == 0
    except ValueError:
        return False


def firewall_source_problem(sources: list[str]) -> str | None:
    """Why a firewall rule's sourceRanges open it to the internet; None when they stay a team's own.

    The union of the rule's ranges, judged by policy/address_space.py's internet_problem: the rule the stack config
    applies to webUiSourceRanges and web-ui-not-public to loadBalancerSourceRanges, so 0.0.0.0/1 + 128.0.0.0/1,
    256 x /8 or ::ffff:0.0.0.0/96 are the internet here too. Host bits set are judged as the block they are in. An
    entry Python cannot read as a CIDR ('0/0', '00.0.0.0/0', full-width digits) fails closed: a policy cannot know
    how GCP reads it, so it is not allowed through unjudged.
    """
    networks = []
    for text in sources:
        try:
            networks.append(parse(text, strict=False))
        except ValueError:
            return f"source range {text[:60]!r} is not a CIDR this policy can judge; write it as a.b.c.d/n"
    return internet_problem(networks)


def validate_firewall(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    props = args.props
    if args.resource_type != FIREWALL:
        return
    if (get(props, "direction") or "INGRESS") != "INGRESS" or not items(get(props, "allows")):
        return  # egress rules and deny rules do not open anything
    sources = [str(s) for s in items(get(props, "sourceRanges"))]
    # GCP applies 0.0.0.0/0 to an ingress rule that names no source at all.
    implicit = not sources and not items(get(props, "sourceTags")) and not items(get(props, "sourceServiceAccounts"))
    opened = [s for s in sources if is_whole_internet(s)] or (["0.0.0.0/0 (no source given)"] if implicit else [])
    problem = firewall_source_problem(sources)
    if opened or problem:
        shown = ", ".join(opened) if opened else show_union(sources)
        report_violation(
            f"firewall rule allows ingress from {shown}{f'; {problem}' if problem else ''}; list the sources that "
            "need it (the load balancer's health checks come from 35.191.0.0/16 and 130.211.0.0/22)",
            None,
        )


# ---------------------------------------------------------------- Kubernetes


def _ui_named(text: Any) -> str | None:
    """The web UI a label, selector or port name mentions (app.kubernetes.io/name: grafana, http-prometheus...)."""
    lowered = str(text).lower()
    return next((ui for ui in WEB_UIS if ui in lowered), None)


def _port_number(value: Any) -> int | None:
    """A Service port or targetPort as a number: a whole number, or a string of digits (IntOrString); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):  # the engine hands numbers over as protobuf doubles: 3000.0
        return int(value) if float(value).is_integer() else None
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() else None


def web_ui_of(props: Any) -> str | None:
    """Which web UI a Service exposes, judged by what it exposes, never by its own name or labels.

    Its selector (keys or values naming grafana, prometheus or locust: it selects their pods), or any of its
    ports: port or targetPort 3000, 9090 or 8089 by number, or a port or targetPort name that names a UI.
    A selector made of neutral words on other ports is resolved against the workloads by the stack policy.
    """
    selector = get(props, "spec", "selector")
    if isinstance(selector, Mapping):
        for key, value in selector.items():
            ui = _ui_named(value) or _ui_named(key)
            if ui:
                return ui
    for port in items(get(props, "spec", "ports")):
        for field in ("port", "targetPort"):
            number = _port_number(get(port, field))
            if number in WEB_UI_PORTS:
                return WEB_UI_PORTS[number]
        for field in ("name", "targetPort"):
            value = get(port, field)
            ui = _ui_named(value) if isinstance(value, str) and _port_number(value) is None else None
            if ui:
                return ui
    return None


def source_range_problem(ranges: list[str]) -> str | None:
    """What opens a LoadBalancer's source ranges to the internet; None when they stay a team's own.

    The union rule is policy/address_space.py's, the same the stack config applies to webUiSourceRanges.
    Kubernetes opens a LoadBalancer to every source when the list is empty
    (https://kubernetes.io/docs/tasks/access-application-cluster/configure-cloud-provider-firewall/).
    """
    if not ranges:
        return "no loadBalancerSourceRanges (every source may connect)"
    networks, invalid = [], []
    for text in ranges:
        try:
            networks.append(parse(text, strict=False))  # host bits set: judge the block they are in
        except ValueError:
            invalid.append(text)
    if invalid:
        return f"loadBalancerSourceRanges that are not CIDRs: {', '.join(invalid)}"
    problem = internet_problem(networks)
    return f"loadBalancerSourceRanges {', '.join(ranges)}: {problem}" if problem else None


def _report_public_ui(ui: str, how: str, problem: str, report_violation: ReportViolation, urn: Any = None) -> None:
    report_violation(
        f"LoadBalancer Service for {ui} ({how}) with {problem}: its web UI would be open to the internet; "
        "use kubectl port-forward, or list your own ranges (triton-gke:webUiSourceRanges)",
        urn,
    )


def is_load_balancer(props: Any) -> bool:
    return get(props, "spec", "type") == "LoadBalancer"


def validate_web_ui_exposure(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    props = args.props
    if args.resource_type != SERVICE or not is_load_balancer(props):
        return
    ui = web_ui_of(props)
    if ui is None:
        return
    problem = source_range_problem([str(r) for r in items(get(props, "spec", "loadBalancerSourceRanges"))])
    if problem:
        _report_public_ui(ui, "by its selector or ports", problem, report_violation)


# ---------------------------------------------------------------- web UIs behind neutral selectors (stack policy)


@dataclass(frozen=True)
class PodTemplate:
    """The pods a workload runs, as a Service's selector sees them."""

    kind: str
    name: str
    namespace: str
    labels: Mapping[str, str]
    spec: Any


def namespace_of(props: Any) -> str:
    return str(get(props, "metadata", "namespace") or "default")


def pod_template(resource: PolicyResource) -> PodTemplate | None:
    """The pod template of a workload resource, or None for anything else (or labels still unknown)."""
    path = POD_SPEC_PATHS.get(resource.resource_type)
    if path is None:
        return None
    try:
        labels = get(resource.props, *path[:-1], "metadata", "labels")
        return PodTemplate(
            kind=resource.resource_type.rsplit(":", 1)[-1],
            name=str(get(resource.props, "metadata", "name") or resource.name),
            namespace=namespace_of(resource.props),
            labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {},
            spec=get(resource.props, *path),
        )
    except UnknownValueError:
        return None  # preview before the values exist: the workload cannot be matched yet


def selects(selector: Any, pod: PodTemplate) -> bool:
    """A Service selector picks the pods whose labels include every selector pair (an empty one picks none)."""
    if not isinstance(selector, Mapping) or not selector:
        return False
    return all(pod.labels.get(str(k)) == str(v) for k, v in selector.items())


def ui_of_container(container: Any) -> str | None:
    """The web UI a container serves, by its image's name or the program it runs."""
    image_name = image_repository(str(get(container, "image") or "")).rsplit("/", 1)[-1]
    if image_name in WEB_UIS:
        return image_name
    return next((WEB_UI_PROGRAMS[p] for p in sorted(programs(command_line(container))) if p in WEB_UI_PROGRAMS), None)


def targeted_ports(service: Any) -> list[Any]:
    """What each Service port targets: targetPort, or the port itself when targetPort is unset (the default)."""
    return [get(p, "targetPort") or get(p, "port") for p in items(get(service, "spec", "ports"))]


def ui_behind(service: Any, pod: PodTemplate) -> str | None:
    """The web UI in a selected pod: a UI container, or a targeted container port (by number or name) 3000/9090/8089."""
    found = [ui_of_container(c) for c in containers(pod.spec, init=False)]
    if any(found):
        return next(ui for ui in found if ui)
    for target in targeted_ports(service):
        number = _port_number(target)
        for container in containers(pod.spec, init=False):
            for port in items(get(container, "ports")):
                if number is None and str(target) != str(get(port, "name")):
                    continue
                container_port = _port_number(get(port, "containerPort"))
                if container_port in WEB_UI_PORTS and (number is None or number == container_port):
                    return WEB_UI_PORTS[container_port]
    return None


def validate_web_ui_workloads(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """LoadBalancer Services whose own selector and ports look neutral, resolved against the pods they select.

    A stack policy: only it sees the Service and the workloads together. The engine runs it after the resource
    policies, on preview before anything changes (pulumi/docs#11508), so run `pulumi preview --policy-pack` in CI.
    """
    pods = [p for p in (pod_template(r) for r in args.resources) if p is not None]
    for resource in args.resources:
        try:
            props = resource.props
            if resource.resource_type != SERVICE or not is_load_balancer(props) or web_ui_of(props):
                continue  # not a load balancer, or the resource policy web-ui-not-public judges it already
            selector, namespace = get(props, "spec", "selector"), namespace_of(props)
            picked = [p for p in pods if p.namespace == namespace and selects(selector, p)]
            found = next(((p, ui) for p in picked if (ui := ui_behind(props, p))), None)
            if found is None:
                continue
            pod, ui = found
            problem = source_range_problem([str(r) for r in items(get(props, "spec", "loadBalancerSourceRanges"))])
        except UnknownValueError:
            continue  # preview before the values exist; the resource policy still judges what it can see
        if problem:
            how = f"Service {get(props, 'metadata', 'name') or resource.name} selects {pod.kind} {pod.name}"
            _report_public_ui(ui, how, problem, report_violation, resource.urn)


def pod_spec(args: ResourceValidationArgs) -> Any:
    path = POD_SPEC_PATHS.get(args.resource_type)
    return get(args.props, *path) if path else None


def containers(spec: Any, *, init: bool = True) -> Iterator[Any]:
    yield from items(get(spec, "containers"))
    if init:
        yield from items(get(spec, "initContainers"))


def image_problem(image: str, pulled: bool = True) -> str | None:
    """Why an image reference is not pinned, or None: a tag naming a release (it holds a digit), or a sha256 digest.

    A tag without a digit is a channel that moves: `latest`, and the like of google-cloud-cli's `stable`, `alpine`,
    `slim` ("To install specific gcloud versions, use the :VERSION-stable tag",
    https://cloud.google.com/sdk/docs/downloads-docker). `pulled` False (imagePullPolicy Never): the node's own
    preloaded image, never fetched from a registry, so its tag selects nothing that can move."""
    name, at, digest = image.partition("@")
    if at:
        return None if DIGEST.fullmatch(digest) else "has a malformed digest"
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag (means latest)"
    tag = last.rsplit(":", 1)[1]
    if tag in ("", "latest"):
        return "uses the tag latest"
    if pulled and not any(c.isdigit() for c in tag):
        return f"uses the tag {tag}, a channel that moves (no release number in it)"
    return None


def validate_images_pinned(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for container in containers(pod_spec(args)):
        image = str(get(container, "image") or "")
        problem = "has no image" if not image else image_problem(image, get(container, "imagePullPolicy") != "Never")
        if problem:
            report_violation(
                f"container {get(container, 'name')!r} image {image!r} {problem}; pin a release tag or a digest "
                "so every node runs the same, reviewed image",
                None,
            )


def command_line(container: Any) -> list[str]:
    """command + args as tokens; a shell string (sh -c '...') is split too."""
    tokens: list[str] = []
    for part in items(get(container, "command")) + items(get(container, "args")):
        text = str(part)
        tokens += shlex.split(text) if " " in text.strip() else [text]
    return tokens


def image_repository(image: str) -> str:
    """An image reference without tag and digest: registry:5000/nvidia/tritonserver:25.06-py3 -> .../tritonserver."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[0] if ":" in last else name


def programs(tokens: list[str]) -> set[str]:
    """Base names of the tokens that may be a program (not a --flag or --flag=value); a superset on purpose."""
    return {t.rsplit("/", 1)[-1] for t in tokens if t and not t.startswith("-") and "=" not in t}


def runs_image_default(container: Any) -> bool:
    """No command: the container runs the image's ENTRYPOINT (and CMD unless args replace it)."""
    return not items(get(container, "command"))


def is_triton(container: Any) -> bool:
    """Whether a container runs tritonserver, judged by what it runs, whatever the image is called.

    tritonserver anywhere in its command or args (also inside `sh -c '...'`); or, without a command, an image
    from nvcr.io/nvidia/tritonserver or named tritonserver (a mirror or an image built FROM it), whose entrypoint
    runs what the args say or a CMD that is tritonserver. Only the SDK (client) images are left out.
    """
    if TRITON_PROGRAM in programs(command_line(container)):
        return True
    image = str(get(container, "image") or "")
    repository = image_repository(image)
    from_triton = repository == TRITON_REPOSITORY or repository.rsplit("/", 1)[-1] == TRITON_PROGRAM
    return from_triton and runs_image_default(container) and not image.split("@", 1)[0].endswith("-sdk")


def restricted_apis(tokens: list[str], flag: str) -> set[str]:
    """APIs a tritonserver command line puts behind a header for one protocol flag.

    The syntax is API[,API...]:HEADER=VALUE, repeatable, as --flag=value or --flag value.
    """
    values = [t.split("=", 1)[1] for t in tokens if t.startswith(f"{flag}=")]
    values += [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t == flag]
    covered: set[str] = set()
    for value in values:
        apis, _, header = value.partition(":")
        key, _, secret = header.partition("=")
        if key.strip() and secret.strip():
            covered |= {a.strip() for a in apis.split(",")}
    return covered


def validate_triton_admin_apis(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for container in containers(pod_spec(args), init=False):
        if not is_triton(container):
            continue
        tokens = command_line(container)
        for flag in TRITON_RESTRICTION_FLAGS:
            missing = sorted(TRITON_RESTRICTED_APIS - restricted_apis(tokens, flag))
            if missing:
                report_violation(
                    f"tritonserver container {get(container, 'name')!r}: {flag} does not put "
                    f"{', '.join(missing)} behind a key header (API,...:HEADER=KEY); anyone who reaches "
                    "the port could load, unload or reconfigure models",
                    None,
                )


def validate_prod_inference_auth(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """On a production stack every tritonserver container restricts the `inference` API group on HTTP and gRPC
    (contracts/triton.py inference_restrictions): a stack that set inferenceAuth false serves GPUs to anyone who
    reaches the load balancer."""
    stack = stack_of(args.urn)
    if stack not in tuple(args.get_config().get("prodStacks") or DEFAULT_PROD_STACKS):
        return
    for container in containers(pod_spec(args), init=False):
        if not is_triton(container):
            continue
        tokens = command_line(container)
        open_on = [flag for flag in TRITON_RESTRICTION_FLAGS if "inference" not in restricted_apis(tokens, flag)]
        if open_on:
            report_violation(
                f"stack {stack!r} is a production stack: tritonserver container {get(container, 'name')!r} serves "
                f"inference without a key ({', '.join(open_on)} does not restrict inference); set "
                "triton-gke:inferenceAuth true",
                None,
            )


TARGET_HTTP_PROXY = "gcp:compute/targetHttpProxy:TargetHttpProxy"
URL_MAP = "gcp:compute/uRLMap:URLMap"


def only_redirects_to_https(url_map: Any) -> bool:
    """A URL map that answers every request with a redirect to HTTPS and routes nothing to a backend: no host rule or
    path matcher, and a defaultUrlRedirect with httpsRedirect (the map the program puts on port 80 with a domain,
    https://cloud.google.com/load-balancing/docs/https/setting-up-global-http-https-redirect)."""
    redirect = get(url_map, "defaultUrlRedirect")
    routes = items(get(url_map, "hostRules")) or items(get(url_map, "pathMatchers"))
    return bool(get(redirect, "httpsRedirect")) and not routes and get(url_map, "defaultService") is None


def served_url_maps(proxy: PolicyResource) -> list[PolicyResource]:
    """The URL maps a target proxy serves: those its urlMap input comes from, else any URL map it depends on."""
    named = [r for r in (proxy.property_dependencies or {}).get("urlMap", []) if r.resource_type == URL_MAP]
    return named or [r for r in proxy.dependencies or [] if r.resource_type == URL_MAP]


def validate_prod_lb_https(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """On a production stack, a target HTTP proxy whose URL map does more than redirect to HTTPS: the load balancer
    serves inference over plain HTTP, so requests and the inference key header they carry cross the internet
    unencrypted (TLS needs a certificate on a target HTTPS proxy, https://cloud.google.com/load-balancing/docs/
    ssl-certificates). A URL map not found, or unknown at preview, counts as serving."""
    prod_stacks = tuple(args.get_config().get("prodStacks") or DEFAULT_PROD_STACKS)
    for proxy in args.resources:
        stack = stack_of(proxy.urn)
        if proxy.resource_type != TARGET_HTTP_PROXY or stack not in prod_stacks:
            continue
        maps = served_url_maps(proxy)
        try:
            if maps and all(only_redirects_to_https(m.props) for m in maps):
                continue
        except UnknownValueError:
            pass
        name = _known(proxy.props, "name") or proxy.name
        report_violation(
            f"stack {stack!r} is a production stack: target HTTP proxy {name!r} serves inference over plain HTTP, so "
            "requests and the inference key they carry cross the internet unencrypted; set triton-gke:domain "
            "(HTTPS with a Google-managed certificate; port 80 then only redirects)",
            proxy.urn,
        )


# ---------------------------------------------------------------- the policies


def _policy(
    name: str, description: str, validate: Any, level: EnforcementLevel, severity: Severity, **extra: Any
) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=level,
        severity=severity,
        **extra,
    )


MANDATORY, ADVISORY = EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY

POLICIES: list[ResourceValidationPolicy] = [
    _policy(
        "gpu-node-pools-tainted",
        "GPU node pools carry the nvidia.com/gpu NoSchedule taint.",
        validate_gpu_taint,
        ADVISORY,
        Severity.LOW,
    ),
    _policy(
        "gke-workload-identity",
        "Clusters enable Workload Identity; node pools use the GKE metadata server (GKE_METADATA).",
        validate_workload_identity,
        MANDATORY,
        Severity.HIGH,
    ),
    _policy(
        "workload-identity-per-stack",
        "IAM grants (member, binding or policy, on a service account, bucket or any resource) to the GKE workload pool "
        "name exactly one of the stack's own Kubernetes service accounts (triton/triton-STACK, "
        "triton-engines/engine-builder-STACK), never triton/triton, a namespace, a cluster or the whole pool; "
        "roles/iam.workloadIdentityUser on a project, folder or organization goes to nothing on the pool.",
        validate_workload_identity_per_stack,
        MANDATORY,
        Severity.HIGH,
    ),
    _policy(
        "kubernetes-principal-per-stack",
        "No Kubernetes ServiceAccount, and no pod template's serviceAccountName or serviceAccount, in a principal "
        "namespace (triton, triton-engines) is another stack's Workload Identity principal (triton-OTHER, "
        "engine-builder-OTHER, or the shared triton/triton); an unset or unknown namespace counts as each of them.",
        validate_kubernetes_principal_per_stack,
        MANDATORY,
        Severity.HIGH,
    ),
    _policy(
        "gke-no-default-service-account",
        "No node pool runs as the default compute service account (or without one).",
        validate_node_service_account,
        MANDATORY,
        Severity.HIGH,
    ),
    _policy(
        "gke-shielded-nodes-secure-boot",
        "Clusters keep shielded nodes on; every node pool enables secure boot.",
        validate_shielded_nodes,
        MANDATORY,
        Severity.MEDIUM,
    ),
    _policy(
        "bucket-locked-down",
        "Buckets use uniform bucket-level access and enforce public access prevention.",
        validate_bucket,
        MANDATORY,
        Severity.HIGH,
    ),
    _policy(
        "firewall-no-internet-ingress",
        "No firewall rule allows ingress from 0.0.0.0/0 or ::/0 (stated or implied), or from source ranges whose "
        "union lets in more than a /8 worth of public addresses (IPv6 a /32; IPv6 that embeds IPv4 counts as IPv4).",
        validate_firewall,
        MANDATORY,
        Severity.HIGH,
    ),
    _policy(
        "web-ui-not-public",
        "A LoadBalancer Service that selects Grafana, Prometheus or Locust pods or targets their ports lists "
        "source ranges whose union lets in at most a /8 worth of public addresses (IPv6 a /32).",
        validate_web_ui_exposure,
        MANDATORY,
        Severity.HIGH,
    ),
    _policy(
        "prod-deletion-protection",
        "Production stacks protect their clusters from deletion and never force-destroy buckets.",
        validate_prod_deletion_protection,
        MANDATORY,
        Severity.HIGH,
        config_schema=PolicyConfigSchema(
            properties={
                "prodStacks": {
                    "type": "array",
                    "items": {"type": "string"},
                    "default": list(DEFAULT_PROD_STACKS),
                    "description": "Stack names treated as production.",
                }
            }
        ),
    ),
    _policy(
        "images-pinned",
        "Every container and init container image is pinned to a tag other than latest, or to a digest.",
        validate_images_pinned,
        MANDATORY,
        Severity.MEDIUM,
    ),
    _policy(
        "triton-admin-apis-restricted",
        "tritonserver restricts model-repository, shared-memory, logging and trace on HTTP and gRPC.",
        validate_triton_admin_apis,
        MANDATORY,
        Severity.CRITICAL,
    ),
    _policy(
        "prod-inference-auth",
        "On production stacks tritonserver restricts the inference API group on HTTP and gRPC to a key header "
        "(triton-gke:inferenceAuth true).",
        validate_prod_inference_auth,
        MANDATORY,
        Severity.HIGH,
        config_schema=PolicyConfigSchema(
            properties={
                "prodStacks": {
                    "type": "array",
                    "items": {"type": "string"},
                    "default": list(DEFAULT_PROD_STACKS),
                    "description": "Stack names treated as production.",
                }
            }
        ),
    ),
]

PROD_STACKS_CONFIG = PolicyConfigSchema(
    properties={
        "prodStacks": {
            "type": "array",
            "items": {"type": "string"},
            "default": list(DEFAULT_PROD_STACKS),
            "description": "Stack names treated as production.",
        }
    }
)

STACK_POLICIES: list[StackValidationPolicy] = [
    StackValidationPolicy(
        name="web-ui-not-public-by-workload",
        description="A LoadBalancer Service whose selector picks pods running Grafana, Prometheus or Locust, or "
        "whose named target port is their 3000/9090/8089, lists source ranges within the web-ui-not-public budget.",
        validate=validate_web_ui_workloads,
        enforcement_level=MANDATORY,
        severity=Severity.HIGH,
    ),
    # Advisory: a new production stack cannot have HTTPS on its first `up`. Its managed certificate provisions only
    # once the domain's DNS points at the load balancer's address, which that `up` creates (settings/load_balancer.py
    # says so with its sources), so a mandatory rule would refuse every fresh prod stack, the shipped one included.
    # The stack settings warn at every plan, preview and `up` too (plaintext_key_warning).
    StackValidationPolicy(
        name="prod-lb-https",
        description="On production stacks the global load balancer serves inference over HTTPS: every target HTTP "
        "proxy's URL map only redirects to HTTPS (triton-gke:domain set), so the inference key never crosses the "
        "internet unencrypted.",
        validate=validate_prod_lb_https,
        enforcement_level=ADVISORY,
        severity=Severity.MEDIUM,
        config_schema=PROD_STACKS_CONFIG,
    ),
]
