"""Every stack-config mistake is refused in one line naming the key and value, before any resource."""

from __future__ import annotations

import pytest

from tests.support.stacks import PROJECT, stack_settings
from triton_gke.offline.runtime import CloudMocks, RecordingMonitor, run_program
from triton_gke.settings.errors import ConfigError

BAD_CONFIG = {
    "unknown region": (
        {"regions": ["us-centrall1"]},
        "triton-gke:regions",
        "'us-centrall1'",
        "did you mean us-central1",
    ),
    "region without T4": (
        {"regions": ["europe-north1"]},
        "triton-gke:regions",
        "'europe-north1'",
        "no nvidia-tesla-t4",
    ),
    "duplicate region": ({"regions": ["us-central1", "us-central1"]}, "triton-gke:regions", "'us-central1'", "once"),
    "no region": ({"regions": []}, "triton-gke:regions", "[]", "at least one"),
    "zone without T4": (
        {"regions": ["asia-east1"], "zones": ["asia-east1-b"]},
        "triton-gke:zones",
        "'asia-east1-b'",
        "asia-east1-a, asia-east1-c",
    ),
    "zone not in its region": ({"zones": ["europe-west4-a"]}, "triton-gke:zones", "'europe-west4-a'", "not a zone of"),
    "zone that does not exist": ({"zones": ["us-central1-z"]}, "triton-gke:zones", "'us-central1-z'", "not a zone of"),
    "machine type without T4": (
        {"gpuMachineType": "e2-standard-4"},
        "triton-gke:gpuMachineType",
        "'e2-standard-4'",
        "N1",
    ),
    "too many vCPUs for one T4": (
        {"gpuMachineType": "n1-standard-64"},
        "triton-gke:gpuMachineType",
        "'n1-standard-64'",
        "48 vCPUs",
    ),
    "CPU pool on an accelerator-optimized type": (
        {"cpuMachineType": "g2-standard-8"},
        "triton-gke:cpuMachineType",
        "'g2-standard-8'",
        "accelerator-optimized",
    ),
    "bucket in another region than the clusters": (
        {"bucketLocation": "europe-west4"},
        "triton-gke:bucketLocation",
        "'europe-west4'",
        "us-central1",
    ),
    "Triton SDK image": ({"tritonImageTag": "25.06-py3-sdk"}, "triton-gke:tritonImageTag", "'25.06-py3-sdk'", "SDK"),
    # (A kubernetesVersion past its GKE support is warned, never refused: tests/unit/settings/test_versions.py.)
    "extended channel before 1.27": (
        {"releaseChannel": "EXTENDED", "kubernetesVersion": "1.26"},
        "triton-gke:releaseChannel",
        "'EXTENDED'",
        "from 1.27 on",
    ),
    "unknown accelerator": (
        {"gpuAcceleratorType": "nvidia-tesla-k80"},
        "triton-gke:gpuAcceleratorType",
        "'nvidia-tesla-k80'",
        "nvidia-tesla-t4",
    ),
    "three T4 per node": ({"gpuAcceleratorCount": 3}, "triton-gke:gpuAcceleratorCount", "3", "1, 2 or 4"),
    "min above max": ({"gpuMinNodes": 4, "gpuMaxNodes": 2}, "triton-gke:gpuMinNodes", "4", "gpuMaxNodes (2)"),
    "negative node count": ({"gpuMinNodes": -1}, "triton-gke:gpuMinNodes", "-1", ">= 0"),
    # A zone's NEG exists only once the zone has a node (ingress-gce transaction.go): the CPU pool keeps one.
    "no CPU node": ({"cpuMinNodes": 0}, "triton-gke:cpuMinNodes", "0", ">= 1"),
    "zero max nodes": ({"gpuMinNodes": 0, "gpuMaxNodes": 0}, "triton-gke:gpuMaxNodes", "0", ">= 1"),
    "count that is not a number": ({"gpuMaxNodes": "many"}, "triton-gke:gpuMaxNodes", "'many'", "whole number"),
    "bad driver version": ({"gpuDriverVersion": "535.104"}, "triton-gke:gpuDriverVersion", "'535.104'", "LATEST"),
    "bad release channel": ({"releaseChannel": "NIGHTLY"}, "triton-gke:releaseChannel", "'NIGHTLY'", "REGULAR"),
    "kubernetes version without schema": (
        {"kubernetesVersion": "1.20"},
        "triton-gke:kubernetesVersion",
        "'1.20'",
        "1.25..1.37",
    ),
    "bad authorised network": (
        {"masterAuthorizedCidrs": ["10.0.0.0/33"]},
        "triton-gke:masterAuthorizedCidrs",
        "'10.0.0.0/33'",
        "CIDR",
    ),
    "boolean that is not one": ({"gpuSpot": "yes"}, "triton-gke:gpuSpot", "'yes'", "true or false"),
    "list that is not one": ({"regions": "us-central1"}, "triton-gke:regions", "'us-central1'", "list"),
    "misspelt key": ({"gpuMaxNode": 3}, "triton-gke:gpuMaxNode", "unknown setting", "did you mean gpuMaxNodes"),
    "missing catalogue": ({"gpuCatalogue": "no/such.csv"}, "triton-gke:gpuCatalogue", "no/such.csv", "no such file"),
    "unknown model variant": (
        {"modelVariants": ["tftrt_fp16"]},
        "triton-gke:modelVariants",
        "'tftrt_fp16'",
        "trt_fp16",
    ),
    "duplicate model variant": (
        {"modelVariants": ["original", "original"]},
        "triton-gke:modelVariants",
        "'original'",
        "once",
    ),
    "preferred batch above max": (
        {"modelPreferredBatchSize": 128},
        "triton-gke:modelPreferredBatchSize",
        "128",
        "modelMaxBatchSize (64)",
    ),
    "zero batch size": ({"modelSmallBatchSize": 0}, "triton-gke:modelSmallBatchSize", "0", ">= 1"),
    "zero instances": ({"modelInstanceCount": 0}, "triton-gke:modelInstanceCount", "0", ">= 1"),
    "negative queue delay": ({"modelMaxQueueDelayUs": -5}, "triton-gke:modelMaxQueueDelayUs", "-5", ">= 0"),
    "missing model file": ({"modelSource": "models/mine.onnx"}, "triton-gke:modelSource", "mine.onnx", "not found"),
    "SavedModel on a TF-less image": (
        {"modelSource": "tests/data/saved_model"},
        "triton-gke:modelSource",
        "saved_model",
        "25.02",
    ),
    "engine build from a SavedModel": (
        {"modelSource": "tests/data/saved_model", "tritonImageTag": "25.02-py3", "tritonBuildEngines": True},
        "triton-gke:tritonBuildEngines",
        "true",
        "plans build from ONNX; modelSource tests/data/saved_model is a SavedModel",
    ),
    "bad Triton tag": ({"tritonImageTag": "latest"}, "triton-gke:tritonImageTag", "'latest'", "YY.MM-py3"),
    "bad model prefix": ({"modelPrefix": "a//b c"}, "triton-gke:modelPrefix", "'a//b c'", "folder path"),
    "load test on an unserved model": (
        {"modelVariants": ["original"], "locustModel": "trt_fp16"},
        "triton-gke:locustModel",
        "'trt_fp16'",
        "modelVariants: original",
    ),
    "unknown load-test protocol": ({"locustProtocol": "ftp"}, "triton-gke:locustProtocol", "'ftp'", "http, grpc"),
    "no Locust workers": ({"locustWorkers": 0}, "triton-gke:locustWorkers", "0", ">= 1"),
    "too many Locust workers": ({"locustWorkers": 500}, "triton-gke:locustWorkers", "500", "at most 100"),
    "negative RPS": ({"locustRps": -1}, "triton-gke:locustRps", "-1", ">= 0"),
    "load-test rate beyond the locustfile's bound": (
        {"locustRate": 2_000_000},
        "triton-gke:locustRate",
        "2000000",
        "from 1 to 1,000,000",
    ),
    "load-test rate and rate steps together": (
        {"locustRate": 40, "locustRateSteps": "10:60"},
        "triton-gke:locustRate",
        "40",
        "not both",
    ),
    "load-test step of zero seconds": (
        {"locustRateSteps": "10:60,20:0"},
        "triton-gke:locustRateSteps",
        "'10:60,20:0'",
        "seconds > 0",
    ),
    "trace arrivals (no trace file in the cluster)": (
        {"locustArrival": "trace"},
        "triton-gke:locustArrival",
        "'trace'",
        "poisson, constant",
    ),
    "web UI open to the internet": (
        {"webUiSourceRanges": ["0.0.0.0/0"]},
        "triton-gke:webUiSourceRanges",
        "'0.0.0.0/0'",
        "wider than /8",
    ),
    "zero queue-time target": ({"autoscaleQueueTimeMs": 0}, "triton-gke:autoscaleQueueTimeMs", "0", ">= 1"),
    "domain without load balancer": (
        {"domain": "infer.example.com"},
        "triton-gke:domain",
        "'infer.example.com'",
        "globalLoadBalancer: true",
    ),
    "malformed domain": (
        {"globalLoadBalancer": True, "domain": "not a domain"},
        "triton-gke:domain",
        "'not a domain'",
        "DNS name",
    ),
    "zero LB rate": ({"lbMaxRatePerPod": 0}, "triton-gke:lbMaxRatePerPod", "0", ">= 1"),
    # Red-team finding: 1e23 was taken and its per-service split no longer added up in a float.
    "huge LB rate": ({"lbMaxRatePerPod": 10**23}, "triton-gke:lbMaxRatePerPod", str(10**23), "1,000,000"),
    # Red-team finding: at 100 % the failure-ratio alert (ratio > 1.0) can never fire; records refuse 100 too.
    "failure budget of 100 %": ({"sloMaxFailurePercent": 100}, "triton-gke:sloMaxFailurePercent", "100", "never fires"),
    "UINT8 input for an unserved variant": (
        {"modelVariants": ["original"], "modelUint8Input": ["trt_fp16"]},
        "triton-gke:modelUint8Input",
        "'trt_fp16'",
        "not in modelVariants",
    ),
    "uint8 load on an FP32 model": (
        {"locustPayload": "uint8"},
        "triton-gke:locustPayload",
        "'uint8'",
        "original takes FP32",
    ),
    "fp32 load on a UINT8 model": (
        {"modelUint8Input": ["original"]},
        "triton-gke:locustPayload",
        "'fp32'",
        "original takes UINT8",
    ),
    # PodMonitor/PrometheusRule need the Prometheus Operator's CRDs, which the clusters this `up` creates never have:
    # the first `up` would fail half-way, after the clusters (pulumi/pulumi-kubernetes#1712).
    "operator monitoring on the clusters the stack creates": (
        {"monitoringMode": "operator"},
        "triton-gke:monitoringMode",
        "'operator'",
        "no Prometheus Operator CRDs",
    ),
    "unknown monitoring mode": (
        {"monitoringMode": "prometheus"},
        "triton-gke:monitoringMode",
        "'prometheus'",
        "allowed: builtin",
    ),
    "missing GCP project": ({"gcp:project": None}, "gcp:project", "missing", "pulumi config set gcp:project"),
    "invalid GCP project": ({"gcp:project": "My_Project"}, "gcp:project", "'My_Project'", "project ID"),
}


@pytest.mark.parametrize("overrides,key,value,hint", BAD_CONFIG.values(), ids=BAD_CONFIG.keys())
def test_bad_config_is_refused_in_one_line_before_any_resource(overrides, key, value, hint):
    monitor = RecordingMonitor(CloudMocks())
    with pytest.raises(ConfigError) as refused:
        run_program("dev", stack_settings("dev", **overrides), PROJECT, monitor=monitor)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{key}:")
    assert value in message and hint in message
    assert monitor.records == [], "resources were declared before the config was checked"


def test_catalogue_override_is_used(tmp_path):
    catalogue = tmp_path / "t4.csv"
    catalogue.write_text(
        "# Source: test, 2026-11\n"
        "accelerator,count,region,zone,price_on_demand_usd_h,price_spot_usd_h\n"
        "nvidia-tesla-t4,1,europe-north1,europe-north1-a,0.40,0.16\n"
    )
    plan = run_program(
        "dev", stack_settings("dev", regions=["europe-north1"], zones=[], gpuCatalogue=str(catalogue)), PROJECT
    )
    (cluster,) = plan.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["nodeLocations"] == ["europe-north1-a"]
