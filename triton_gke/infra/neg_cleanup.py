"""Remove, or wait for, the zonal NEGs GKE's NEG controller makes from Triton's `triton-neg` Service.

`pulumi up` runs this module through the project venv (infra/negs.py), like the model sync:

    python -m triton_gke.infra.neg_cleanup remove --project P --region R --name NEG [--name NEG ...]
    python -m triton_gke.infra.neg_cleanup wait --project P --zone Z [--zone Z ...] --name NEG [--name NEG ...]

`remove` deletes every NEG of those names in any zone of the region (found with the Compute API's aggregated list,
so a zone added or dropped since never matters), waits for each zonal delete operation, counts 404 as gone and
retries while a backend service still uses a NEG (resourceInUseByAnotherResource) or the NEG controller is busy with
it, until --timeout-s. `wait` returns once every NEG exists in every zone, or fails at --timeout-s.

Credentials are Application Default Credentials (google-auth); the deployer's identity needs
compute.networkEndpointGroups.list/get/delete and compute.zoneOperations.get (docs/architecture.md). Any failure is
one line on stderr and exit 1; a bad command line one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from triton_gke.one_line import OneLineParser

API_ROOT = "https://compute.googleapis.com/compute/v1"
SCOPES = ("https://www.googleapis.com/auth/compute",)
PROG = "python -m triton_gke.infra.neg_cleanup"
# Errors that mean "not now" rather than "never": a backend service still references the NEG (the API refuses to
# delete it: https://cloud.google.com/compute/docs/reference/rest/v1/networkEndpointGroups/delete), or another
# operation (the NEG controller's own delete) is running on it.
RETRY_REASONS = frozenset({"resourceInUseByAnotherResource", "resourceNotReady"})
RETRY_OPERATION_CODES = frozenset({"RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", "RESOURCE_NOT_READY"})
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
HTTP_TIMEOUT_S = 60


class NegError(Exception):
    """A failure worth one line."""


@dataclass(frozen=True)
class Neg:
    zone: str
    name: str
    # Its network endpoints (the listing's `size`); a live cluster's NEG holds its pods.
    size: int = 0

    def __str__(self) -> str:
        return f"{self.zone}/{self.name}"


class ComputeApi:
    """The few Compute Engine REST calls this module needs, over an authorized requests session."""

    def __init__(self, session: Any, root: str, project: str) -> None:
        self._session = session
        self._root = root.rstrip("/")
        self._project = project

    def _url(self, path: str) -> str:
        return f"{self._root}/projects/{self._project}/{path}"

    def _call(self, method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        try:
            response = self._session.request(method, self._url(path), timeout=HTTP_TIMEOUT_S, **kwargs)
        except Exception as err:  # requests' and google-auth's transport and refresh errors alike
            raise NegError(f"{method} {self._url(path)}: {_first_line(err)}") from None
        try:
            body = response.json() if response.content else {}
        except ValueError:
            body = {}
        return response.status_code, body if isinstance(body, dict) else {}

    def list_in_region(self, name: str, region: str) -> list[Neg]:
        """Every NEG called `name` in a zone of `region` (aggregatedList, all pages)."""
        found: list[Neg] = []
        params: dict[str, str] = {"filter": f'name = "{name}"'}
        while True:
            status, body = self._call("GET", "aggregated/networkEndpointGroups", params=params)
            if status != 200:
                raise NegError(f"listing NEGs named {name}: {_api_error(status, body)}")
            for scope in (body.get("items") or {}).values():
                for neg in scope.get("networkEndpointGroups") or []:
                    zone = _last(neg.get("zone", ""))
                    # The filter narrows the listing; the name and region are checked here all the same.
                    if neg.get("name") == name and zone_region(zone) == region:
                        found.append(Neg(zone, name, _count(neg.get("size"))))
            token = body.get("nextPageToken")
            if not token:
                return sorted(found, key=str)
            params = {**params, "pageToken": token}

    def exists(self, neg: Neg) -> bool | None:
        """True or False; None when the API answered with a transient error."""
        status, body = self._call("GET", f"zones/{neg.zone}/networkEndpointGroups/{neg.name}")
        if status == 200:
            return True
        if status == 404:
            return False
        if status in TRANSIENT_STATUS:
            return None
        raise NegError(f"reading NEG {neg}: {_api_error(status, body)}")

    def delete(self, neg: Neg) -> str | None:
        """Start deleting `neg`: the operation's name, '' when already gone, None to retry later."""
        status, body = self._call("DELETE", f"zones/{neg.zone}/networkEndpointGroups/{neg.name}")
        if status == 404:
            return ""
        if status in (200, 201):
            return body.get("name") or ""
        if status in TRANSIENT_STATUS or _reasons(body) & RETRY_REASONS:
            return None
        raise NegError(f"deleting NEG {neg}: {_api_error(status, body)}")

    def wait_operation(self, zone: str, operation: str, deadline: float) -> dict[str, Any]:
        """The zonal operation once DONE (zoneOperations.wait returns DONE or after a while; asked again until then)."""
        while True:
            status, body = self._call("POST", f"zones/{zone}/operations/{operation}/wait")
            if status == 200 and body.get("status") == "DONE":
                return body
            if status not in (200, *TRANSIENT_STATUS):
                raise NegError(f"waiting for operation {operation} in {zone}: {_api_error(status, body)}")
            if time.monotonic() >= deadline:
                raise NegError(f"operation {operation} in {zone} not done within the time allowed")


