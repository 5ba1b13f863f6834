"""The README's and docs' command blocks are parsed, and every command is run by a test or has a reason not to be."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR

README = PROJECT_DIR / "README.md"


DOCS = PROJECT_DIR / "docs"


MODEL_TABLE_PAGE = DOCS / "model-repository.md"


SHELL_FENCES_NOT_PARSED = ("bash", "shell", "console", "shell-session", "zsh")


def documents() -> list[Path]:
    """The README first, then every page of docs/ by name: the order commands run in."""
    return [README, *sorted(DOCS.glob("*.md"))]


_NO_PULUMI = "needs the Pulumi CLI, a backend and a Google Cloud project (none here)"


_NO_CLUSTER = "needs a deployed GKE cluster and Google Cloud credentials (none here)"


NOT_RUN: dict[str, str] = {
    "make model-repo STACK=dev ARGS='--set tritonBuildEngines=true'": (
        "docs/gpus.md: rewrites the shared build/model_repository the other tests plan with; the engine_plan fixture "
        "(tests/conftest.py) builds the repository of those settings into a folder of its own, and "
        "tests/unit/k8s/test_engine_build.py checks its plan configs"
    ),
    'docker run --gpus all --rm -v "$PWD":/w -w /w nvcr.io/nvidia/tensorrt:25.06-py3 bash -c \'pip install -q . && '
    "triton-gke gpu-check'": (
        "docs/gpus.md: needs Docker, an NVIDIA GPU and the TensorRT image (none here); tests/live/model_repo/"
        "test_gpu_check.py runs `triton-gke gpu-check` to each refusal, tests/unit/model_repo/test_gpu_check.py "
        "its build and run steps"
    ),
    "make plan STACK=dev ARGS='--set gpuAcceleratorType=nvidia-l4 --set gpuMachineType=g2-standard-8'": (
        "docs/gpus.md: tests/unit/settings/test_gpu_types.py plans the same settings in-process and checks the pool"
    ),
    ".venv/bin/python -m triton_gke.infra.gpu_choice --region us-central1 --target-rps 20000": (
        "docs/gpus.md: tests/unit/capacity/test_gpu_choice.py runs its main() and checks the arithmetic it prints"
    ),
    ".venv/bin/python -m triton_gke.model_repo.check_digests": (
        "two builds from an empty cache: tests/live/model_repo/test_reproducible.py runs it verbatim, on every core "
        "and pinned to one"
    ),
    "make test": "runs the whole suite, this test included (it would recurse); CI runs it through .ci/run",
    ".venv/bin/python -m tests.support.cpu_hog -- make test": (
        "the whole suite (it would recurse) beside a CPU hog; tests/live/bench/test_conditions.py runs the hog"
    ),
    "gcloud container clusters get-credentials triton-dev-us-central1 --region us-central1 --project YOUR_PROJECT": (
        _NO_CLUSTER
    ),
    "kubectl -n load port-forward svc/locust-master 8089:8089": _NO_CLUSTER,
    "kubectl -n triton port-forward svc/triton 8000:8000 &": _NO_CLUSTER,
    "gcloud container clusters get-credentials triton-prod-europe-west4 --region europe-west4 --project YOUR_PROJECT": (
        _NO_CLUSTER
    ),
    ".venv/bin/triton-gke smoke http://localhost:8000": (
        "needs Triton on localhost:8000: tests/live/sandbox/test_triton.py runs it verbatim inside the network "
        "namespace of a real tritonserver listening on 8000"
    ),
    '.venv/bin/triton-gke smoke "$(pulumi stack output httpEndpoint -s prod)"': _NO_PULUMI,
    'export TRITON_INFERENCE_KEY_HEADER="$(pulumi stack output inferenceKeyHeader -s prod)"': _NO_PULUMI,
    'export TRITON_INFERENCE_KEY_HEADER="$(pulumi stack output inferenceKeyHeader -s dev)"': _NO_PULUMI,
    'export TRITON_INFERENCE_KEY="$(pulumi stack output inferenceKey -s dev --show-secrets)"': _NO_PULUMI,
    'export TRITON_INFERENCE_KEY="$(pulumi stack output inferenceKey -s prod --show-secrets)"': _NO_PULUMI,
    'curl -s -H "$TRITON_INFERENCE_KEY_HEADER: $TRITON_INFERENCE_KEY" -d @request.json '
    "\"$(pulumi stack output httpEndpoint -s prod | sed 's/MODEL/original/')\"": (
        "docs/security.md: needs a deployed stack; tests/live/sandbox/test_inference_key.py sends the same header to "
        "a real tritonserver over HTTP and gRPC"
    ),
    "gcloud auth login": "a browser login to a Google account (none here)",
    "gcloud billing projects link YOUR_PROJECT --billing-account=YOUR_BILLING_ACCOUNT": _NO_PULUMI,
    "gcloud compute regions describe us-central1 --project YOUR_PROJECT": _NO_PULUMI,
    "gcloud components install gke-gcloud-auth-plugin kubectl": (
        "docs/deploy-steps.md, macOS: installs gcloud components; needs the standalone Google Cloud SDK (none here)"
    ),
    "sudo apt-get install google-cloud-cli google-cloud-cli-gke-gcloud-auth-plugin kubectl": (
        "docs/deploy-steps.md: needs Google's apt repository and root (none here)"
    ),
    "curl -fsSL https://get.pulumi.com | sh": "docs/deploy-steps.md: installs the Pulumi CLI from the network",
    "brew install pulumi/tap/pulumi": "docs/deploy-steps.md, macOS: needs Homebrew on macOS (none here)",
    "make setup": (
        "installs the pinned dependencies into the .venv this test runs in; tests/live/cli/test_make_setup.py runs "
        "its recipe with a stand-in python that records each call"
    ),
    "gcloud compute project-info describe --project YOUR_PROJECT": _NO_PULUMI,
    "gcloud services enable compute.googleapis.com --project YOUR_PROJECT": _NO_PULUMI,
    "gcloud storage buckets create gs://YOUR_STATE_BUCKET --project YOUR_PROJECT --location us-central1 "
    "--uniform-bucket-level-access": _NO_PULUMI,
    "pulumi login gs://YOUR_STATE_BUCKET": _NO_PULUMI,
    "pulumi stack output grafanaAdminPassword -s dev --show-secrets": _NO_PULUMI,
    "kubectl -n monitoring port-forward svc/grafana 3000:3000 &": _NO_CLUSTER,
    "gcloud container clusters list --project YOUR_PROJECT": _NO_PULUMI,
    "gcloud compute network-endpoint-groups list --project YOUR_PROJECT": _NO_PULUMI,
    "gcloud auth application-default login": "a browser login to a Google account (none here)",
    "pulumi login": _NO_PULUMI,
    "pulumi stack init dev": _NO_PULUMI,
    "pulumi preview -s dev": _NO_PULUMI,
    "pulumi package add ../triton-gke/triton_gke/plugin": (
        "needs the Pulumi CLI and a consuming program; "
        "tests/live/triton_gke/test_provider.py calls the same provider over gRPC"
    ),
    "SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) .venv/bin/python -m pip wheel . --no-deps -w dist": (
        "writes dist/ into the checkout; tests/live/triton_gke/test_package.py builds the same wheel (pip wheel . "
        "--no-deps, SOURCE_DATE_EPOCH the commit's) from a copy of the tree without tags, and from its git archive, "
        "byte for byte, and installs it in fresh virtualenvs"
    ),
    'pip install "triton-gke[models] @ file://$PWD/dist/triton_gke-0.3.0-py3-none-any.whl"': (
        "installs into the reader's own program virtualenv; tests/live/triton_gke/test_release_clone.py runs it "
        "verbatim in a fresh virtualenv, in a clone without tags, after building the wheel"
    ),
    ".venv/bin/python -m triton_gke.reference": (
        "rewrites the committed docs/reference/; tests/unit/docs/test_reference.py generates the pages in memory and "
        "fails when they differ from the committed ones"
    ),
    ".venv/bin/triton-gke provider --write-schema": (
        "rewrites the committed triton_gke/schema.json; the --schema line beside it is run, and "
        "tests/unit/triton_gke/test_provider.py fails when the two differ"
    ),
    "pulumi config set gcp:project YOUR_PROJECT": _NO_PULUMI,
    "pulumi up -s dev": _NO_PULUMI,
    "pulumi destroy -s dev": _NO_PULUMI,
    "make e2e STACK=dev": (
        "docs/deploy-steps.md: creates and deletes a real stack (a Google Cloud project, the Pulumi CLI and a "
        "backend; none here); tests/live/cli/test_e2e.py runs the command's steps against recorded pulumi, gcloud "
        "and kubectl output, and its refusal without them"
    ),
    "pulumi config set --path 'regions[3]' us-east4 -s prod": _NO_PULUMI,
    "pulumi up -s prod": _NO_PULUMI,
    ".venv/bin/triton-gke bench --variants original --uint8 --repeats 1 --no-perf-analyzer --saturation-users '' "
    "--precision 0.1 --stop-after 1": (
        "measures for about 2.5 minutes on 2 cores (docs/measure-and-tune.md gives its timed runs); "
        "tests/live/bench/test_bench_run.py runs the same bench, one variant with --uint8 --repeats 1 "
        "--no-perf-analyzer, end to end with shorter steps"
    ),
    "make bench ARGS='--out build/bench-new'": (
        "measures every variant for about 30 minutes on 2 cores; tests/unit/capacity/test_records.py runs a short "
        "benchmark that writes records"
    ),
    "make sandbox ARGS='--scenario rollout'": (
        "runs about 4 minutes with dev's lifecycle values (docs/results/rollout-dev.json is its committed run); "
        "tests/live/sandbox/test_rollout.py runs the same proof with shorter waits, and the command until Ctrl-C"
    ),
    "make capacity-compare ARGS='capacity/records build/bench-new/records'": (
        "needs the records of the benchmark above; tests/unit/capacity/test_records.py runs make capacity-compare"
    ),
    "make tune": (
        "measures for 20 minutes on 2 cores; tests/live/bench/test_tune.py runs `triton-gke bench tune` with two "
        "configurations and a 1-minute budget"
    ),
    "make tune ARGS='--write-stack'": (
        "measures for 20 minutes and rewrites the committed Pulumi.dev.yaml; tests/unit/bench/test_tune.py edits a "
        "copy of it and loads it through the stack checks"
    ),
    ".venv/bin/triton-gke bench tune --search screen --budget-minutes 3": (
        "measures for 3 minutes on 2 cores; tests/live/bench/test_tune.py runs `bench tune --search screen` on two "
        "configurations (HTTP, and gRPC on the UINT8 copy) and checks each prediction against the queue model"
    ),
    "cp Pulumi.dev.yaml Pulumi.twin.yaml && echo '  triton-gke:sloLatencyMs: 200' >> Pulumi.twin.yaml": (
        "docs/tuning.md: adds a stack file to the project folder, which every test that plans the stacks would then "
        "plan too; tests/live/bench/test_tune.py derives a stack from dev's file the same way in a folder of its own"
    ),
    ".venv/bin/triton-gke bench model-analyzer --stack twin": (
        "installs Model Analyzer and searches for 8 minutes on the stack file the line above adds "
        "(results/bench/model-analyzer-twin-2026-12-03 is its committed run); tests/unit/bench/test_model_analyzer.py "
        "reads a real run's files"
    ),
    ".venv/bin/triton-gke bench tune --stack twin --search screen --budget-minutes 3 "
    "--out results/bench/tune-twin-2026-12-03-screen": (
        "measures for 3.4 minutes (results/bench/tune-twin-2026-12-03-screen); tests/live/bench/test_tune.py runs a "
        "screen on a stack derived from dev's"
    ),
    ".venv/bin/triton-gke bench compare-tuners --stack twin --tune results/bench/tune-twin-2026-12-03-screen "
    "--model-analyzer results/bench/model-analyzer-twin-2026-12-03 --rounds 3 --start-rps 4": (
        "measures three configurations with two tools for 26 minutes (results/bench/tuners-twin-2026-12-03 is its "
        "committed run); tests/unit/bench/test_compare_tuners.py checks what it reads and the significance it states"
    ),
    ".venv/bin/triton-gke bench model-analyzer": (
        "installs Model Analyzer (a 600 MB virtualenv) and searches for 6-14 minutes on 2 cores; "
        "tests/unit/bench/test_model_analyzer.py reads a real run's files and refuses bad input before installing"
    ),
    ".venv/bin/triton-gke bench compare-tuners --tune results/bench/tune-dev-2026-12-02c "
    "--model-analyzer results/bench/model-analyzer-dev-2026-12-02 --rounds 3 --start-rps 4": (
        "measures three configurations with two tools for about an hour (results/bench/tuners-dev-2026-12-02d is "
        "its committed run); tests/unit/bench/test_compare_tuners.py checks what it reads, its order and its figures"
    ),
    ".venv/bin/triton-gke bench tune --url 127.0.0.1:8000 --budget-minutes 10": (
        "needs a Triton of yours on that address and measures for 10 minutes; tests/live/bench/test_tune_remote.py "
        "runs it against a real tritonserver started with --model-control-mode=explicit, and its refusal against one "
        "in the default mode"
    ),
    ".venv/bin/triton-gke bench loop-check --rates 3,6,10,15,20": (
        "starts a tritonserver and runs perf_analyzer and Locust for about 7 minutes (results/bench/loop-check-dev-* "
        "are its committed runs); tests/unit/bench/test_loop_check.py checks its options and the CPU shares it "
        "reports, tests/live/bench/test_loop_check.py a Locust level against a real tritonserver"
    ),
    ".venv/bin/triton-gke bench record build/bench-new --record": (
        "rewrites the committed capacity/records/ from the benchmark above; tests/unit/capacity/test_records.py "
        "runs it into a temporary folder"
    ),
}


@dataclass(frozen=True)
class Example:
    command: str  # the line as the README shows it, comment included: what a user pastes
    line: int
    promised: tuple[str, ...] = ()  # output lines a ```text block shows after the command
    source: str = "README.md"  # the document that shows it, relative to the project

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    @property
    def key(self) -> str:
        return without_comment(self.command)


@dataclass
class Result:
    returncode: int
    output: str  # stdout and stderr interleaved, as a terminal shows them
    stdout: str = field(default="")
    folder: Path = PROJECT_DIR  # the project folder it ran in: where the files it wrote are


def without_comment(command: str) -> str:
    """The command without a trailing shell comment (a '#' after whitespace, outside quotes)."""
    quote = ""
    for i, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command.rstrip()


def readme_examples(text: str, source: str = "README.md") -> list[Example]:
    examples: list[Example] = []
    for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S):
        first_line = text.count("\n", 0, block.start(2)) + 1
        lines = block.group(2).splitlines()
        if block.group(1) == "sh":
            examples += _sh_commands(lines, first_line)
        elif block.group(1) == "text":
            examples += _transcript(lines, first_line)
    return [dataclasses.replace(e, source=source) for e in examples]


def unparsed_shell_blocks(text: str) -> list[int]:
    """Lines of fenced blocks in a shell language this test does not read (```bash, ...): use ```sh."""
    return [
        text.count("\n", 0, block.start()) + 1
        for block in re.finditer(r"^```(\w[\w-]*)\n", text, flags=re.M)
        if block.group(1) in SHELL_FENCES_NOT_PARSED
    ]


def documented_examples() -> list[Example]:
    examples: list[Example] = []
    for path in documents():
        examples += readme_examples(path.read_text(encoding="utf-8"), str(path.relative_to(PROJECT_DIR)))
    return examples


def _sh_commands(lines: list[str], first_line: int) -> list[Example]:
    commands: list[Example] = []
    pending, start = "", 0
    for offset, line in enumerate(lines):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        start = start if pending else first_line + offset
        if line.endswith("\\"):  # a continued line: one command
            pending += line[:-1] + " "
            continue
        commands.append(Example(pending + line, start))
        pending = ""
    return commands


def _transcript(lines: list[str], first_line: int) -> list[Example]:
    examples: list[Example] = []
    for offset, line in enumerate(lines):
        if line.startswith("$ "):
            examples.append(Example(line[2:], first_line + offset))
        elif examples:
            last = examples[-1]
            examples[-1] = Example(last.command, last.line, (*last.promised, line))
    return examples


# --- what each runnable command promises ---------------------------------------------------------------------
def _resource_counts(output: str) -> Counter[str]:
    """The plan's 'Resources by type:' section."""
    section = output.split("Resources by type:", 1)[1]
    return Counter({m[2]: int(m[1]) for m in re.finditer(r"^\s+(\d+)\s+(\S+:\S+)$", section, flags=re.M)})


def _readme_model_table() -> dict[str, tuple[int, int, int, int]]:
    """The model table of docs/model-repository.md: name -> (max batch, preferred batch, queue delay us, instances)."""
    text = MODEL_TABLE_PAGE.read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\w+) \| [^|]+ \| (\d+) \| (\d+) \| (\d+) us \| (\d+) GPU \|$", text, re.M)
    return {name: (int(a), int(b), int(c), int(d)) for name, a, b, c, d in rows}


