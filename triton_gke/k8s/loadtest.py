"""Locust in the cluster: one master and N workers running the project's locustfile against Triton.

The public locust image does not have tritonclient; an init container pip-installs the pinned
client into a shared volume on PYTHONPATH, so no private registry or custom image is needed.
The web UI is reached with `kubectl port-forward` unless the stack lists source ranges for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke.contracts.loadtest import INFERENCE_HEADERS_ENV, LOCUST_METRICS_PORT, LocustEnvironment, join_headers
from triton_gke.contracts.paths import ARRIVALS_FILE, LOCUSTFILE
from triton_gke.contracts.workloads import (
    LOCUST_APP,
    LOCUST_MASTER,
    LOCUST_NAMESPACE,
    LOCUST_WEB_PORT,
    LOCUST_WORKER,
    pod_labels,
)
from triton_gke.k8s.common import (
    ANY_NODE,
    PodPlacement,
    non_root_container_security,
    non_root_pod_security,
    restricted_namespace,
)

LOCUST_IMAGE = "locustio/locust:2.47.0"
LOCUST_UID = 1000  # the locust user of the image
PIP_PACKAGES = ("tritonclient[http,grpc]==2.73.0", "prometheus-client==0.21.1")
PORTS = {"web": LOCUST_WEB_PORT, "master": 5557, "metrics": LOCUST_METRICS_PORT}
DEPS_DIR = "/deps"


@dataclass(frozen=True)
class LoadTestArgs:
    triton_address: str
    model: str
    rps_per_user: int
    protocol: str
    payload: str
    workers: int
    # CIDRs for a LoadBalancer in front of the web UI; empty: ClusterIP only.
    web_ui_source_ranges: tuple[str, ...] = ()
    rate: int = 0  # requests/s of the whole test; 0: rps_per_user x users
    rate_steps: str = ""  # a load shape (locustfile's rate_steps); "": none
    arrival: str = "poisson"
    # Where the master and workers run (node selector, tolerations); default any node.
    placement: PodPlacement = ANY_NODE
    # The namespace the component creates and runs Locust in.
    namespace: str = LOCUST_NAMESPACE
    # Header -> key the locustfile sends with every inference (both slots' keys: a key change fails none of its
    # requests); empty: inference takes no key. Kept in a Secret of Locust's namespace (a pod reads Secrets of its own
    # namespace only), never in the ConfigMap.
    inference_headers: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)


class LoadTest(pulumi.ComponentResource):
    namespace: kubernetes.core.v1.Namespace
    config: kubernetes.core.v1.ConfigMap
    master: kubernetes.apps.v1.Deployment
    workers: kubernetes.apps.v1.Deployment
    service: kubernetes.core.v1.Service

    def __init__(self, name: str, args: LoadTestArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:k8s:LoadTest", name, None, opts)
        self._name = name
        self._args = args
        self.namespace = restricted_namespace(f"{name}-ns", args.namespace, self)
        ns = self.namespace.metadata.name
        child = pulumi.ResourceOptions(parent=self)
        self.config = kubernetes.core.v1.ConfigMap(
            f"{name}-config",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name="locust-config", namespace=ns),
            data=self.settings,
            opts=child,
        )
        self._locustfile = kubernetes.core.v1.ConfigMap(
            f"{name}-locustfile",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name="locustfile", namespace=ns),
            data={"locustfile.py": LOCUSTFILE.read_text(), "arrivals.py": ARRIVALS_FILE.read_text()},
            opts=child,
        )
        self._headers = self._headers_secret(ns)
        self.master = self._deployment(ns, LOCUST_MASTER, 1, ["--master"])
        self.workers = self._deployment(
            ns, LOCUST_WORKER, args.workers, ["--worker", f"--master-host=locust-master.{args.namespace}"]
        )
        self.service = self._master_service(ns)
        self.register_outputs({"namespace": ns, "service": self.service.metadata.name})

    @property
    def settings(self) -> dict[str, str]:
        """The reference's keys (model, saddr, rps) plus ours; the locustfile reads them from its environment.
        rps stays the reference's per-user figure, but as independent arrivals (rate = rps x users), not
        users firing in lockstep; the stack's locustRate (`rate`, whole test) or locustRateSteps (`rate_steps`,
        steps and ramps) offer load independent of the user count (loadtest/locustfile.py). Unset ones are left
        out: the locustfile's defaults apply."""
        a = self._args
        return LocustEnvironment(
            model=a.model,
            saddr=a.triton_address,
            rps=a.rps_per_user,
            arrival=a.arrival,
            protocol=a.protocol,
            payload=a.payload,
            metrics_port=PORTS["metrics"],
            rate=a.rate or None,  # 0: unset, never an explicit 0 (the locustfile refuses rate=0)
            rate_steps=a.rate_steps or None,
        ).to_env()

    def _headers_secret(self, ns: pulumi.Input[str]) -> kubernetes.core.v1.Secret | None:
        headers = self._args.inference_headers
        if not headers:
            return None
        names = sorted(headers)
        text = pulumi.Output.all(*(headers[n] for n in names)).apply(
            lambda keys: join_headers(dict(zip(names, keys, strict=True)))
        )
        return kubernetes.core.v1.Secret(
            f"{self._name}-inference-headers",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name="locust-inference-headers", namespace=ns),
            string_data={INFERENCE_HEADERS_ENV: text},
            opts=pulumi.ResourceOptions(parent=self),
        )

    def labels(self, component: str) -> dict[str, str]:
        return pod_labels(LOCUST_APP, component)

    def _deployment(
        self, ns: pulumi.Input[str], role: str, replicas: int, role_args: list[str]
    ) -> kubernetes.apps.v1.Deployment:
        labels = self.labels(role)
        return kubernetes.apps.v1.Deployment(
            f"{self._name}-{role}",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name=f"locust-{role}", namespace=ns, labels=labels),
            spec=kubernetes.apps.v1.DeploymentSpecArgs(
                replicas=replicas,
                selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=kubernetes.core.v1.PodTemplateSpecArgs(
                    metadata=kubernetes.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=kubernetes.core.v1.PodSpecArgs(
                        **self._args.placement.pod_fields(),
                        automount_service_account_token=False,
                        security_context=non_root_pod_security(LOCUST_UID),
                        init_containers=[self._install_client()],
                        containers=[self._locust(role, role_args)],
                        volumes=[
                            kubernetes.core.v1.VolumeArgs(
                                name="deps", empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs()
                            ),
                            kubernetes.core.v1.VolumeArgs(
                                name="locustfile",
                                config_map=kubernetes.core.v1.ConfigMapVolumeSourceArgs(
                                    name=self._locustfile.metadata.name
                                ),
                            ),
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _install_client(self) -> kubernetes.core.v1.ContainerArgs:
        return kubernetes.core.v1.ContainerArgs(
            name="install-tritonclient",
            image=LOCUST_IMAGE,
            command=["pip", "install", "--no-cache-dir", "--quiet", f"--target={DEPS_DIR}", *PIP_PACKAGES],
            security_context=non_root_container_security(),
            volume_mounts=[kubernetes.core.v1.VolumeMountArgs(name="deps", mount_path=DEPS_DIR)],
        )

    def _locust(self, role: str, role_args: list[str]) -> kubernetes.core.v1.ContainerArgs:
        ports = PORTS if role == LOCUST_MASTER else {}
        return kubernetes.core.v1.ContainerArgs(
            name="locust",
            image=LOCUST_IMAGE,
            args=["-f", "/mnt/locust/locustfile.py", *role_args],
            env=[kubernetes.core.v1.EnvVarArgs(name="PYTHONPATH", value=DEPS_DIR), *self._headers_env()],
            env_from=[
                kubernetes.core.v1.EnvFromSourceArgs(
                    config_map_ref=kubernetes.core.v1.ConfigMapEnvSourceArgs(name=self.config.metadata.name)
                )
            ],
            ports=[kubernetes.core.v1.ContainerPortArgs(name=n, container_port=p) for n, p in ports.items()],
            resources=kubernetes.core.v1.ResourceRequirementsArgs(
                requests={"cpu": "500m", "memory": "512Mi"}, limits={"memory": "1Gi"}
            ),
            security_context=non_root_container_security(),
            volume_mounts=[
                kubernetes.core.v1.VolumeMountArgs(name="deps", mount_path=DEPS_DIR),
                kubernetes.core.v1.VolumeMountArgs(name="locustfile", mount_path="/mnt/locust", read_only=True),
            ],
        )

    def _headers_env(self) -> list[kubernetes.core.v1.EnvVarArgs]:
        if self._headers is None:
            return []
        ref = kubernetes.core.v1.SecretKeySelectorArgs(name=self._headers.metadata.name, key=INFERENCE_HEADERS_ENV)
        source = kubernetes.core.v1.EnvVarSourceArgs(secret_key_ref=ref)
        return [kubernetes.core.v1.EnvVarArgs(name=INFERENCE_HEADERS_ENV, value_from=source)]

    def _master_service(self, ns: pulumi.Input[str]) -> kubernetes.core.v1.Service:
        service = self._service(ns, "locust-master", "ClusterIP", PORTS)
        if self._args.web_ui_source_ranges:
            # Only the web UI, only from the listed ranges; workers and metrics stay inside the cluster.
            self._service(ns, "locust-web", "LoadBalancer", {"web": PORTS["web"]}, self._args.web_ui_source_ranges)
        return service

    def _service(
        self, ns: pulumi.Input[str], name: str, kind: str, ports: dict[str, int], sources: tuple[str, ...] = ()
    ) -> kubernetes.core.v1.Service:
        return kubernetes.core.v1.Service(
            f"{self._name}-{name}-svc",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels=self.labels(LOCUST_MASTER)),
            spec=kubernetes.core.v1.ServiceSpecArgs(
                type=kind,
                load_balancer_source_ranges=list(sources) or None,
                selector=self.labels(LOCUST_MASTER),
                ports=[kubernetes.core.v1.ServicePortArgs(name=n, port=p, target_port=n) for n, p in ports.items()],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
