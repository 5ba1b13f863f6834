"""Physical names that fit GCP's length and character rules and stay unique per stack.

The formula lives in contracts/naming.py (the sandbox names its emulator's bucket with it too); re-exported here for
the infra components.
"""

from __future__ import annotations

from triton_gke.contracts.naming import gcp_name

__all__ = ["gcp_name"]