def check_model_repo(result: Result) -> None:
    assert result.returncode == 0, result.output
    table = _readme_model_table()
    assert len(table) == 5, "the model table of docs/model-repository.md"
    for name, (max_batch, preferred, delay, instances) in table.items():
        assert re.search(
            rf"^\s+{name}\s+\w+\s+max batch\s+{max_batch}, preferred\s+{preferred}, queue delay {delay} us, "
            rf"{instances} instance",
            result.output,
            flags=re.M,
        ), f"{name} as the README's table describes it"
        assert (PROJECT_DIR / "build" / "model_repository" / name / "config.pbtxt").is_file()
        assert (PROJECT_DIR / "build" / "model_repository_cpu" / name / "config.pbtxt").is_file()


def check_prod_plan(result: Result) -> None:
    """'three regions and the global load balancer'."""
    assert result.returncode == 0, result.output
    assert "Offline plan of stack 'prod'" in result.output
    counts = _resource_counts(result.output)
    assert counts["gcp:container/cluster:Cluster"] == 3
    for region in ("us-central1", "europe-west4", "asia-east1"):
        assert f'location="{region}"' in result.output
    assert counts["gcp:compute/uRLMap:URLMap"] == 1
    assert counts["gcp:compute/globalForwardingRule:GlobalForwardingRule"] >= 1
    # docs/deploying.md, "What it costs": each region's on-demand $/hour at its minimum size.
    for region, usd in (("us-central1", "1.560"), ("europe-west4", "1.671"), ("asia-east1", "1.680")):
        assert re.search(rf"^  {region}\s+-\s+2/6\s+\S+\s+{re.escape(usd)}\s", result.output, flags=re.M), region


