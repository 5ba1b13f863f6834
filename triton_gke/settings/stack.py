"""The one entry of the settings layer: a stack's config mapping in, validated StackSettings out.

Under `pulumi up` infra/config.py builds the mapping from the Pulumi runtime; everywhere else (plan, model build,
sandbox, bench, tests) it is the stack file plus --set overrides (`from_stack_file`). Checks run in a fixed order
and the first problem is raised as one ConfigError naming the key.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping
from pathlib import Path

from triton_gke.contracts.paths import project_dir as current_project
from triton_gke.settings import (
    capacity,
    cluster,
    keys,
    lifecycle,
    load_balancer,
    maintenance,
    model_store,
    monitoring,
    region_overrides,
    serving,
    shared_project,
    versions,
)
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.reader import Reader
from triton_gke.settings.schema import config_schema
from triton_gke.settings.source_ranges import cidr_ranges
from triton_gke.settings.stack_file import read_stack_file
from triton_gke.settings.values import StackSettings

# A stack the program deploys: its name goes into Google Cloud names (bucket, clusters, service accounts, firewall
# rules) through contracts/naming.py gcp_name, which lowercases it and turns '_' and '.' into '-', so 'Dev' and 'dev'
# (or 'a_b' and 'a.b') would name the same resources in one project; and a service account id must match
# [a-z]([-a-z0-9]*[a-z0-9]) (IAM CreateServiceAccountRequest.account_id,
# https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts/create), so it starts with a letter.
DEPLOYABLE_STACK = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def check_deployable_stack(stack: str) -> None:
    """One ConfigError line unless `stack` makes Google Cloud names no other stack name makes."""
    if not DEPLOYABLE_STACK.fullmatch(stack):
        raise ConfigError(
            f"stack {stack!r}: a stack this program deploys is named with lowercase letters, digits and '-', starting "
            "with a letter and not ending with '-' (its Google Cloud names are made from it: 'Dev' and 'dev', or 'a_b' "
            "and 'a.b', would name the same bucket and service accounts, and a service account id starts with a letter)"
        )


def load_stack_settings(
    config: Mapping[str, str],
    *,
    stack: str,
    secret_keys: frozenset[str] = frozenset(),
    today: datetime.date | None = None,
) -> StackSettings:
    """Read and validate the whole stack configuration; raises ConfigError on the first problem.

    config: every key set, 'namespace:name' -> value as the engine passes it (text; lists and maps as JSON).
    secret_keys: the keys set with `pulumi config set --secret` (their values are never judged as plain text).
    today: the day kubernetesVersion's GKE support is judged on, for a warning (settings/versions.py); None: the real
    date, or TRITON_GKE_TODAY where set (tests set it, so their plans stay free of it after the default's end).
    """
    check_deployable_stack(stack)
    project_name, schema_keys = config_schema()
    reader = Reader(project_name, schema_keys, config)
    keys.refuse_unknown_keys(reader, secret_keys)
    keys.check_stack_file(reader, stack)
    project = keys.gcp_project(config)
    gpu_catalogue = cluster.gpu_catalogue(reader)
    gpu_pool = cluster.gpu_pool(reader, gpu_catalogue)
    regions = cluster.regions(reader, gpu_catalogue, gpu_pool.accelerator_type)
    cluster.check_provider_location(config, regions)
    serving_settings = serving.serving(reader)
    model_repo = serving.model_repo(reader, gpu_pool, serving_settings.build_engines)
    try:
        day = today or versions.today_from_env()
    except versions.VersionError as err:
        raise ConfigError(str(err)) from None
    windows = maintenance.maintenance(reader, regions)
    cluster_settings, version_notice = cluster.cluster(reader, day, windows)
    maintenance.check_exclusions_in_support(reader, windows, cluster_settings)
    cpu_pool = cluster.cpu_pool(reader)
    cluster.check_nodes_per_zone(reader, regions, cpu_pool, gpu_pool)
    serving.check_image_runs_on_driver(reader, model_repo, gpu_pool, cluster_settings)
    explicit = StackSettings(
        project=project,
        stack=stack,
        regions=regions,
        cluster=cluster_settings,
        cpu_pool=cpu_pool,
        gpu_pool=gpu_pool,
        gpu_catalogue=gpu_catalogue,
        model_store=model_store.model_store(reader, regions),
        model_repo=model_repo,
        serving=serving_settings,
        load_test=serving.load_test(reader, model_repo),
        web_ui_source_ranges=cidr_ranges(reader, "webUiSourceRanges"),
        load_balancer=load_balancer.load_balancer(reader),
        monitoring=(monitored := monitoring.monitoring(reader)),
        # After monitoring, the home of sloLatencyMs (settings/homes.py): the exit timeout must cover the longest
        # request at the SLO.
        lifecycle=lifecycle.lifecycle(reader, gpu_pool.spot, monitored.slo.latency_ms),
        warnings=tuple(w for w in (version_notice, maintenance.overlap_warning(reader, windows)) if w),
        region_overrides=region_overrides.region_overrides(reader, tuple(r.name for r in regions)),
    )
    region_overrides.check_images(reader, explicit)
    # Last: a target replaces the explicit pool minimum, LB rate and HPA target; then the SLO knobs must nest, and
    # the disruption budget must leave a pod of the sized minimum serving.
    sized = capacity.sized(reader, explicit)
    lifecycle.check_disruption_budget(reader, sized.lifecycle, sized.gpu_pool.min_triton_pods)
    notices = tuple(
        n
        for n in (
            serving.engine_build_notice(reader, sized),
            load_balancer.plaintext_key_warning(reader, sized.load_balancer, sized.serving.inference_auth),
            shared_project_notice(project, stack),
        )
        if n
    )
    return dataclasses.replace(sized, warnings=(*sized.warnings, *notices)) if notices else sized


def shared_project_notice(project: str, stack: str) -> str | None:
    """A warning when another stack file of the project folder names the same gcp:project (settings/shared_project.py
    says why it matters, and why a broken other stack file is left out)."""
    others = shared_project.other_stack_projects(current_project(), stack, DEPLOYABLE_STACK.fullmatch)
    return shared_project.shared_project_warning(project, stack, others)


# Pulumi's stack-name rule: "stack names are limited to 100 characters and may only contain alphanumeric, hyphens,
# underscores, or periods" (pulumi/pulumi pkg/backend/diy/store.go, ParseReference; also
# https://www.pulumi.com/learn/building-with-pulumi/understanding-stacks). A leading '.' is refused besides, so
# no name is '.', '..' or hidden: the name becomes part of paths (Pulumi.<stack>.yaml, build/plan/<stack>).
STACK_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")


STACK_NAME_RULE = "letters, digits, '-', '_' and '.', not starting with '.', at most 100 characters"


def check_stack_name(stack: str, what: str = "stack") -> str:
    """The stack name, when it is a plain Pulumi stack name; else one ConfigError line naming it.

    what: how the message names where the name came from ("stack", "--stack", "results.json: stack"); every
    command states the rule in this one wording.
    """
    if not STACK_NAME.fullmatch(stack):
        raise ConfigError(f"{what} {stack!r}: not a Pulumi stack name ({STACK_NAME_RULE})")
    return stack


def stack_config(stack: str, project_dir: Path | None = None, config_file: Path | None = None) -> dict[str, str]:
    """Pulumi.<stack>.yaml (or config_file) as the engine passes it: 'namespace:key' -> string (lists, maps as JSON).

    project_dir: the project folder that holds the stack file; default the current one (schema.project_dir).

    Read strictly (settings/stack_file.py): duplicate keys, empty values, unquoted scalars whose meaning depends on
    the YAML reader, binary, huge or alias-bomb files are a ConfigError naming the file, line and key. The stack
    name is checked first (check_stack_name), with config_file too: every command reads its stack through here.
    """
    check_stack_name(stack)
    path = config_file or (project_dir or current_project()) / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"{path.name}: no such stack file")
    project, schema_keys = config_schema()
    types = {f"{project}:{key}": spec.type for key, spec in schema_keys.items()}
    return read_stack_file(path, project, types)


def from_stack_file(
    stack: str,
    overrides: Mapping[str, str] | None = None,
    config_file: Path | None = None,
    today: datetime.date | None = None,
) -> StackSettings:
    """The validated settings of `stack`: its stack file (or config_file) plus overrides, as `pulumi up` reads them."""
    config = stack_config(stack, config_file=config_file) | dict(overrides or {})
    return load_stack_settings(config, stack=stack, today=today)


__all__ = ["ConfigError", "check_stack_name", "from_stack_file", "load_stack_settings", "stack_config"]
