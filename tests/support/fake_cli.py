"""Stand-ins for command-line tools (pulumi, gcloud, kubectl, ...) that answer from a scenario folder.

A scenario folder (tests/data/e2e/SCENARIO) holds calls.json: for each tool's name, the calls it answers, in order
of preference:

    {"gcloud": [{"args": ["auth", "list", "--format=json"], "stdout": "@auth-list.json", "rc": 0}, ...], ...}

`args` is matched word for word ("*" matches any one word; null matches any words); `stdout` and `stderr` are the
text to print, or "@FILE" for a file of the folder; `rc` the exit status; `hold`: after printing, wait until stopped
(kubectl port-forward). A call nothing matches prints one line and exits 97, so a command that starts asking
something new fails loudly.

For a fake `pulumi` driven through the Automation API (cli/rollout.py, tests/live/cli/test_rollout.py):
- `config`: {KEY: VALUE} the stack config must hold for the call to match, where the stack config is config.json of
  the folder overlaid with every `pulumi config set KEY ... -- VALUE` logged so far (a preview's answer follows the
  config it runs with, as the engine's does);
- `stdout` "=config": that stack config as `pulumi config --json` prints it ({KEY: {"value", "secret"}}), which
  LocalWorkspace.get_all_config parses (pulumi/automation/_local_workspace.py);
- `events`: "@FILE" of engine events, one JSON object a line, sent to the `--event-log` the call was given. Since CLI
  3.206 that is tcp://127.0.0.1:PORT, a gRPC server of the SDK's (Stack._setup_event_log: use_grpc for a CLI newer
  than 3.205.0), to which the CLI streams pulumirpc.Events/StreamEvents requests each holding one event's JSON
  (_EventsServicer.StreamEvents); before, a file the SDK tails (_watch_logs). Both are served here. Stack.preview
  raises "summary event never found" without a summaryEvent, so recordings end with one.

Every call is appended to FAKE_CLI_LOG as one JSON line {"tool": NAME, "args": [...],
"env": {...}}, env holding the variables FAKE_CLI_ENV names (comma-separated) that the call had.

Run as `python -m tests.support.fake_cli NAME ARGS...`; install_fake_cli writes a launcher NAME into a folder.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.checkout import PROJECT_DIR

SCENARIO_ENV = "FAKE_CLI_DIR"
LOG_ENV = "FAKE_CLI_LOG"
LOGGED_ENV = "FAKE_CLI_ENV"
UNMATCHED = 97


def _matches(pattern: list[str] | None, args: list[str]) -> bool:
    if pattern is None:
        return True
    return len(pattern) == len(args) and all(p in ("*", a) for p, a in zip(pattern, args, strict=True))


def _text(folder: Path, value: str) -> str:
    return (folder / value[1:]).read_text() if value.startswith("@") else value


def answer(tool: str, args: list[str], folder: Path) -> dict[str, Any] | None:
    """The scenario's first call of `tool` that matches `args` (and the stack config it asks for), or None."""
    calls = json.loads((folder / "calls.json").read_text()).get(tool, [])
    config = stack_config(folder) if any("config" in call for call in calls) else {}
    return next(
        (
            call
            for call in calls
            if _matches(call.get("args"), args)
            and all(config.get(key) == value for key, value in call.get("config", {}).items())
        ),
        None,
    )


def stack_config(folder: Path) -> dict[str, str]:
    """config.json of the folder, overlaid with every `pulumi config set KEY ... -- VALUE` the log holds."""
    initial = folder / "config.json"
    config = json.loads(initial.read_text()) if initial.exists() else {}
    log = os.environ.get(LOG_ENV)
    for call in logged_calls(Path(log)) if log else []:
        words = call["args"]
        if call["tool"] == "pulumi" and words[:2] == ["config", "set"] and "--" in words:
            config[words[2]] = words[words.index("--") + 1]
    return config


def send_events(target: str, lines: list[str]) -> None:
    """Engine events to the Automation API: over gRPC to tcp://HOST:PORT, else appended to the log file."""
    if target.startswith("tcp://"):
        import grpc  # noqa: PLC0415 (only a fake pulumi needs it)
        from pulumi.runtime.proto import events_pb2, events_pb2_grpc  # noqa: PLC0415

        with grpc.insecure_channel(target.removeprefix("tcp://")) as channel:
            stub = events_pb2_grpc.EventsStub(channel)
            stub.StreamEvents(iter([events_pb2.EventRequest(event=line) for line in lines]))
        return
    with open(target, "a") as out:
        out.writelines(line + "\n" for line in lines)


def main(tool: str, args: list[str]) -> int:
    folder = Path(os.environ[SCENARIO_ENV])
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a") as out:
            names = [name for name in os.environ.get(LOGGED_ENV, "").split(",") if name in os.environ]
            out.write(json.dumps({"tool": tool, "args": args, "env": {n: os.environ[n] for n in names}}) + "\n")
    call = answer(tool, args, folder)
    if call is None:
        print(f"fake {tool}: no recorded answer for: {' '.join(args)}", file=sys.stderr)
        return UNMATCHED
    if call.get("events") and "--event-log" in args:
        lines = _text(folder, call["events"]).splitlines()
        send_events(args[args.index("--event-log") + 1], [line for line in lines if line.strip()])
    stdout = call.get("stdout", "")
    config = {k: {"value": v, "secret": False} for k, v in stack_config(folder).items()}
    sys.stdout.write(json.dumps(config) if stdout == "=config" else _text(folder, stdout))
    sys.stderr.write(_text(folder, call.get("stderr", "")))
    sys.stdout.flush()
    if call.get("hold"):
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while True:
            time.sleep(1)
    return int(call.get("rc", 0))


def install_fake_cli(bin_dir: Path, tool: str) -> Path:
    """A `tool` in bin_dir that runs this module with this interpreter, from this checkout."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    launcher = bin_dir / tool
    launcher.write_text(
        f'#!/bin/sh\nPYTHONPATH="{PROJECT_DIR}${{PYTHONPATH:+:$PYTHONPATH}}" '
        f'exec {sys.executable} -m tests.support.fake_cli {tool} "$@"\n'
    )
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return launcher


def logged_calls(log: Path) -> list[dict[str, Any]]:
    """The calls the fakes logged, in order."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