def check_dev_plan(result: Result) -> None:
    """docs/deploying.md, "What it costs": dev's region at 0.774 $/h on-demand, 0.422 with Spot."""
    assert result.returncode == 0, result.output
    assert "Offline plan of stack 'dev'" in result.output
    assert re.search(r"^  us-central1\s+-\s+1/1\s+\S+\s+0\.774\s+\S+\s+0\.422\s", result.output, flags=re.M)


def check_import_contracts(result: Result) -> None:
    """docs/architecture.md: the rooms' import rules hold."""
    assert result.returncode == 0, result.output
    assert re.search(r"^Contracts: \d+ kept, 0 broken\.$", result.output, flags=re.M), result.output


def check_offline_example_plan(result: Result) -> None:
    """docs/library.md: the level-(c) example planned offline, as JSON on stdout."""
    assert result.returncode == 0, result.output
    resources = json.loads(result.stdout)["resources"]
    types = {r["type"] for r in resources}
    assert {"triton-gke:index:TritonOnCluster", "triton-gke:k8s:TritonServing"} <= types, types
    assert "kubernetes:apps/v1:Deployment" in types, types


def check_provider_schema(result: Result) -> None:
    """docs/library.md: the schema the provider infers is the committed triton_gke/schema.json."""
    assert result.returncode == 0, result.output
    committed = json.loads((PROJECT_DIR / "triton_gke" / "schema.json").read_text(encoding="utf-8"))
    assert json.loads(result.stdout) == committed


