"""`triton-gke e2e --stack STACK` (`make e2e STACK=dev`): a real deploy checked end to end in a scratch project.

    pulumi up, the smoke test and a short Locust run on each region's Triton, pulumi destroy, then gcloud listings
    of what the stack could have left (clusters, NEGs, disks, firewall rules, addresses, buckets)

Before anything is created it refuses, in one line and exit 2, without the tools or the credentials the run needs:
`pulumi` and `gcloud` (and `kubectl`) on PATH; an active gcloud account (`gcloud auth list --format=json` lists one
with status ACTIVE: https://cloud.google.com/sdk/gcloud/reference/auth/list); Application Default Credentials, which
`pulumi up`, the model sync and the NEG cleanup use (`gcloud auth application-default print-access-token` prints a
token only with them: https://cloud.google.com/sdk/gcloud/reference/auth/application-default/print-access-token);
a Pulumi backend logged in to (`pulumi whoami` "Displays the username of the currently logged in user", and fails
without a login: https://www.pulumi.com/docs/iac/cli/commands/pulumi_whoami/; any backend, not only Pulumi Cloud's
PULUMI_ACCESS_TOKEN). The stack's project and regions come from `pulumi config --json`
(https://www.pulumi.com/docs/iac/cli/commands/pulumi_config/).

Once `pulumi up` has started, `pulumi destroy` always runs, whatever failed (try/finally), and the listings after it.
`pulumi up --yes --skip-preview` and `pulumi destroy --yes --skip-preview` run without a prompt: "--yes
Automatically approve and perform the update after previewing it", "--skip-preview Do not calculate a preview before
performing the update" (https://www.pulumi.com/docs/iac/cli/commands/pulumi_up/,
https://www.pulumi.com/docs/iac/cli/commands/pulumi_destroy/); --non-interactive "Disable interactive mode for all
commands" (https://www.pulumi.com/docs/iac/cli/commands/pulumi/). The outputs are read with
`pulumi stack output --json --show-secrets` (https://www.pulumi.com/docs/iac/cli/commands/pulumi_stack_output/).

Each region's Triton is reached as the `access` output tells an operator: `kubectl port-forward svc/triton` in the
triton namespace, with the region's kubeconfig output, on a free local port (":8000": "Listen on a random port
locally", https://kubernetes.io/docs/reference/kubectl/generated/kubectl_port-forward/). Locust runs the project's
locustfile headless at a low rate with the stack's inference key; it exits non-zero when a request failed
(--exit-code-on-error, "Defaults to 1": https://docs.locust.io/en/stable/configuration.html).

Exit status: 0 all passed and nothing is left; 1 a step failed or a listing shows a leftover (one line each);
2 bad input or no credentials (one line, nothing created); 128+N stopped by signal N.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_gke.cli.e2e_leftovers import LISTINGS, StackNames, leftovers
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.contracts.loadtest import LocustEnvironment, join_headers
from triton_gke.contracts.paths import LOCUSTFILE
from triton_gke.contracts.triton import PORTS
from triton_gke.contracts.workloads import TRITON_APP, TRITON_NAMESPACE
from triton_gke.loadtest.arrivals import MAX_RATE
from triton_gke.one_line import OneLineParser, invoked_as
from triton_gke.sandbox.processes import locust_base_environment, stop_process
from triton_gke.settings import ConfigError, from_stack_file
from triton_gke.settings.stack import check_stack_name

NON_INTERACTIVE = ("--yes", "--skip-preview", "--non-interactive")
# kubectl port-forward's line naming the local port it listens on: "Forwarding from 127.0.0.1:PORT -> 8000".
FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")
PORT_FORWARD_TIMEOUT_S = 60
# The smoke test's environment variables for the inference key (model_repo/smoke.py KEY_HEADER_ENV, KEY_ENV).
KEY_HEADER_ENV, KEY_ENV = "TRITON_INFERENCE_KEY_HEADER", "TRITON_INFERENCE_KEY"


class E2eError(Exception):
    """A failed step, worth one line."""


class Refusal(Exception):
    """Missing tools, credentials or settings: one line, exit 2, nothing created."""


@dataclass(frozen=True)
class Tools:
    """The programs the run starts: the cloud CLIs from PATH, the smoke test and Locust from this install."""

    pulumi: str
    gcloud: str
    kubectl: str
    smoke: tuple[str, ...]
    locust: str

    @classmethod
    def found(cls) -> Tools:
        missing = [name for name in ("pulumi", "gcloud", "kubectl") if shutil.which(name) is None]
        if missing:
            them = "it" if len(missing) == 1 else "them"
            raise Refusal(f"{' and '.join(missing)} not on PATH: install {them} (docs/deploy-steps.md, step 1)")
        bin_dir = Path(sys.executable).parent
        return cls(
            pulumi=str(shutil.which("pulumi")),
            gcloud=str(shutil.which("gcloud")),
            kubectl=str(shutil.which("kubectl")),
            smoke=(str(bin_dir / "triton-gke"), "smoke"),
            locust=str(bin_dir / "locust"),
        )


def _capture(words: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(words), capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def check_credentials(tools: Tools) -> None:
    """Refusal unless gcloud has an active account and ADC, and pulumi a backend it is logged in to."""
    accounts = _capture([tools.gcloud, "auth", "list", "--format=json"])
    try:
        active = [a for a in json.loads(accounts.stdout or "[]") if a.get("status") == "ACTIVE"]
    except (ValueError, AttributeError):
        active = []
    if accounts.returncode != 0 or not active:
        raise Refusal("no active gcloud account: run `gcloud auth login`")
    if _capture([tools.gcloud, "auth", "application-default", "print-access-token"]).returncode != 0:
        raise Refusal("no Application Default Credentials: run `gcloud auth application-default login`")
    whoami = _capture([tools.pulumi, "whoami"])
    if whoami.returncode != 0:
        raise Refusal(f"pulumi is not logged in ({_first_line(whoami.stderr)[:120]}): run `pulumi login`")


def stack_names(tools: Tools, stack: str) -> StackNames:
    """The stack's project and regions, from its configuration (`pulumi config --json`)."""
    shown = _capture([tools.pulumi, "config", "--json", "--stack", stack])
    if shown.returncode != 0:
        raise Refusal(f"pulumi config --stack {stack}: {_first_line(shown.stderr)[:160]}")
    try:
        config = json.loads(shown.stdout)
        project = str(config["gcp:project"]["value"])
        regions = config["triton-gke:regions"].get("objectValue") or json.loads(config["triton-gke:regions"]["value"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise Refusal(f"stack {stack}: its configuration names no gcp:project and triton-gke:regions") from None
    return StackNames(project=project, stack=stack, regions=tuple(str(region) for region in regions))


def _step(words: Sequence[str], what: str) -> None:
    """Run a step with the user's terminal as its output; E2eError naming it when it fails."""
    print(f"e2e: {what}", file=sys.stderr, flush=True)
    status = subprocess.run(list(words), stdin=subprocess.DEVNULL, check=False).returncode
    if status != 0:
        raise E2eError(f"{what} failed (exit {status})")


def _pulumi(tools: Tools, verb: str, stack: str) -> None:
    """`pulumi up` or `pulumi destroy` of the stack, without a prompt."""
    _step([tools.pulumi, verb, "--stack", stack, *NON_INTERACTIVE], f"pulumi {verb} --stack {stack}")


def stack_outputs(tools: Tools, stack: str) -> dict[str, Any]:
    shown = _capture([tools.pulumi, "stack", "output", "--json", "--show-secrets", "--stack", stack])
    try:
        outputs = json.loads(shown.stdout) if shown.returncode == 0 else None
    except ValueError:
        outputs = None
    if not isinstance(outputs, dict):
        raise E2eError(f"pulumi stack output --stack {stack}: {_first_line(shown.stderr)[:160] or 'no JSON object'}")
    return outputs


@contextmanager
def port_forward(tools: Tools, kubeconfig: str) -> Iterator[int]:
    """The local port on which a region's Triton answers, while `kubectl port-forward` runs."""
    with forward(tools.kubectl, kubeconfig, TRITON_NAMESPACE, TRITON_APP, PORTS["http"]) as port:
        yield port


@contextmanager
def forward(kubectl: str, kubeconfig: str, namespace: str, service: str, port: int) -> Iterator[int]:
    """The local port on which svc/SERVICE:PORT of a region's cluster answers, while `kubectl port-forward` runs
    (also the rollout's route to a region's Prometheus, cli/rollout.py)."""
    with tempfile.TemporaryDirectory(prefix="triton-gke-e2e-") as folder:
        config = Path(folder) / "kubeconfig"
        config.write_text(kubeconfig)
        config.chmod(0o600)  # it names the cluster's endpoint and CA; the token comes from the auth plugin
        words = [kubectl, "--kubeconfig", str(config), "-n", namespace]
        words += ["port-forward", f"svc/{service}", f":{port}"]
        process = subprocess.Popen(words, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            yield _forwarded_port(process, service)
        finally:
            stop_process(process, 5.0)


def _forwarded_port(process: subprocess.Popen[str], service: str) -> int:
    assert process.stdout is not None
    for line in process.stdout:
        found = FORWARDING.search(line)
        if found:
            return int(found.group(1))
    raise E2eError(f"kubectl port-forward svc/{service} ended without a port (exit {process.wait()})")


def key_headers(outputs: Mapping[str, Any]) -> dict[str, str]:
    """The inference key's header and value ({} for a stack with inferenceAuth false)."""
    header, key = outputs.get("inferenceKeyHeader"), outputs.get("inferenceKey")
    return {str(header): str(key)} if header and key else {}


def check_region(tools: Tools, args: Any, port: int, headers: Mapping[str, str]) -> None:
    """The smoke test, then a short Locust run, on one region's Triton at 127.0.0.1:port."""
    env = dict(os.environ)
    if headers:
        ((header, key),) = headers.items()
        env |= {KEY_HEADER_ENV: header, KEY_ENV: key}
    print("e2e: smoke test", file=sys.stderr, flush=True)
    smoke = subprocess.run([*tools.smoke, f"http://127.0.0.1:{port}"], env=env, stdin=subprocess.DEVNULL, check=False)
    if smoke.returncode != 0:
        raise E2eError(f"the smoke test failed (exit {smoke.returncode})")
    locust_env = LocustEnvironment(
        model=args.model,
        saddr=f"127.0.0.1:{port}",
        rate=args.rate,
        protocol="http",
        metrics_port=0,
        inference_headers=join_headers(headers) or None,
    )
    users = str(args.users)
    words = [tools.locust, "-f", str(LOCUSTFILE), "--headless", "-u", users, "-r", users]
    words += ["-t", f"{args.locust_seconds}s", "--only-summary", "--loglevel", "WARNING"]
    print(f"e2e: Locust, {args.locust_seconds} s at {args.rate} requests/s", file=sys.stderr, flush=True)
    locust = subprocess.run(
        words, env=locust_base_environment() | locust_env.to_env(), stdin=subprocess.DEVNULL, check=False
    )
    if locust.returncode != 0:
        raise E2eError(f"Locust failed or a request did (exit {locust.returncode})")


def check_stack(tools: Tools, args: Any) -> None:
    outputs = stack_outputs(tools, args.stack)
    kubeconfigs = outputs.get("kubeconfigs") or {}
    if not isinstance(kubeconfigs, dict) or not kubeconfigs:
        raise E2eError("the stack's outputs have no kubeconfigs: no region to check")
    for region, kubeconfig in sorted(kubeconfigs.items()):
        print(f"e2e: region {region}", file=sys.stderr, flush=True)
        with port_forward(tools, str(kubeconfig)) as port:
            check_region(tools, args, port, key_headers(outputs))


def list_leftovers(tools: Tools, names: StackNames) -> list[str]:
    """One line per resource of the stack a listing still shows, or per listing that failed."""
    lines: list[str] = []
    for listing in LISTINGS:
        words = [tools.gcloud, *listing.words, f"--project={names.project}", "--format=json"]
        shown = _capture(words)
        try:
            items = json.loads(shown.stdout or "[]") if shown.returncode == 0 else None
        except ValueError:
            items = None
        if not isinstance(items, list):
            lines.append(f"{' '.join(listing.words)}: failed, {_first_line(shown.stderr)[:120] or 'no JSON list'}")
            continue
        lines += leftovers(listing, names, items)
    return lines


def run(args: Any, tools: Tools) -> int:
    """Up, check, destroy (always, once up started), list. Refusal before up propagates to main."""
    check_credentials(tools)
    names = stack_names(tools, args.stack)
    failures: list[str] = []
    try:
        _pulumi(tools, "up", args.stack)
        check_stack(tools, args)
    except E2eError as err:
        failures.append(str(err))
    finally:
        try:
            _pulumi(tools, "destroy", args.stack)
        except E2eError as err:
            failures.append(str(err))
    left = list_leftovers(tools, names)
    for line in failures:
        print(f"e2e: FAILED: {line}", file=sys.stderr)
    for line in left:
        print(f"e2e: LEFT: {line}", file=sys.stderr)
    if failures or left:
        return EXIT_FAILED
    print(f"e2e: {args.stack} went up, answered and left nothing in {names.project}", file=sys.stderr)
    return 0


def parser() -> OneLineParser:
    prog = invoked_as("e2e", "e2e")
    command = OneLineParser(
        prog=prog["prog"],
        hint=prog["hint"],
        description="pulumi up, the smoke test and a short Locust run on each region, pulumi destroy, then gcloud "
        "listings of what the stack could have left; exit 1 on any failure or leftover (one line each). For a "
        "scratch project: it creates and deletes real, billed resources.",
        epilog="exit status: 0 all passed and nothing is left; 1 a step failed or something is left; 2 bad input, "
        "or no tools or credentials (nothing created).",
    )
    command.add_argument("--stack", required=True, help="the Pulumi stack (dev: one region, one T4 node)")
    command.add_argument("--locust-seconds", type=int, default=30, help="how long Locust runs per region (30)")
    command.add_argument("--rate", type=float, default=1.0, help="Locust's requests/s (1.0)")
    command.add_argument("--users", type=int, default=2, help="at most this many requests in flight (2)")
    command.add_argument("--model", default="original", help="the model Locust asks (original)")
    return command


MAX_LOCUST_SECONDS = 3600  # a check, not a soak test
MAX_USERS = 10_000


def _check_stack_and_model(stack: str, model: str) -> None:
    """The stack name by Pulumi's rule (an empty --stack would make pulumi up and destroy the selected stack: red
    team of issue 48), its stack file's settings valid, and --model one of the variants it serves."""
    settings = from_stack_file(check_stack_name(stack, "--stack"))
    served = tuple(variant.name for variant in settings.model_repo.variants)
    if model not in served:
        raise ConfigError(f"--model {model!r}: not a variant stack {stack} serves ({', '.join(served)})")


def main(argv: Sequence[str] | None = None) -> int:
    command = parser()
    args = command.parse_args(list(sys.argv[1:] if argv is None else argv))
    for option, value, most in (
        ("--locust-seconds", args.locust_seconds, MAX_LOCUST_SECONDS),
        ("--rate", args.rate, MAX_RATE),
        ("--users", args.users, MAX_USERS),
    ):
        if not (math.isfinite(value) and 0 < value <= most):  # NaN fails this too
            command.error(f"{option}: must be above 0 and at most {most:g}, not {value}")
    try:
        _check_stack_and_model(args.stack, args.model)  # before tools and credentials: a bad option is told first
    except ConfigError as err:
        command.error(str(err))
    try:
        return run(args, Tools.found())
    except Refusal as refusal:
        print(f"error: {command.prog}: {refusal}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
