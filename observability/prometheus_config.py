"""Generate the in-cluster prometheus.yml, and run the very same config against local processes.

In the cluster every job discovers pods with kubernetes_sd_configs (role: pod): one target per
declared container port, carrying __meta_kubernetes_* labels. The relabel rules keep only pods
with the selector's namespace and labels and only the port NAMED `metrics`, so Triton's http and
grpc ports are never scraped. to_file_sd() swaps each discovery block for file_sd_configs and
write_file_sd_targets() writes the targets a pod would produce, labels included: the same
relabelling then runs on local processes (tests, sandbox) and on Prometheus builds without
kubernetes_sd (Debian's).
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from observability.rules import rules_yaml
from observability.settings import (
    DCGM_PODS,
    LOCUST_MASTER_PODS,
    POD_SELECTORS,
    TRITON_PODS,
    MonitoringError,
    PodSelector,
    SloSettings,
    validate_duration,
    validate_label_value,
)

DEFAULT_RULE_FILES = ("/etc/prometheus/rules/*.yml",)
DEFAULT_SELF_ADDRESS = "localhost:9090"
_META = "__meta_kubernetes_"
# Copied from the pod's discovery labels onto every series of the target.
_POD_TARGET_LABELS = {"namespace": f"{_META}namespace", "pod": f"{_META}pod_name", "node": f"{_META}pod_node_name"}


def meta_label(kubernetes_label: str) -> str:
    """The discovery label of a pod label: Prometheus turns every invalid character into '_'."""
    return f"{_META}pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', kubernetes_label)}"


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
    rules = [_keep(f"{_META}namespace", _literal(selector.namespace))]
    rules += [_keep(meta_label(key), _literal(value)) for key, value in selector.labels]
    rules.append(_keep(f"{_META}pod_container_port_name", _literal(selector.port)))
    # Finished pods stay listed until deleted; scraping them would only report them down.
    rules.append({"source_labels": [f"{_META}pod_phase"], "regex": "Succeeded|Failed", "action": "drop"})
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


# ---------------------------------------------------------------- file_sd: the same config, locally


def file_sd_path(sd_dir: Path, job: str) -> Path:
    return Path(sd_dir) / f"{job}.json"


def to_file_sd(config: Mapping[str, Any], sd_dir: Path, refresh_interval: str = "5s") -> dict[str, Any]:
    """A copy of `config` whose kubernetes_sd_configs blocks read sd_dir/JOB.json instead."""
    swapped = copy.deepcopy(dict(config))
    for job in swapped.get("scrape_configs", []):
        if job.pop("kubernetes_sd_configs", None) is not None:
            files = [str(file_sd_path(sd_dir, job["job_name"]))]
            job["file_sd_configs"] = [{"files": files, "refresh_interval": refresh_interval}]
    return swapped


@dataclass(frozen=True)
class LocalPod:
    """A process standing in for a pod: its ports map container port names to host:port."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    ports: Mapping[str, str]
    node: str = "local-node"
    phase: str = "Running"
    container: str = "main"
    ip: str = "127.0.0.1"
    annotations: Mapping[str, str] = field(default_factory=dict)


def local_pod(selector: PodSelector, name: str, ports: Mapping[str, str], **options: Any) -> LocalPod:
    """A LocalPod that the selector's job would discover."""
    return LocalPod(name, selector.namespace, dict(selector.labels), ports, **options)


def pod_target_groups(pod: LocalPod) -> list[dict[str, Any]]:
    """The file_sd groups kubernetes_sd (role: pod) would produce: one per container port."""
    common = {
        f"{_META}namespace": pod.namespace,
        f"{_META}pod_name": pod.name,
        f"{_META}pod_node_name": pod.node,
        f"{_META}pod_phase": pod.phase,
        f"{_META}pod_ip": pod.ip,
        f"{_META}pod_ready": "true",
        f"{_META}pod_container_name": pod.container,
    }
    for key, value in pod.labels.items():
        common[meta_label(key)] = value
        common[meta_label(key).replace("pod_label_", "pod_labelpresent_", 1)] = "true"
    return [
        {"targets": [address], "labels": {**common, **_port_labels(name, address)}}
        for name, address in pod.ports.items()
    ]


def _port_labels(name: str, address: str) -> dict[str, str]:
    port = address.rsplit(":", 1)[-1]
    if not port.isdigit():
        raise MonitoringError(f"ports: {address!r} (port {name!r}) is not host:port")
    return {
        f"{_META}pod_container_port_name": name,
        f"{_META}pod_container_port_number": port,
        f"{_META}pod_container_port_protocol": "TCP",
    }


def write_file_sd_targets(sd_dir: Path, job: str, pods: Sequence[LocalPod]) -> Path:
    """Write (atomically: Prometheus watches the file) the targets of `pods` for `job`."""
    path = file_sd_path(sd_dir, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    groups = [group for pod in pods for group in pod_target_groups(pod)]
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(groups, handle, indent=2)
    os.replace(tmp, path)
    return path


def local_prometheus_config(
    out_dir: Path,
    region: str,
    stack: str,
    slo: SloSettings,
    self_address: str,
    triton_pods: Sequence[LocalPod],
    locust_pods: Sequence[LocalPod],
    interval: str,
) -> str:
    """The in-cluster prometheus.yml for local processes: writes out_dir/rules.yml and the file_sd targets
    (no DCGM exporter without a GPU) and returns the config text, kubernetes_sd swapped for file_sd."""
    rules = Path(out_dir) / "rules.yml"
    rules.write_text(rules_yaml(slo, region), encoding="utf-8")
    sd_dir = Path(out_dir) / "file_sd"
    write_file_sd_targets(sd_dir, TRITON_PODS.job, triton_pods)
    write_file_sd_targets(sd_dir, LOCUST_MASTER_PODS.job, locust_pods)
    write_file_sd_targets(sd_dir, DCGM_PODS.job, [])
    config = prometheus_config(
        region, stack, scrape_interval=interval, rule_files=[str(rules)], self_address=self_address
    )
    return render_yaml(to_file_sd(config, sd_dir, refresh_interval=interval))