def check_prod_plan_json(result: Result) -> None:
    """A JSON array on stdout, one record per resource, nothing else on stdout."""
    assert result.returncode == 0, result.output
    records = json.loads(result.stdout)
    assert isinstance(records, list) and records
    for record in records:
        assert {"type", "name", "parent", "provider", "inputs"} <= set(record)
    assert sum(r["type"] == "gcp:container/cluster:Cluster" for r in records) == 3


def check_dev_plan_in_europe(result: Result) -> None:
    """The dev stack moved to europe-west4 by --set alone: its one cluster there, none left in us-central1."""
    assert result.returncode == 0, result.output
    assert _resource_counts(result.output)["gcp:container/cluster:Cluster"] == 1
    assert 'location="europe-west4"' in result.output
    assert 'location="us-central1"' not in result.output
    assert "europe-west4-b" in result.output
    assert (result.folder / "Pulumi.dev.yaml").read_text().count("us-central1") >= 1, "the stack file is untouched"


def check_sandbox(result: Result) -> None:
    """README and docs/sandbox.md: 'the load Locust offered and measured, batching and queue vs compute per
    request, the SLO alerts firing or pending, and where every file of the run is', in the lines they show."""
    assert result.returncode == 0, result.output
    report = result.output[result.output.index("sandbox report: stack dev") :]
    labels = re.findall(r"^  (\w+) {2,}", report, flags=re.M)
    assert labels == ["Locust", "Triton", "Alerts", "Scraped", "Note", "Data"], labels
    assert re.search(r"Locust\s+[\d.]+ req/s, p50 [\d.]+ ms, p95 [\d.]+ ms, \d+ failures of \d+ requests", report)
    assert re.search(r"batch size [\d.]+ per execution; per request queue [\d.]+ ms, compute [\d.]+ ms", report)
    assert re.search(r"Alerts\s+firing: .*; pending: ", report)
    assert re.search(r"Data\s+build/sandbox/: ", report)