def _count(value: object) -> int:
    """The listing's `size` (an integer, possibly sent as text); 0 when absent or unreadable."""
    try:
        return max(0, int(str(value)))
    except ValueError:
        return 0


def zone_region(zone: str) -> str:
    """us-central1-a -> us-central1 (Compute Engine zone names are REGION-LETTER)."""
    return zone.rsplit("-", 1)[0]


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _first_line(value: object) -> str:
    lines = str(value).strip().splitlines()
    return lines[0] if lines else type(value).__name__


def _reasons(body: dict[str, Any]) -> set[str]:
    error = body.get("error")
    if not isinstance(error, dict):
        return set()
    return {e.get("reason", "") for e in error.get("errors") or [] if isinstance(e, dict)}


def _api_error(status: int, body: dict[str, Any]) -> str:
    error = body.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return f"HTTP {status}: {_first_line(message)}" if message else f"HTTP {status}"


def _operation_retry(operation: dict[str, Any]) -> bool | None:
    """None: the operation succeeded; True: it failed for a reason worth retrying; raises otherwise."""
    errors = (operation.get("error") or {}).get("errors") or []
    if not errors:
        return None
    codes = {e.get("code", "") for e in errors if isinstance(e, dict)}
    if codes <= RETRY_OPERATION_CODES:
        return True
    first = errors[0] if isinstance(errors[0], dict) else {}
    raise NegError(f"operation {operation.get('name', '?')}: {first.get('code', '?')}: {first.get('message', '')}")


def remove(
    api: ComputeApi,
    region: str,
    names: Sequence[str],
    timeout_s: float,
    poll_s: float,
    say: Callable[[str], None],
    stale_only: bool = False,
) -> int:
    """Delete every NEG of `names` in `region`; the number removed. Raises NegError past the deadline.

    stale_only (on create): only what a destroyed earlier cluster left. A NEG with endpoints, or one a backend
    service uses, belongs to a running stack (this one, upgraded to a version with this command): it is kept, and
    never waited for. An empty, unused NEG of a live cluster may go too: its NEG controller creates it again on its
    next sync, and the `ready` command waits for that."""
    deadline = time.monotonic() + timeout_s
    removed, kept = 0, set()
    while True:
        listed = [neg for name in names for neg in api.list_in_region(name, region)]
        for neg in listed:
            if stale_only and neg.size and (neg.zone, neg.name) not in kept:
                kept.add((neg.zone, neg.name))
                say(f"kept NEG {neg}: {neg.size} endpoint(s), a running cluster's")
        left = [neg for neg in listed if (neg.zone, neg.name) not in kept]
        if not left:
            return removed
        if time.monotonic() >= deadline:
            still = ", ".join(map(str, left))
            raise NegError(f"NEGs still present after {timeout_s:g} s (in use by a backend service?): {still}")
        waiting = False
        for neg in left:
            operation = api.delete(neg)
            if operation and _operation_retry(api.wait_operation(neg.zone, operation, deadline)):
                operation = None
            if operation is None and stale_only:  # in use by a backend service: a running stack's
                kept.add((neg.zone, neg.name))
                say(f"kept NEG {neg}: a backend service uses it")
                continue
            if operation is None:
                waiting = True
                continue
            removed += 1
            say(f"removed NEG {neg}")
        if waiting:  # then list again: whatever is left is retried, whatever is gone is done
            time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))


