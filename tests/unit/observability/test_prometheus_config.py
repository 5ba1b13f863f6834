"""observability.prometheus_config: pods discovered, only their metrics port kept, the file_sd swap of local runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from triton_gke.observability.prometheus_config import (
    meta_label,
    prometheus_config,
    prometheus_config_yaml,
)
from triton_gke.observability.settings import TRITON_PODS, MonitoringError
from triton_gke.sandbox.prometheus import LocalPod, pod_target_groups, to_file_sd

REGION = "europe-west4"


def test_config_discovers_pods_and_keeps_only_their_metrics_port() -> None:
    config = yaml.safe_load(prometheus_config_yaml(REGION, "prod", scrape_interval="30s"))
    assert config["global"] == {
        "scrape_interval": "30s",
        "evaluation_interval": "30s",
        "external_labels": {"region": REGION, "stack": "prod"},
    }
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"prometheus", "triton", "dcgm-exporter", "locust"}
    expected = {
        "triton": ("triton", {"app_kubernetes_io_name": "triton"}),
        "dcgm-exporter": ("gpu-metrics", {"app_kubernetes_io_name": "dcgm-exporter"}),
        "locust": ("load", {"app_kubernetes_io_name": "locust", "app_kubernetes_io_component": "master"}),
    }
    for job, (namespace, labels) in expected.items():
        (discovery,) = jobs[job]["kubernetes_sd_configs"]
        assert discovery["role"] == "pod" and discovery["namespaces"] == {"names": [namespace]}
        keeps = {r["source_labels"][0]: r["regex"] for r in jobs[job]["relabel_configs"] if r.get("action") == "keep"}
        assert keeps.pop("__meta_kubernetes_pod_container_port_name") == "metrics"
        assert keeps.pop("__meta_kubernetes_namespace") == namespace
        assert keeps == {f"__meta_kubernetes_pod_label_{k}": v for k, v in labels.items()}
        copied = {
            r["target_label"]: r.get("source_labels", [r.get("replacement")])[0]
            for r in jobs[job]["relabel_configs"]
            if "target_label" in r
        }
        assert copied == {
            "namespace": "__meta_kubernetes_namespace",
            "pod": "__meta_kubernetes_pod_name",
            "node": "__meta_kubernetes_pod_node_name",
            "region": REGION,
        }


def test_file_sd_swap_keeps_relabelling_and_targets_carry_pod_labels(tmp_path: Path) -> None:
    config = prometheus_config(REGION, "dev")
    swapped = to_file_sd(config, tmp_path)
    for original, local in zip(config["scrape_configs"], swapped["scrape_configs"], strict=True):
        assert "kubernetes_sd_configs" not in local
        assert local["relabel_configs"] == original["relabel_configs"]
        if "kubernetes_sd_configs" in original:
            assert local["file_sd_configs"][0]["files"] == [str(tmp_path / f"{original['job_name']}.json")]
    assert "file_sd_configs" not in config["scrape_configs"][1]  # the input is left as it was
    pod = LocalPod("triton-0", "triton", dict(TRITON_PODS.labels), {"http": "127.0.0.1:1", "metrics": "127.0.0.1:2"})
    groups = {g["labels"]["__meta_kubernetes_pod_container_port_name"]: g for g in pod_target_groups(pod)}
    assert groups["metrics"]["targets"] == ["127.0.0.1:2"]
    assert groups["metrics"]["labels"][meta_label("app.kubernetes.io/name")] == "triton"
    assert groups["http"]["labels"]["__meta_kubernetes_pod_container_port_number"] == "1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"region": 'eu"west'}, "region: "),
        ({"stack": ""}, "stack: "),
        ({"scrape_interval": "15"}, "scrape_interval: '15' is not a Prometheus duration"),
    ],
)
def test_config_rejects_bad_arguments_in_one_line(kwargs: dict[str, str], message: str) -> None:
    args = {"region": REGION, "stack": "dev", **kwargs}
    with pytest.raises(MonitoringError, match=re.escape(message)) as err:
        prometheus_config(args.pop("region"), args.pop("stack"), **args)
    assert "\n" not in str(err.value)