def check_staging_sized_from_a_target(result: Result) -> None:
    """'both regions sized for 500 req/s each; a capacity table at the end'."""
    assert result.returncode == 0, result.output
    table = result.output[result.output.index("\nCapacity of original at the SLO") :]
    assert "Sized for targetRps 500 req/s per region with 25 % headroom: GPU minimum 3 nodes" in table
    for region in ("us-central1", "europe-west4"):
        assert re.search(rf"^  {region}\s+500\s+3/3\s+759\.0-759\.0\s", table, flags=re.M), table
    assert result.output.count("totalMinNodeCount=3") == 2, "each region's GPU pool starts at the 3 nodes"


def check_applied_plan_saved(result: Result) -> None:
    """'the plan you deployed': a JSON array of dev's resources in build/applied-dev.json."""
    assert result.returncode == 0, result.output
    records = json.loads((result.folder / "build" / "applied-dev.json").read_text(encoding="utf-8"))
    assert sum(r["type"] == "gcp:container/cluster:Cluster" for r in records) == 1


def check_against_applied_plan(result: Result) -> None:
    """Leaving Spot replaces the GPU pool (nodeConfig.spot is ForceNew), allowed here by name; nothing else changes."""
    assert result.returncode == 0, result.output
    assert re.search(
        r"^replace\s+gcp:container/nodePool:NodePool::gke-us-central1-gpu: nodeConfig\.spot \(forces replacement",
        result.output,
        flags=re.M,
    ), result.output
    assert "0 to create, 0 to update, 1 to replace, 0 to delete" in result.output


