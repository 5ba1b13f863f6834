"""The SLO's latency bound: one home for the stack key sloLatencyMs (settings/monitoring.py), the monitoring
component's SloSettings (observability/settings.py), `bench --slo-ms` (bench/__main__.py) and capacity records
(capacity/records.py), so a SLO one of them accepts is never refused by another.

An hour: Triton's exit timeout must cover the longest request at the SLO (settings/lifecycle.py), and the stack takes
waits of at most an hour (MAX_WAIT_S), so no longer SLO can be coherent.
"""

from __future__ import annotations

MAX_SLO_LATENCY_MS = 3_600_000
