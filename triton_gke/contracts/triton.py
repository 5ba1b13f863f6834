"""What every side that talks to Triton must agree on: its ports, its health paths, its TensorRT cache path.

The Deployment and Services (k8s/triton.py), the global load balancer's health check, firewall and routes
(infra/global_lb.py), the local sandbox (sandbox/) and the model repository's config.pbtxt (model_repo/) read these.
The locustfile (loadtest/locustfile.py) ships alone in a ConfigMap and keeps its own copy of the inference ports;
tests/unit/contracts/test_contracts.py checks that copy against PORTS.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# tritonserver's default ports, which the GKE command line also states (--http-port, --grpc-port, --metrics-port):
# HTTP 8000, gRPC 8001, Prometheus metrics 8002
# (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html,
# https://triton-inference-server.github.io/pytriton/latest/reference/triton_config/ http_port "Default is 8000").
# The keys are also the container port names the Services and probes refer to.
PORTS: Mapping[str, int] = MappingProxyType({"http": 8000, "grpc": 8001, "metrics": 8002})
# The ports clients infer on (the load balancer's backends and firewall, the locustfile's defaults).
INFERENCE_PORTS: Mapping[str, int] = MappingProxyType({name: PORTS[name] for name in ("http", "grpc")})

# KServe v2 (Open Inference Protocol) HTTP paths, which Triton serves
# (https://kserve.github.io/website/docs/concepts/architecture/data-plane/v2-protocol): server metadata, liveness,
# readiness. With --strict-readiness=true, ready means every model loaded.
SERVER_METADATA_PATH = "/v2"
LIVE_PATH = "/v2/health/live"
READY_PATH = "/v2/health/ready"
HEALTH_PATHS: Mapping[str, str] = MappingProxyType({"live": LIVE_PATH, "ready": READY_PATH})

# Where ONNX Runtime's TensorRT execution provider keeps built engines and timing caches inside the Triton container:
# config.pbtxt names it (trt_engine_cache_path, trt_timing_cache_path,
# https://github.com/triton-inference-server/onnxruntime_backend#onnx-runtime-with-tensorrt-optimization) and the pod
# mounts a volume there, so engines are built once per pod, not once per model load.
TRT_CACHE_DIR = "/trt-cache"