def check_console_script_help(result: Result) -> None:
    """'every subcommand, one line each, and the exit statuses'."""
    from triton_gke.cli.main import COMMANDS

    assert result.returncode == 0, result.output
    for name in COMMANDS:
        assert re.search(rf"^  {re.escape(name)}  +\S", result.output, flags=re.M), name
    assert "exit status" in result.output and "Error N" in result.output


def check_console_script_version(result: Result) -> None:
    """'the installed version (pyproject.toml's)': the installed distribution's, which is pyproject.toml's."""
    import importlib.metadata

    assert result.returncode == 0, result.output
    assert result.output.strip() == f"triton-gke {importlib.metadata.version('triton-gke')}", result.output


RUN: dict[str, Callable[[Result], None]] = {
    ".venv/bin/triton-gke --help": check_console_script_help,
    ".venv/bin/triton-gke --version": check_console_script_version,
    "make plan STACK=dev": check_dev_plan,
    ".venv/bin/lint-imports --no-cache --no-logo": check_import_contracts,
    ".venv/bin/triton-gke plan-folder examples/on-cluster-python --json": check_offline_example_plan,
    ".venv/bin/triton-gke provider --schema": check_provider_schema,
    "make sandbox": check_sandbox,
    "make model-repo STACK=dev": check_model_repo,
    "make plan STACK=prod": check_prod_plan,
    "make plan STACK=prod ARGS=--json": check_prod_plan_json,
    'make plan STACK=dev ARGS=\'--set regions=["europe-west4"] --set zones=["europe-west4-b"]\'': (
        check_dev_plan_in_europe
    ),
    "make plan STACK=staging ARGS='--set targetRps=500'": check_staging_sized_from_a_target,
    "make plan STACK=dev ARGS=--json > build/applied-dev.json": check_applied_plan_saved,
    "make plan STACK=dev ARGS='--against build/applied-dev.json --set gpuSpot=false --allow-disruption "
    "gke-us-central1-gpu'": check_against_applied_plan,
    # ```text transcripts: checked against the lines the README shows after them.
    "make plan ARGS='--set regions=[\"europe-north1\"]'": lambda result: None,
    "make plan STACK=staging ARGS='--set targetRps=1000'": lambda result: None,
}


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    return documented_examples()


