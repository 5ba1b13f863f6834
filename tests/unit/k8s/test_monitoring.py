"""The monitoring objects every cluster gets (mock runtime): Prometheus, Grafana, DCGM, the HPA adapter."""

from __future__ import annotations

import json

import pulumi_kubernetes as kubernetes
import pytest
import yaml

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate, evaluate_component
from tests.unit.k8s.test_serving import named, pod_spec, provider_region
from triton_gke.contracts.workloads import LOCUST_NAMESPACE, TRITON_NAMESPACE
from triton_gke.k8s.autoscaling import QUEUE_TIME_METRIC
from triton_gke.k8s.monitoring import Monitoring, MonitoringArgs
from triton_gke.k8s.triton import TritonServing, TritonServingArgs
from triton_gke.observability.rules import rules, rules_yaml
from triton_gke.observability.settings import SloSettings

PROD_REGIONS = {"us-central1", "europe-west4", "asia-east1"}
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"


def test_each_region_has_prometheus_grafana_dcgm_and_the_adapter_on_its_own_cluster(prod_plan):
    for namespace, name, type_token in [
        ("monitoring", "prometheus", DEPLOYMENT),
        ("monitoring", "grafana", DEPLOYMENT),
        ("monitoring", "prometheus-adapter", DEPLOYMENT),
        ("gpu-metrics", "dcgm-exporter", "kubernetes:apps/v1:DaemonSet"),
    ]:
        objects = named(prod_plan, type_token, namespace, name)
        assert {provider_region(prod_plan, o) for o in objects} == PROD_REGIONS, name
        for obj in objects:
            image = pod_spec(obj)["containers"][0]["image"]
            assert ":" in image and not image.endswith(":latest"), image


def test_prometheus_discovers_pods_and_evaluates_the_regions_rules(prod_plan):
    for config in named(prod_plan, CONFIG_MAP, "monitoring", "prometheus-config"):
        region = provider_region(prod_plan, config)
        prometheus = yaml.safe_load(config.inputs["data"]["prometheus.yml"])
        assert prometheus["global"]["external_labels"] == {"region": region, "stack": "prod"}
        jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
        assert {"triton", "dcgm-exporter", "locust"} <= set(jobs)
        assert all("kubernetes_sd_configs" in jobs[j] for j in ("triton", "dcgm-exporter", "locust"))
        assert not any("static_configs" in jobs[j] for j in ("triton", "dcgm-exporter", "locust"))
    for config in named(prod_plan, CONFIG_MAP, "monitoring", "prometheus-rules"):
        region = provider_region(prod_plan, config)
        assert config.inputs["data"]["triton.yml"] == rules_yaml(SloSettings(), region)


