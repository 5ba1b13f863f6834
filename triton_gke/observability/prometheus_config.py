"""Generate the in-cluster prometheus.yml (plain text; nothing here runs a process).

In the cluster every job discovers pods with kubernetes_sd_configs (role: pod): one target per
declared container port, carrying __meta_kubernetes_* labels. The relabel rules keep only pods
with the selector's namespace and labels and only the port NAMED `metrics`, so Triton's http and
grpc ports are never scraped. sandbox.prometheus runs this very config on local processes (tests,
sandbox) and on Prometheus builds without kubernetes_sd (Debian's): it swaps each discovery block
for file_sd targets that carry the labels a pod would have, so the same relabelling picks the ports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from triton_gke.observability.settings import (
    POD_SELECTORS,
    PodSelector,
    validate_duration,
    validate_label_value,
)

DEFAULT_RULE_FILES = ("/etc/prometheus/rules/*.yml",)
DEFAULT_SELF_ADDRESS = "localhost:9090"
# Discovery labels of kubernetes_sd (role: pod) start with this
# (https://prometheus.io/docs/prometheus/latest/configuration/configuration/#pod).
META_PREFIX = "__meta_kubernetes_"
# Copied from the pod's discovery labels onto every series of the target.
_POD_TARGET_LABELS = {
    "namespace": f"{META_PREFIX}namespace",
    "pod": f"{META_PREFIX}pod_name",
    "node": f"{META_PREFIX}pod_node_name",
}


def meta_label(kubernetes_label: str) -> str:
    """The discovery label of a pod label: Prometheus turns every invalid character into '_'."""
    return f"{META_PREFIX}pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', kubernetes_label)}"


def _literal(value: str) -> str:
    """An RE2 pattern (anchored by Prometheus) matching exactly `value`."""
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", value)


def _keep(source: str, regex: str) -> dict[str, Any]:
    return {"source_labels": [source], "regex": regex, "action": "keep"}


def pod_relabel_configs(selector: PodSelector, region: str) -> list[dict[str, Any]]:
    """Keep the selector's pods and their `metrics` port only; copy namespace, pod, node; add region.

    Series that already carry a namespace/pod label keep it as exported_namespace/exported_pod
    (DCGM exporter labels each GPU with the pod using it): `node` is the join key for GPUs.
    """
    rules = [_keep(f"{META_PREFIX}namespace", _literal(selector.namespace))]
    rules += [_keep(meta_label(key), _literal(value)) for key, value in selector.labels]
    rules.append(_keep(f"{META_PREFIX}pod_container_port_name", _literal(selector.port)))
    # Finished pods stay listed until deleted; scraping them would only report them down.
    rules.append({"source_labels": [f"{META_PREFIX}pod_phase"], "regex": "Succeeded|Failed", "action": "drop"})
    rules += [{"source_labels": [source], "target_label": target} for target, source in _POD_TARGET_LABELS.items()]
    rules.append(_region_rule(region))
    return rules


def _region_rule(region: str) -> dict[str, Any]:
    # Stored on every series (not only an external label, which queries of this Prometheus never
    # see), so dashboards and rules can filter and group by region locally and after federation.
    return {"target_label": "region", "replacement": region}


def _pod_job(selector: PodSelector, region: str) -> dict[str, Any]:
    label_selector = ",".join(f"{key}={value}" for key, value in selector.labels)
    discovery = {
        "role": "pod",
        "namespaces": {"names": [selector.namespace]},
        "selectors": [{"role": "pod", "label": label_selector}],  # server-side filter; relabelling enforces it
    }
    return {
        "job_name": selector.job,
        "kubernetes_sd_configs": [discovery],
        "relabel_configs": pod_relabel_configs(selector, region),
    }


def prometheus_config(
    region: str,
    stack: str,
    *,
    scrape_interval: str = "15s",
    evaluation_interval: str | None = None,
    rule_files: Sequence[str] = DEFAULT_RULE_FILES,
    self_address: str = DEFAULT_SELF_ADDRESS,
    alertmanagers: Sequence[str] = (),
    selectors: Sequence[PodSelector] = POD_SELECTORS,
) -> dict[str, Any]:
    """prometheus.yml as a dict: Triton, DCGM exporter and Locust master pods, plus Prometheus itself."""
    validate_label_value("region", region)
    validate_label_value("stack", stack)
    validate_duration("scrape_interval", scrape_interval)
    validate_duration("evaluation_interval", evaluation_interval or scrape_interval)
    self_job = {
        "job_name": "prometheus",
        "static_configs": [{"targets": [self_address]}],
        "relabel_configs": [_region_rule(region)],
    }
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": scrape_interval,
            "evaluation_interval": evaluation_interval or scrape_interval,
            "external_labels": {"region": region, "stack": stack},
        },
        "rule_files": list(rule_files),
        "scrape_configs": [self_job, *(_pod_job(s, region) for s in selectors)],
    }
    if alertmanagers:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": list(alertmanagers)}]}]}
    return config


def render_yaml(config: Mapping[str, Any]) -> str:
    header = "# Generated by monitoring.prometheus_config. Edit the generator, not this file.\n"
    return header + yaml.safe_dump(dict(config), sort_keys=False, width=1000)


def prometheus_config_yaml(region: str, stack: str, **options: Any) -> str:
    """The text of prometheus.yml (options: those of prometheus_config)."""
    return render_yaml(prometheus_config(region, stack, **options))
