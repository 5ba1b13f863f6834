"""triton-gke guardrails: `pulumi up --policy-pack policy` (or `pulumi preview --policy-pack policy`).

Only builds the pack; the policies and their checks live in policies.py, importable without serving.
Building a PolicyPack starts the analyzer's gRPC server and blocks until the CLI ends it.
"""

# policies.py sits beside this file: the CLI runs the pack with this folder on sys.path.
from policies import POLICIES, STACK_POLICIES
from pulumi_policy import PolicyPack

PolicyPack(name="triton-gke-guardrails", policies=[*POLICIES, *STACK_POLICIES])