def test_every_readme_command_is_run_or_has_a_reason(examples: list[Example]) -> None:
    shown = {e.key for e in examples}
    unchecked = sorted(f"{e.where}: {e.command}" for e in examples if e.key not in RUN | NOT_RUN)
    assert not unchecked, "commands neither run by this test nor listed in NOT_RUN with a reason"
    stale = sorted((RUN.keys() | NOT_RUN.keys()) - shown)
    assert not stale, "commands this test expects that no document shows any more"
    assert not RUN.keys() & NOT_RUN.keys()


def test_no_shell_block_escapes_the_parser() -> None:
    """A ```bash (or ```console, ...) block would never be run nor listed: every shell block is ```sh or ```text."""
    found = [
        f"{path.relative_to(PROJECT_DIR)}:{line}"
        for path in documents()
        for line in unparsed_shell_blocks(path.read_text(encoding="utf-8"))
    ]
    assert not found, "shell blocks this test does not read; fence them as ```sh (commands) or ```text ($ lines)"


def test_documents_show_no_bare_python_module_run() -> None:
    """Issue 21: no document shows a bare `python -m` (pasted outside the venv it fails); `.venv/bin/python -m`."""
    bare = [
        f"{example.where}: {example.command}"
        for example in documented_examples()
        if re.search(r"(^|[\s;&|(])python3? -m ", example.command)
    ]
    assert not bare


@given(st.text(st.sampled_from(list("ab '\"#\\ ")), max_size=20))
@settings(max_examples=60, deadline=None)
def test_without_comment_keeps_quoted_hashes(text: str) -> None:
    """A '#' inside quotes or glued to a word is part of the command, as bash reads it."""
    kept = without_comment(text)
    assert text.startswith(kept)
    dropped = text[len(kept) :].lstrip()
    assert not dropped or dropped.startswith("#")
    if "#" not in text:
        assert kept == text.rstrip()


def test_transcripts_and_sh_blocks_are_parsed() -> None:
    text = "x\n```sh\nmake a   # one\n\n# only a comment\nmake b \\\n  --c\n```\n```text\n$ make d\nout 1\nout 2\n```\n"
    assert readme_examples(text) == [
        Example("make a   # one", 3),
        Example("make b    --c", 6),
        Example("make d", 10, ("out 1", "out 2")),
    ]
