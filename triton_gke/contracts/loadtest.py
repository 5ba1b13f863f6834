"""The load test's environment: the settings the locustfile reads, and where the locustfile is.

Three sides start the locustfile: the cluster (k8s/loadtest.py, the `locust-config` ConfigMap mounted with envFrom),
the sandbox (sandbox/components.py) and the benchmark (bench/runners/runner.py). Each builds a LocustEnvironment and
calls to_env(), so none can write a key the locustfile does not read, and each knows every key it must keep out of
an inherited environment (LOCUST_ENV_KEYS). The locustfile itself stays standalone (it ships alone in a ConfigMap)
and is the authority on what a value means: tests/unit/contracts/test_contracts.py runs its own parser on to_env().
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

# The port of the master's Prometheus metrics: the locustfile's default, the pod's `metrics` port.
LOCUST_METRICS_PORT = 9646


@dataclass(frozen=True)
class LocustEnvironment:
    """One value per key of the locustfile's settings table (loadtest/locustfile.py docstring).

    None (or an empty text) leaves a key out of the environment, and the locustfile's default applies, as it
    treats an empty value as unset. Values are not checked here: the locustfile checks them at start and stops
    with one line naming the key; the stack's settings layer checks what the stack may set before that.
    """

    model: str | None = None
    saddr: str | None = None  # host[:port] of Triton, no scheme
    rps: float | None = None  # requests/s per user
    arrival: str | None = None  # poisson | constant | trace
    protocol: str | None = None  # http | grpc
    payload: str | None = None  # fp32 | uint8
    metrics_port: int | None = None  # 0: no metrics server
    rate: float | None = None  # requests/s of the whole test
    rate_steps: str | None = None  # RATE:SECONDS and FROM-TO:SECONDS items
    input_name: str | None = None
    output_name: str | None = None
    batch: int | None = None
    timeout_s: float | None = None
    metrics_addr: str | None = None
    trace: str | None = None  # file of inter-arrival microseconds (arrival=trace)
    users: int | None = None  # concurrency bound of a rate_steps shape
    # NAME=KEY[,NAME=KEY]: headers sent with every inference (join_headers); a Secret's variable in the cluster
    inference_headers: str | None = None

    def to_env(self) -> dict[str, str]:
        """The environment variables the locustfile reads, named as its keys; unset ones left out."""
        env = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None and value != "":
                env[field.name] = str(value)  # str(float) is repr: the shortest text that reads back equal
        return env


# The variable holding the inference headers (LocustEnvironment.inference_headers).
INFERENCE_HEADERS_ENV = "inference_headers"


def join_headers(headers: Mapping[str, str]) -> str:
    """NAME=KEY items joined by commas, as the locustfile's inference_headers reads them. Header names hold no '='
    (RFC 9110 section 5.1: a field name is a token) and keys none of ',' or '=' (k8s/on_cluster_args.py ADMIN_KEY)."""
    return ",".join(f"{name}={key}" for name, key in sorted(headers.items()))


# Every key the locustfile reads: an ambient variable of that name must not leak into a local run.
LOCUST_ENV_KEYS: tuple[str, ...] = tuple(field.name for field in fields(LocustEnvironment))
