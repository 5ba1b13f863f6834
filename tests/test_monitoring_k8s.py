"""The monitoring objects every cluster gets (mock runtime): Prometheus, Grafana, DCGM, the HPA adapter."""

from __future__ import annotations

import json

import yaml
from conftest import PROJECT_DIR, evaluate
from test_serving import named, pod_spec, provider_region

from k8s.triton import QUEUE_TIME_METRIC
from monitoring.rules import rules, rules_yaml
from monitoring.settings import SloSettings

PROD_REGIONS = {"us-central1", "europe-west4", "asia-east1"}
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


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


def test_operator_mode_declares_podmonitors_and_rules_instead_of_a_prometheus():
    plan = evaluate("dev", monitoringMode="operator")
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
