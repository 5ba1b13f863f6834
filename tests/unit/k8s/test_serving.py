"""Triton and Locust on every cluster, as the program declares them (mock runtime)."""

from __future__ import annotations

import json

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate
from triton_gke.offline.runtime import Plan, PlannedResource

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
PROD_REGIONS = {"us-central1", "europe-west4", "asia-east1"}


def component_region(plan: Plan, resource: PlannedResource) -> str:
    component = next(a for a in plan.ancestors(resource) if a.type.startswith("triton-gke:k8s:"))
    return component.name.split("-", 1)[1]


def provider_region(plan: Plan, resource: PlannedResource) -> str:
    provider = plan.by_urn(resource.provider_urn)
    assert provider is not None and provider.type == "pulumi:providers:kubernetes", resource.name
    return provider.name.removeprefix("gke-").removesuffix("-k8s")


def named(plan: Plan, type_token: str, namespace: str, name: str) -> list[PlannedResource]:
    return [
        r
        for r in plan.of_type(type_token)
        if r.inputs["metadata"].get("namespace") == namespace and r.inputs["metadata"]["name"] == name
    ]


def pod_spec(deployment: PlannedResource) -> dict:
    return deployment.inputs["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def tritons(prod_plan):
    deployments = named(prod_plan, DEPLOYMENT, "triton", "triton")
    return {provider_region(prod_plan, d): d for d in deployments}


def test_one_triton_per_region_bound_to_that_regions_cluster(prod_plan, tritons):
    assert set(tritons) == PROD_REGIONS
    for region, deployment in tritons.items():
        assert component_region(prod_plan, deployment) == region


def test_triton_reads_the_stack_bucket_with_strict_readiness_and_locked_admin_apis(prod_plan, tritons):
    (bucket,) = prod_plan.of_type("gcp:storage/bucket:Bucket")
    for deployment in tritons.values():
        (container,) = pod_spec(deployment)["containers"]
        args = container["args"]
        assert f"--model-repository=gs://{bucket.inputs['name']}/models" in args
        assert {"--strict-readiness=true", "--exit-on-error=true", "--allow-metrics=true"} <= set(args)
        # The admin group; the inference group has its own key (tests/unit/k8s/test_inference_auth.py).
        restricted = [a for a in args if "restricted" in a and "=inference:" not in a]
        assert len(restricted) == 2
        for flag in restricted:
            apis = flag.split("=", 1)[1].split(":")[0].split(",")
            assert set(apis) == {"model-repository", "shared-memory", "logging", "trace"}
            assert "inference" not in apis and "health" not in apis
            assert flag.endswith("=$(TRITON_ADMIN_KEY)"), "the key comes from a Secret, never a literal"
        assert container["image"] == "nvcr.io/nvidia/tritonserver:25.06-py3"


def test_triton_pod_takes_a_whole_t4_node_and_loads_slowly_safely(tritons):
    for deployment in tritons.values():
        spec = pod_spec(deployment)
        (container,) = spec["containers"]
        assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
            "http": 8000,
            "grpc": 8001,
            "metrics": 8002,
        }
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
        startup = container["startupProbe"]
        assert startup["httpGet"]["path"] == "/v2/health/ready"
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 15 * 60, "models may take minutes to load"
        assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
        assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"


def test_triton_runs_non_root_as_the_workload_identity_account(prod_plan, tritons):
    (reader,) = [a for a in prod_plan.of_type("gcp:serviceaccount/account:Account") if a.name == "models-reader"]
    (account,) = {
        json.dumps(a.inputs, sort_keys=True)
        for a in named(prod_plan, "kubernetes:core/v1:ServiceAccount", "triton", "triton-prod")
    }
    annotations = json.loads(account)["metadata"]["annotations"]
    assert annotations["iam.gke.io/gcp-service-account"].startswith(reader.inputs["accountId"] + "@")
    for deployment in tritons.values():
        spec = pod_spec(deployment)
        assert spec["serviceAccountName"] == "triton-prod"  # the stack's own principal (issue 32)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def test_disruption_budget_and_gpu_load_autoscaler_per_region(prod_plan):
    budgets = named(prod_plan, "kubernetes:policy/v1:PodDisruptionBudget", "triton", "triton")
    autoscalers = named(prod_plan, "kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "triton", "triton")
    assert {provider_region(prod_plan, r) for r in budgets} == PROD_REGIONS
    assert {provider_region(prod_plan, r) for r in autoscalers} == PROD_REGIONS
    for hpa in autoscalers:
        spec = hpa.inputs["spec"]
        assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 6)  # the GPU pool's node range
        (metric,) = spec["metrics"]
        assert metric["pods"]["metric"]["name"] == "triton_queue_time_per_request_us"
        assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "30000"}


