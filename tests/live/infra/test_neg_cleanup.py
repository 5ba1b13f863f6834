"""infra/neg_cleanup.py run as `pulumi up` runs it (its module, triton_gke.infra.neg_cleanup) against a small
local fake of the Compute API: aggregated list, delete returning a zonal operation, operation wait, NEG GET,
404s and "in use" answers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.unit.infra.test_negs import PROJECT
from triton_gke.infra.negs import neg_url

TOKEN = "fake-access-token"


# ---- a fake Compute API ------------------------------------------------------------------------------------------
@dataclass
class FakeCompute:
    """NEGs by (zone, name), and how the API answers about them."""

    negs: set[tuple[str, str]] = field(default_factory=set)
    # (zone, name) -> how many more delete calls answer 400 resourceInUseByAnotherResource (-1: forever)
    in_use: dict[tuple[str, str], int] = field(default_factory=dict)
    # (zone, name) whose delete operation finishes with RESOURCE_IN_USE_BY_ANOTHER_RESOURCE once
    operation_in_use: set[tuple[str, str]] = field(default_factory=set)
    # (zone, name) listed but gone by the time it is deleted (the NEG controller was faster): DELETE answers 404
    vanishing: set[tuple[str, str]] = field(default_factory=set)
    # (zone, name) -> GETs answered 404 before the NEG exists (GKE creating it)
    appears_after: dict[tuple[str, str], int] = field(default_factory=dict)
    # (zone, name) -> its network endpoints, as the listing's `size` says (absent: 0)
    sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    operations: dict[str, dict] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def deletes(self, zone: str, name: str) -> int:
        return self.calls.count(("DELETE", f"zones/{zone}/networkEndpointGroups/{name}"))


def _handler(fake: FakeCompute) -> type[BaseHTTPRequestHandler]:
    prefix = f"/compute/v1/projects/{PROJECT}/"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, reason: str, message: str) -> None:
            self._send(status, {"error": {"code": status, "message": message, "errors": [{"reason": reason}]}})

        def _route(self, method: str) -> None:
            url = urlsplit(self.path)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._error(401, "required", "Request is missing required authentication credential.")
            if not url.path.startswith(prefix):
                return self._error(404, "notFound", f"no such path {url.path}")
            path = url.path[len(prefix) :]
            with fake.lock:
                fake.calls.append((method, path))
                return self._answer(method, path, parse_qs(url.query))

        def _answer(self, method: str, path: str, query: dict[str, list[str]]) -> None:
            if method == "GET" and path == "aggregated/networkEndpointGroups":
                return self._aggregated(query)
            if m := re.fullmatch(r"zones/([^/]+)/networkEndpointGroups/([^/]+)", path):
                key = (m.group(1), m.group(2))
                return self._delete(key) if method == "DELETE" else self._get(key)
            if m := re.fullmatch(r"zones/([^/]+)/operations/([^/]+)(/wait)?", path):
                operation = fake.operations.get(m.group(2))
                if operation is None:
                    return self._error(404, "notFound", "operation not found")
                operation["status"] = "DONE"  # wait returns once done; a GET after that sees it done as well
                return self._send(200, operation)
            return self._error(404, "notFound", f"no such path {path}")

        def _aggregated(self, query: dict[str, list[str]]) -> None:
            match = re.fullmatch(r'name = "([^"]+)"', query.get("filter", [""])[0])
            assert match, query
            found = sorted(k for k in fake.negs if k[1] == match.group(1))
            # One NEG per page, so every caller has to follow nextPageToken.
            page = int(query.get("pageToken", ["0"])[0])
            items: dict[str, dict] = {"zones/us-west1-a": {"warning": {"code": "NO_RESULTS_ON_PAGE"}}}
            for zone, name in found[page : page + 1]:
                link = neg_url(PROJECT, zone, name)
                zone_link = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}"
                neg = {"name": name, "zone": zone_link, "selfLink": link, "size": fake.sizes.get((zone, name), 0)}
                items[f"zones/{zone}"] = {"networkEndpointGroups": [neg]}
            body: dict = {"kind": "compute#networkEndpointGroupAggregatedList", "items": items}
            if page + 1 < len(found):
                body["nextPageToken"] = str(page + 1)
            self._send(200, body)

        def _get(self, key: tuple[str, str]) -> None:
            if fake.appears_after.get(key, 0) > 0:
                fake.appears_after[key] -= 1
                if fake.appears_after[key] == 0:
                    fake.negs.add(key)
            if key in fake.negs:
                return self._send(200, {"name": key[1], "selfLink": neg_url(PROJECT, *key)})
            self._error(404, "notFound", f"The resource 'projects/{PROJECT}/zones/{key[0]}/...' was not found")

        def _delete(self, key: tuple[str, str]) -> None:
            if key in fake.vanishing:
                fake.vanishing.discard(key)
                fake.negs.discard(key)
            if key not in fake.negs:
                return self._error(404, "notFound", "The resource was not found")
            if fake.in_use.get(key, 0) != 0:
                fake.in_use[key] -= 1
                return self._error(
                    400,
                    "resourceInUseByAnotherResource",
                    f"The network_endpoint_group resource '{key[1]}' is already being used by 'backendServices/x'",
                )
            name = f"operation-{len(fake.operations)}"
            operation: dict = {"name": name, "status": "RUNNING", "zone": key[0], "operationType": "delete"}
            if key in fake.operation_in_use:
                fake.operation_in_use.discard(key)
                operation["error"] = {"errors": [{"code": "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", "message": "in use"}]}
            else:
                fake.negs.discard(key)
            fake.operations[name] = operation
            self._send(200, operation)

        def do_GET(self) -> None:  # noqa: N802 (http.server's spelling)
            self._route("GET")

        def do_DELETE(self) -> None:  # noqa: N802
            self._route("DELETE")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

    return Handler


@pytest.fixture
def compute(tmp_path: Path):
    """(fake, run): run(*args) runs `python -m triton_gke.infra.neg_cleanup ARGS` against the fake with an ADC file."""
    fake = FakeCompute()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # Application Default Credentials: an authorized-user file whose access token is valid for years, so google-auth
    # uses it as it is and never calls a token endpoint (google.oauth2.credentials, from_authorized_user_info).
    adc = tmp_path / "adc.json"
    adc.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "fake.apps.googleusercontent.com",
                "client_secret": "fake",
                "refresh_token": "fake",
                "token": TOKEN,
                "expiry": "2999-01-01T00:00:00Z",
            }
        )
    )
    api_root = f"http://127.0.0.1:{server.server_address[1]}/compute/v1"

    def run(*args: str, credentials: Path | None = adc, api: bool = True) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_"))}
        env["GOOGLE_APPLICATION_CREDENTIALS"] = str(credentials)
        env["CLOUDSDK_CONFIG"] = str(tmp_path / "no-gcloud")  # never the machine's gcloud configuration
        extra = ["--api-root", api_root, "--poll-s", "0.05"] if api else []
        return subprocess.run(
            [sys.executable, "-m", "triton_gke.infra.neg_cleanup", *args, *extra],
            cwd=PROJECT_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    yield fake, run
    server.shutdown()
    server.server_close()


def remove_args(*names: str, region: str = "us-central1", timeout: str = "30") -> list[str]:
    return ["remove", "--project", PROJECT, "--region", region, *[a for n in names for a in ("--name", n)],
            "--timeout-s", timeout]  # fmt: skip


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: python -m triton_gke.infra.neg_cleanup"), line
    return line


# ---- infra/neg_cleanup.py ----------------------------------------------------------------------------------------
def test_remove_deletes_stale_negs_in_every_zone_of_the_region_and_nothing_else(compute):
    fake, run = compute
    ours = {("us-central1-a", "n-http"), ("us-central1-b", "n-http"), ("us-central1-f", "n-grpc")}
    others = {("us-central1-a", "other-http"), ("europe-west4-a", "n-http"), ("us-central1-a", "n-http-2")}
    fake.negs |= ours | others
    result = run(*remove_args("n-http", "n-grpc"))
    assert result.returncode == 0, result.stderr
    assert fake.negs == others, "only the region's NEGs of those names go; a zone outside the stack's list too"
    assert sorted(re.findall(r"removed NEG (\S+)", result.stdout)) == sorted(f"{z}/{n}" for z, n in ours)
    assert "3 NEG(s) named n-http, n-grpc removed in us-central1; none left" in result.stdout
    assert all(m != "DELETE" or "europe" not in p for m, p in fake.calls)
    assert any(m == "POST" and p.endswith("/wait") for m, p in fake.calls), "each delete's operation is waited for"


def test_on_create_only_stale_negs_go_a_running_stacks_are_kept_without_waiting(compute):
    """Found by reading the change against a stack deployed before ZonalNegs (make plan --against that plan: the
    cleanup Command is created on a running stack): its NEGs have endpoints and the load balancer uses them, so the
    create-time removal waited 15 minutes on them and failed the `up`, or deleted a live one. --stale-only keeps a
    NEG with endpoints or in use, at once; an empty, unused one (a destroyed cluster's) still goes."""
    fake, run = compute
    live, used, stale = ("us-central1-a", "n-http"), ("us-central1-b", "n-http"), ("us-central1-c", "n-http")
    fake.negs |= {live, used, stale}
    fake.sizes[live] = 2
    fake.in_use[used] = -1  # a backend service that stays
    result = run(*remove_args("n-http"), "--stale-only")
    assert result.returncode == 0, result.stderr
    assert fake.negs == {live, used} and fake.deletes(*live) == 0 and fake.deletes(*used) == 1
    assert "kept NEG us-central1-a/n-http: 2 endpoint(s)" in result.stdout
    assert "kept NEG us-central1-b/n-http: a backend service uses it" in result.stdout
    # Without --stale-only (destroy) the one with endpoints goes, the used one is waited for up to the bound.
    fake.sizes.clear()
    gone = run(*remove_args("n-http", timeout="2"))
    assert gone.returncode == 1 and fake.negs == {used}


def test_nothing_to_remove_is_success(compute):
    fake, run = compute
    result = run(*remove_args("n-http"))
    assert result.returncode == 0, result.stderr
    assert "0 NEG(s)" in result.stdout
    assert [m for m, _ in fake.calls] == ["GET"]


def test_a_neg_gone_before_its_delete_counts_as_gone(compute):
    fake, run = compute
    fake.negs |= {("us-central1-a", "n-http"), ("us-central1-b", "n-http")}
    fake.vanishing.add(("us-central1-a", "n-http"))
    result = run(*remove_args("n-http"))
    assert result.returncode == 0, result.stderr
    assert fake.negs == set()
    assert fake.deletes("us-central1-a", "n-http") == 1


@pytest.mark.parametrize("where", ["request", "operation"])
def test_remove_retries_while_a_backend_service_still_uses_the_neg(compute, where):
    fake, run = compute
    key = ("us-central1-c", "n-grpc")
    fake.negs.add(key)
    if where == "request":
        fake.in_use[key] = 3
    else:
        fake.operation_in_use.add(key)
    result = run(*remove_args("n-grpc"))
    assert result.returncode == 0, result.stderr
    assert fake.negs == set()
    assert fake.deletes(*key) == (4 if where == "request" else 2)


def test_remove_gives_up_after_its_bound_in_one_line(compute):
    fake, run = compute
    key = ("us-central1-a", "n-http")
    fake.negs.add(key)
    fake.in_use[key] = -1  # a backend service that is never removed
    result = run(*remove_args("n-http", timeout="1"))
    assert result.returncode == 1
    line = one_error_line(result)
    assert "still present after 1 s" in line and "us-central1-a/n-http" in line
    assert key in fake.negs and fake.deletes(*key) >= 2


def test_wait_returns_once_the_negs_exist_in_every_zone(compute):
    fake, run = compute
    zones = ("us-central1-a", "us-central1-b")
    fake.negs.add(("us-central1-a", "n-http"))
    fake.appears_after[("us-central1-b", "n-http")] = 3
    args = ["wait", "--project", PROJECT, *[a for z in zones for a in ("--zone", z)], "--name", "n-http"]
    result = run(*args, "--timeout-s", "30")
    assert result.returncode == 0, result.stderr
    assert "NEGs n-http exist in us-central1-a, us-central1-b" in result.stdout
    assert Counter(p for _, p in fake.calls)["zones/us-central1-b/networkEndpointGroups/n-http"] == 3
    assert Counter(p for _, p in fake.calls)["zones/us-central1-a/networkEndpointGroups/n-http"] == 1


def test_wait_fails_in_one_line_naming_what_is_missing(compute):
    fake, run = compute
    fake.negs.add(("us-central1-a", "n-http"))
    args = ["wait", "--project", PROJECT, "--zone", "us-central1-a", "--zone", "us-central1-f", "--name", "n-http"]
    result = run(*args, "--timeout-s", "0.5")
    assert result.returncode == 1
    line = one_error_line(result)
    assert "missing after 0.5 s: us-central1-f/n-http" in line and "us-central1-a/n-http" not in line


def test_an_api_error_is_one_line(compute):
    fake, run = compute
    result = run(*remove_args("n-http"), "--api-root", "http://127.0.0.1:9/compute/v1", api=False)
    assert result.returncode == 1
    assert "GET http://127.0.0.1:9/compute/v1/projects/demo-project/aggregated" in one_error_line(result)


def test_without_credentials_one_line(compute, tmp_path):
    fake, run = compute
    result = run(*remove_args("n-http"), credentials=tmp_path / "absent.json")
    assert result.returncode == 1
    assert "no Google Cloud credentials" in one_error_line(result)
    assert fake.calls == []


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["purge", "--project", PROJECT],
        ["remove", "--region", "us-central1", "--name", "n"],
        ["remove", "--project", PROJECT, "--name", "n"],
        ["wait", "--project", PROJECT, "--name", "n"],
        remove_args("n", timeout="-1"),
        remove_args("n", timeout="nan"),
        remove_args("n", timeout="soon"),
        remove_args("a/b"),
        remove_args("n", region='us"central1'),
        ["remove", "--project", "p\nq", "--region", "us-central1", "--name", "n"],
        [*remove_args("n"), "--nmae", "x"],
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(compute, args):
    fake, run = compute
    result = run(*args, api=False)
    assert result.returncode == 2, result
    one_error_line(result)
    assert fake.calls == []
