"""The Kubernetes service accounts a stack's pods run as that are Workload Identity principals: one formula.

Under Workload Identity Federation for GKE a Kubernetes service account IS a principal,
serviceAccount:PROJECT.svc.id.goog[NAMESPACE/KSA], the same one in every cluster of the project ("workloads running
in a specific namespace share the same IAM identity across clusters within a project",
https://cloud.google.com/kubernetes-engine/fleet-management/docs/best-practices-workload-identity). Stacks may share
a project (the shipped ones do), so each stack names its accounts after itself, and two stacks must never get the
same name: the one whose binding names the other's account lets the other's pods read its models (issue 32), or plant
a plan its engine-build Job then skips (issue 43).

Two accounts per stack, each a name here and nowhere else:
- triton_service_account: Triton's pods, bound to the stack's bucket reader (infra/model_store.py);
- engine_service_account: the engine-build Job's pod, bound to the engine writer (infra/engine_writer.py).
And, for library users, component_service_account: a TritonOnCluster's default when its Args name no account, one
per instance (k8s/on_cluster.py). is_stack_principal tells the stacks' names by their shape, for the pack's
kubernetes-principal-per-stack.
The program (k8s/, infra/) creates and binds them by these functions; the policy pack (policy/policies.py) accepts a
grant to a workload-pool principal only when it names one of them for the stack being deployed.

Standard library only, and no import from the rest of triton_gke: the pack runs in its own virtualenv with only this
folder on sys.path (policy/README.md) and imports this file as `principals`; the program imports it as
triton_gke.policy.principals. One module, so the names the program binds and the names the pack accepts are the same
function's (tests/unit/policy/test_principals.py).
"""

from __future__ import annotations

import hashlib
import re

# A DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names). A ServiceAccount's name
# need only be a DNS subdomain ("The name of a ServiceAccount object must be a valid DNS subdomain name",
# https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/); a label is one, and has no
# '.', so the principal PROJECT.svc.id.goog[NAMESPACE/KSA] reads unambiguously. contracts/naming.py DNS_LABEL is the
# same rule for the program's other names (compared by the tests).
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX = 63
# Hex digits of the SHA-256 a name that needs changing ends with: 32 bits. Two distinct stack texts that both needed
# one share a name only if these 32 bits agree (and so do their sanitized heads): a chance of at most 2^-32 for any
# two, about n^2 / 2^33 among n such stacks of one project (the birthday bound). 8, as before: a stack whose Triton
# account already carries a digest keeps it.
DIGEST_HEX = 8
# The first part of each account's name; the stack's name follows after a '-'.
TRITON_ACCOUNT = "triton"
ENGINE_ACCOUNT = "engine-builder"
# The first part of a TritonOnCluster's default account (component_service_account), for library users.
COMPONENT_ACCOUNT = "tritonserver"


def fits(text: str) -> bool:
    """Whether `text` already is a DNS-1123 label, and so is used as it is."""
    return len(text) <= DNS_LABEL_MAX and DNS_LABEL.fullmatch(text) is not None


def digest(text: str) -> str:
    """The first DIGEST_HEX hex digits of the SHA-256 of `text` as given (UTF-8)."""
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_HEX]


def sanitized(text: str) -> str:
    """`text` lowercased, every run of characters a label cannot hold made one '-', no '-' at either end."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def principal_name(account: str, stack: str) -> str:
    """`account-stack` as a DNS-1123 label: unchanged where it is one (no running stack's account changes), else
    sanitized, cut and ended with '-' and the digest of the text AS GIVEN, so texts that differ only in what was cut
    or sanitized away ('Dev' and 'dev', 'a_b' and 'a.b', two long names with one prefix) still differ.

    Accidental sameness has the odds of DIGEST_HEX. A stack named on purpose to equal another's digested name (its
    name ending in that digest) is not prevented: a name that fits is kept as it is. Whoever may name stacks in the
    project may deploy to it anyway; one project per stack is the boundary (docs/security.md).
    """
    text = f"{account}-{stack}"
    if fits(text):
        return text
    head = sanitized(text)[: DNS_LABEL_MAX - DIGEST_HEX - 1].rstrip("-")
    return f"{head}-{digest(text)}" if head else digest(text)


def is_stack_principal(account: str, name: str) -> bool:
    """Whether `name` may be principal_name(account, S) for some stack S, judged from the name alone.

    Every name principal_name makes starts with `account-` (the sanitized text starts so, and the cut keeps more than
    the account); and every DNS label `account-X` IS stack X's name (it fits, so it is kept as it is). So the names
    of all stacks are exactly the labels of that shape, the digest forms among them: a pack that knows one stack's
    name cannot tell which other stacks exist, and takes the whole shape for theirs.
    """
    prefix = f"{account}-"
    return name.startswith(prefix) and len(name) > len(prefix)


def component_service_account(project: str, stack: str, name: str) -> str:
    """The Kubernetes service account a TritonOnCluster runs Triton as when its Args name none: one per instance.

    The text is PROJECT/STACK/NAME: a Pulumi project name holds "alphanumeric characters, hyphens, underscores, and
    periods" (https://www.pulumi.com/docs/iac/concepts/projects/project-file/), a stack name the same
    (settings/stack.py STACK_NAME) and the component's name is a DNS label, so no part holds '/', each triple is its
    own text, and a text with '/' never fits: the name always ends with the digest of all three (distinct instances
    share one with the odds in DIGEST_HEX), after as much of them as fits, readable in `kubectl get sa`.

    COMPONENT_ACCOUNT is not `triton`: `triton-*` in Triton's namespace are the stacks' names (is_stack_principal),
    which the pack refuses to any other stack, so a component's default must never take that shape.
    """
    return principal_name(COMPONENT_ACCOUNT, f"{project}/{stack}/{name}")


def triton_service_account(stack: str) -> str:
    """The Kubernetes service account Triton's pods run as in every cluster of `stack` (`triton-STACK`), in
    Triton's namespace: the principal the model store binds to the stack's bucket reader."""
    return principal_name(TRITON_ACCOUNT, stack)


def engine_service_account(stack: str) -> str:
    """The Kubernetes service account the engine-build Job of `stack` runs as (`engine-builder-STACK`), in the
    engines' namespace: the principal bound to the stack's engine writer."""
    return principal_name(ENGINE_ACCOUNT, stack)