def test_services_for_clients_and_for_the_global_load_balancer(prod_plan):
    clusterip = named(prod_plan, SERVICE, "triton", "triton")
    negs = named(prod_plan, SERVICE, "triton", "triton-neg")
    assert len(clusterip) == len(negs) == 3
    assert all(s.inputs["spec"]["type"] == "ClusterIP" for s in clusterip + negs)
    neg_names = set()
    for service in negs:
        annotation = json.loads(service.inputs["metadata"]["annotations"]["cloud.google.com/neg"])
        ports = annotation["exposed_ports"]
        assert set(ports) == {"8000", "8001"}
        neg_names |= {p["name"] for p in ports.values()}
        assert all(provider_region(prod_plan, service) in p["name"] for p in ports.values())
    assert len(neg_names) == 6, "NEG names are unique per region and port"


def test_locust_master_and_ten_workers_per_region(prod_plan):
    masters = named(prod_plan, DEPLOYMENT, "load", "locust-master")
    workers = named(prod_plan, DEPLOYMENT, "load", "locust-worker")
    assert {provider_region(prod_plan, d) for d in masters} == PROD_REGIONS
    assert all(w.inputs["spec"]["replicas"] == 10 for w in workers) and len(workers) == 3
    for deployment in masters + workers:
        spec = pod_spec(deployment)
        (init,) = spec["initContainers"]
        assert "tritonclient[http,grpc]==2.73.0" in init["command"]
        assert spec["nodeSelector"] == {"triton-gke/pool": "cpu"}
        assert spec["containers"][0]["envFrom"][0]["configMapRef"]["name"] == "locust-config"


def test_locust_config_has_the_reference_keys_and_the_repos_locustfile(prod_plan):
    for config in named(prod_plan, "kubernetes:core/v1:ConfigMap", "load", "locust-config"):
        data = config.inputs["data"]
        assert {"model", "saddr", "rps"} <= set(data)
        assert data["saddr"] == "triton.triton.svc.cluster.local:8000"
        assert data["model"] == "original"
    locustfile = (PROJECT_DIR / "loadtest" / "locustfile.py").read_text()
    for config in named(prod_plan, "kubernetes:core/v1:ConfigMap", "load", "locustfile"):
        assert config.inputs["data"]["locustfile.py"] == locustfile


def test_no_load_balancer_for_grafana_prometheus_or_locust_unless_the_stack_asks(prod_plan):
    assert [s for s in prod_plan.of_type(SERVICE) if s.inputs["spec"]["type"] == "LoadBalancer"] == []
    plan = evaluate("dev", webUiSourceRanges=["203.0.113.0/24"])
    public = {
        s.inputs["metadata"]["name"]: s for s in plan.of_type(SERVICE) if s.inputs["spec"]["type"] == "LoadBalancer"
    }
    assert set(public) == {"locust-web", "grafana-web"}, "Prometheus and Locust's worker port stay internal"
    for service in public.values():
        assert service.inputs["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
        assert [p["name"] for p in service.inputs["spec"]["ports"]] == ["web"]


def test_triton_waits_for_the_model_upload(dev_plan):
    (sync,) = [c for c in dev_plan.of_type("command:local:Command") if c.name == "models-sync"]
    (deployment,) = named(dev_plan, DEPLOYMENT, "triton", "triton")
    assert sync.urn in deployment.dependencies
