"""Grafana: the Prometheus datasource and the dashboards of dashboards/, provisioned at start."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes
import yaml

from triton_gke.contracts.workloads import GRAFANA_PORT
from triton_gke.k8s.common import ANY_NODE, PodPlacement, http_probe, non_root_container_security
from triton_gke.k8s.monitoring.prometheus import PROMETHEUS_URL
from triton_gke.k8s.monitoring.shapes import Scope, config_map_volume, meta, service, single_pod_deployment
from triton_gke.observability.dashboards import dashboard_text, dashboards
from triton_gke.observability.settings import SloSettings

GRAFANA_IMAGE = "docker.io/grafana/grafana:11.6.0"
GRAFANA_UID = 472  # the grafana user of Grafana's image
DATASOURCE_UID = "prometheus"
DASHBOARDS_DIR = "/var/lib/grafana-dashboards"


def grafana(
    scope: Scope,
    ns: pulumi.Input[str],
    *,
    slo: SloSettings,
    admin_password: pulumi.Input[str],
    web_ui_source_ranges: tuple[str, ...],
    placement: PodPlacement = ANY_NODE,
    prometheus_url: str = PROMETHEUS_URL,
) -> kubernetes.core.v1.Service:
    """Grafana in `ns` with a secret admin password and no anonymous access; returns its (ClusterIP) Service.

    With `web_ui_source_ranges`, a second Service (`grafana-web`) publishes the web port to those ranges only.
    """
    secret = kubernetes.core.v1.Secret(
        scope.name("grafana-admin"),
        metadata=meta("grafana-admin", ns),
        string_data={"password": admin_password},
        opts=scope.opts(),
    )
    provisioning = kubernetes.core.v1.ConfigMap(
        scope.name("grafana-provisioning"),
        metadata=meta("grafana-provisioning", ns),
        data={
            "datasources.yaml": yaml.safe_dump(grafana_datasources(prometheus_url)),
            "dashboards.yaml": yaml.safe_dump(dashboard_provider()),
        },
        opts=scope.opts(),
    )
    boards = kubernetes.core.v1.ConfigMap(
        scope.name("grafana-dashboards"),
        metadata=meta("grafana-dashboards", ns),
        data={file: dashboard_text(board) for file, board in dashboards(slo).items()},
        opts=scope.opts(),
    )
    mounts = {
        "provisioning-datasources": ("/etc/grafana/provisioning/datasources", provisioning, "datasources.yaml"),
        "provisioning-dashboards": ("/etc/grafana/provisioning/dashboards", provisioning, "dashboards.yaml"),
        "dashboards": (DASHBOARDS_DIR, boards, None),
    }
    container = kubernetes.core.v1.ContainerArgs(
        name="grafana",
        image=GRAFANA_IMAGE,
        env=_env(secret),
        ports=[kubernetes.core.v1.ContainerPortArgs(name="web", container_port=GRAFANA_PORT)],
        readiness_probe=http_probe("/api/health", "web"),
        resources=kubernetes.core.v1.ResourceRequirementsArgs(
            requests={"cpu": "100m", "memory": "256Mi"}, limits={"memory": "1Gi"}
        ),
        security_context=non_root_container_security(),
        volume_mounts=[
            kubernetes.core.v1.VolumeMountArgs(name=n, mount_path=path, read_only=True)
            for n, (path, _, _) in mounts.items()
        ]
        + [kubernetes.core.v1.VolumeMountArgs(name="data", mount_path="/var/lib/grafana")],
    )
    single_pod_deployment(
        scope,
        "grafana",
        ns,
        GRAFANA_UID,
        container,
        volumes=[config_map_volume(n, cm, key) for n, (_, cm, key) in mounts.items()]
        + [kubernetes.core.v1.VolumeArgs(name="data", empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs())],
        placement=placement,
    )
    cluster_service = service(scope, "grafana", ns, {"web": GRAFANA_PORT}, ())
    if web_ui_source_ranges:
        service(scope, "grafana-web", ns, {"web": GRAFANA_PORT}, web_ui_source_ranges, selector_name="grafana")
    return cluster_service


def _env(secret: kubernetes.core.v1.Secret) -> list[kubernetes.core.v1.EnvVarArgs]:
    plain = {
        "GF_SECURITY_ADMIN_USER": "admin",
        "GF_AUTH_ANONYMOUS_ENABLED": "false",
        "GF_USERS_ALLOW_SIGN_UP": "false",
        "GF_ANALYTICS_REPORTING_ENABLED": "false",
        "GF_ANALYTICS_CHECK_FOR_UPDATES": "false",
    }
    # The password only by reference to the Secret: never a plain value in the pod spec.
    password = kubernetes.core.v1.EnvVarArgs(
        name="GF_SECURITY_ADMIN_PASSWORD",
        value_from=kubernetes.core.v1.EnvVarSourceArgs(
            secret_key_ref=kubernetes.core.v1.SecretKeySelectorArgs(name=secret.metadata.name, key="password")
        ),
    )
    return [kubernetes.core.v1.EnvVarArgs(name=k, value=v) for k, v in plain.items()] + [password]


def grafana_datasources(prometheus_url: str = PROMETHEUS_URL) -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Prometheus",
                "type": "prometheus",
                "uid": DATASOURCE_UID,
                "access": "proxy",
                "url": prometheus_url,
                "isDefault": True,
                "editable": False,
            }
        ],
    }


def dashboard_provider() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "triton-gke",
                "folder": "Triton",
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "options": {"path": DASHBOARDS_DIR},
            }
        ],
    }