def wait(
    api: ComputeApi,
    zones: Sequence[str],
    names: Sequence[str],
    timeout_s: float,
    poll_s: float,
    say: Callable[[str], None],
) -> None:
    """Return once every NEG of `names` exists in every zone; raises NegError past the deadline."""
    deadline = time.monotonic() + timeout_s
    missing = [Neg(zone, name) for zone in zones for name in names]
    while True:
        missing = [neg for neg in missing if api.exists(neg) is not True]
        if not missing:
            say(f"NEGs {', '.join(names)} exist in {', '.join(zones)}")
            return
        if time.monotonic() >= deadline:
            raise NegError(
                f"NEGs missing after {timeout_s:g} s: {', '.join(map(str, missing))} "
                "(GKE creates a zone's NEGs once the Service exists and the zone has nodes)"
            )
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _parser() -> OneLineParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for command, what in (("remove", "delete the NEGs in every zone of a region"), ("wait", "wait for the NEGs")):
        sub = commands.add_parser(command, help=what, description=what, allow_abbrev=False)
        sub.add_argument("--project", required=True)
        if command == "remove":
            sub.add_argument("--region", required=True)
            sub.add_argument(
                "--stale-only",
                action="store_true",
                help="only NEGs without endpoints that no backend service uses (what a destroyed cluster left)",
            )
        else:
            sub.add_argument("--zone", dest="zones", action="append", required=True)
        sub.add_argument("--name", dest="names", action="append", required=True, help="NEG name (repeatable)")
        sub.add_argument("--timeout-s", type=_positive, default=900.0, help="give up after this long (900)")
        sub.add_argument("--poll-s", type=_positive, default=10.0, help="pause between rounds (10)")
        sub.add_argument("--api-root", default=API_ROOT, help=f"Compute API root ({API_ROOT})")
    return parser


def _session() -> Any:
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    try:
        with warnings.catch_warnings():  # ADC warns about user credentials without a quota project: not an error
            warnings.simplefilter("ignore")
            credentials, _ = google.auth.default(scopes=list(SCOPES))
    except Exception as err:  # DefaultCredentialsError and malformed credential files alike
        raise NegError(f"no Google Cloud credentials: {_first_line(err)}") from None
    return AuthorizedSession(credentials)


def _bad_name(value: str) -> bool:
    # Path segments and a filter's quoted value: nothing that could leave them.
    return not value or any(c in value for c in '/"?#%\\') or not value.isprintable() or value != value.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    names = list(dict.fromkeys(args.names))
    zones = list(dict.fromkeys(getattr(args, "zones", None) or []))
    region = getattr(args, "region", "")
    options = [("project", args.project), *(("name", n) for n in names), *(("zone", z) for z in zones)]
    for option, value in options + ([("region", region)] if args.command == "remove" else []):
        if _bad_name(value):
            parser.error(f"--{option} {value!r} is not a valid name")
    say = lambda line: print(line, flush=True)  # noqa: E731
    try:
        api = ComputeApi(_session(), args.api_root, args.project)
        if args.command == "remove":
            count = remove(api, region, names, args.timeout_s, args.poll_s, say, args.stale_only)
            say(f"{count} NEG(s) named {', '.join(names)} removed in {region}; none left")
        else:
            wait(api, zones, names, args.timeout_s, args.poll_s, say)
    except NegError as err:
        print(f"error: {PROG} {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"error: {PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