def test_prometheus_reads_pods_in_the_watched_namespaces_only(prod_plan):
    roles = [
        r
        for r in prod_plan.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
        if r.inputs["metadata"]["name"] == "prometheus-read-pods"
    ]
    assert {r.inputs["metadata"]["namespace"] for r in roles} == {"triton", "load", "gpu-metrics"}
    assert all(
        r.inputs["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
        for r in roles
    )
    cluster_roles = prod_plan.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert all("prometheus-adapter" in r.inputs["metadata"]["name"] for r in cluster_roles)


def test_grafana_has_a_generated_secret_password_no_anonymous_access_and_the_dashboards(prod_plan):
    committed = {p.name: p.read_text() for p in (PROJECT_DIR / "dashboards").glob("*.json")}
    for deployment in named(prod_plan, DEPLOYMENT, "monitoring", "grafana"):
        (container,) = pod_spec(deployment)["containers"]
        env = {e["name"]: e for e in container["env"]}
        assert env["GF_AUTH_ANONYMOUS_ENABLED"]["value"] == "false"
        assert env["GF_SECURITY_ADMIN_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "grafana-admin"
        assert "value" not in env["GF_SECURITY_ADMIN_PASSWORD"]
    for secret in named(prod_plan, "kubernetes:core/v1:Secret", "monitoring", "grafana-admin"):
        assert secret.inputs["stringData"] == {"password": "[secret]"}
    (password,) = [
        r for r in prod_plan.of_type("random:index/randomPassword:RandomPassword") if r.name == "grafana-admin-password"
    ]
    assert password.inputs["length"] >= 24
    for boards in named(prod_plan, CONFIG_MAP, "monitoring", "grafana-dashboards"):
        assert boards.inputs["data"] == committed
    for provisioning in named(prod_plan, CONFIG_MAP, "monitoring", "grafana-provisioning"):
        datasources = yaml.safe_load(provisioning.inputs["data"]["datasources.yaml"])["datasources"]
        assert datasources[0]["url"] == "http://prometheus.monitoring.svc:9090"


def test_dcgm_exporter_runs_on_gpu_nodes_only(prod_plan):
    for daemonset in named(prod_plan, "kubernetes:apps/v1:DaemonSet", "gpu-metrics", "dcgm-exporter"):
        spec = pod_spec(daemonset)
        term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][
            0
        ]
        assert term["matchExpressions"] == [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
        assert volumes["nvidia-install-dir-host"] == "/home/kubernetes/bin/nvidia"  # GKE's driver path


def test_the_adapter_serves_the_metric_the_triton_hpa_scales_on(prod_plan):
    for config in named(prod_plan, CONFIG_MAP, "monitoring", "prometheus-adapter-config"):
        (rule,) = yaml.safe_load(config.inputs["data"]["config.yaml"])["rules"]
        assert rule["name"]["as"] == QUEUE_TIME_METRIC
        assert "rate(nv_inference_queue_duration_us" in rule["metricsQuery"]
        assert "rate(nv_inference_request_success" in rule["metricsQuery"]
    services = prod_plan.of_type("kubernetes:apiregistration.k8s.io/v1:APIService")
    assert {s.inputs["spec"]["group"] for s in services} == {"custom.metrics.k8s.io"} and len(services) == 3


def test_slo_settings_reach_rules_and_dashboards():
    plan = evaluate("dev", sloLatencyMs=250, sloForMinutes=3, sloMaxFailurePercent=5)
    slo = SloSettings(latency_ms=250, for_minutes=3, max_failure_ratio=0.05)
    (config,) = named(plan, CONFIG_MAP, "monitoring", "prometheus-rules")
    assert config.inputs["data"]["triton.yml"] == rules_yaml(slo, "us-central1")
    assert "250" in config.inputs["data"]["triton.yml"]
    (boards,) = named(plan, CONFIG_MAP, "monitoring", "grafana-dashboards")
    inference = json.loads(boards.inputs["data"]["triton-inference.json"])
    assert "250" in json.dumps(inference)


def operator_monitoring() -> None:
    """The Monitoring component alone in operator mode, as composed onto a cluster that already runs the Prometheus
    Operator (the stack refuses the mode: the clusters it creates have no such CRDs, pulumi-kubernetes#1712)."""
    watched = {
        name: kubernetes.core.v1.Namespace(f"{name}-ns", metadata={"name": name}).metadata.name
        for name in (TRITON_NAMESPACE, LOCUST_NAMESPACE)
    }
    Monitoring(
        "monitoring-us-central1",
        MonitoringArgs(
            region="us-central1",
            stack="dev",
            slo=SloSettings(),
            mode="operator",
            retention="15d",
            storage_gb=20,
            grafana_admin_password="unused",
            watched_namespaces=watched,
        ),
    )


def test_the_components_operator_mode_declares_podmonitors_and_rules_instead_of_a_prometheus():
    plan = evaluate_component(operator_monitoring)
    assert named(plan, DEPLOYMENT, "monitoring", "prometheus") == []
    assert named(plan, DEPLOYMENT, "monitoring", "grafana") == []
    monitors = plan.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
    assert {m.inputs["metadata"]["namespace"] for m in monitors} == {"triton", "load", "gpu-metrics"}
    (rule,) = plan.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    assert rule.inputs["spec"] == json.loads(json.dumps(rules(SloSettings(), "us-central1")))
    namespace = next(
        r
        for r in plan.resources
        if r.type == "kubernetes:core/v1:Namespace" and r.inputs["metadata"]["name"] == "triton"
    )
    assert namespace.urn in rule.dependencies, "the rule waits for (and is destroyed before) Triton's namespace"


def test_dcgm_pods_are_admitted_by_a_quota_for_their_priority_class(prod_plan):
    """GKE admits system-node-critical pods outside kube-system only in a namespace with a ResourceQuota scoped to
    that PriorityClass (https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default,
    fluxcd/flux2#3879); the DaemonSet waits for the quota so no pod is refused first."""
    quotas = {
        provider_region(prod_plan, q): q for q in named(prod_plan, RESOURCE_QUOTA, "gpu-metrics", "critical-pods")
    }
    assert set(quotas) == PROD_REGIONS
    for daemonset in named(prod_plan, DAEMONSET, "gpu-metrics", "dcgm-exporter"):
        quota = quotas[provider_region(prod_plan, daemonset)]
        priority_class = pod_spec(daemonset)["priorityClassName"]
        assert priority_class == "system-node-critical"
        assert quota.inputs["spec"]["scopeSelector"]["matchExpressions"] == [
            {"scopeName": "PriorityClass", "operator": "In", "values": [priority_class]}
        ]
        assert int(quota.inputs["spec"]["hard"]["pods"]) >= 100, "room for one exporter pod per GPU node"
        assert quota.urn in daemonset.dependencies


def test_dcgm_exporter_matches_gpus_to_pods_by_gkes_device_names(prod_plan):
    """GKE's device plugin reports GPUs as nvidia0...; the exporter's default (uid) leaves pod labels empty
    (NVIDIA/dcgm-exporter#342)."""
    for daemonset in named(prod_plan, DAEMONSET, "gpu-metrics", "dcgm-exporter"):
        env = {e["name"]: e.get("value") for e in pod_spec(daemonset)["containers"][0]["env"]}
        assert env["DCGM_EXPORTER_KUBERNETES"] == "true"
        assert env["DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"] == "device-name"


@pytest.mark.parametrize(("autoscale", "replicas"), [(False, 2), (True, None)])
def test_triton_without_an_hpa_runs_fixed_replicas_pulumi_owns(autoscale, replicas):
    """An HPA without a metric source never scales (FailedGetPodsMetric): TritonServing composed without one
    (autoscale=False, as beside the Monitoring component's operator mode) runs min_replicas pods that Pulumi owns;
    with one, Pulumi never sends spec.replicas."""
    args = TritonServingArgs(
        image="nvcr.io/nvidia/tritonserver:25.06-py3",
        model_repository="gs://bucket/models",
        reader_email="reader@project.iam.gserviceaccount.com",
        admin_key="key",
        inference_keys={"a": "key-a", "b": "key-b"},
        accelerator_type="nvidia-tesla-t4",
        gpus_per_node=1,
        min_replicas=2,
        max_replicas=6,
        neg_name_prefix="gke-us-central1",
        autoscale=autoscale,
    )
    plan = evaluate_component(lambda: TritonServing("triton-us-central1", args))
    (deployment,) = named(plan, DEPLOYMENT, "triton", "triton")
    assert deployment.inputs["spec"].get("replicas") == replicas
    assert plan.of_type(HPA) == []


def test_builtin_mode_scales_triton_on_the_adapters_metric(prod_plan):
    hpas = prod_plan.of_type(HPA)
    assert {provider_region(prod_plan, h) for h in hpas} == PROD_REGIONS
    assert all(h.inputs["spec"]["metrics"][0]["pods"]["metric"]["name"] == QUEUE_TIME_METRIC for h in hpas)
