"""Red team 44, finding 2: `sandbox --out DIR` removed `locust*`, report.json, prometheus.yml, rules.yml, file_sd,
tritonserver.log and prometheus-data from whatever folder it was given, through a link to a folder too, and a link
named locust-link ended the run in a traceback after locust-notes/ and locustfile.py were gone.

Now the run lists what it writes in OUT/.sandbox-files (sandbox/out_folder.py) and removes a name only when that list
holds it; a folder without the list must be empty; a link as --out, or as anything the run would remove, is refused;
a refusal is one line and leaves the folder as it was. The folder contents are generated: the sandbox's own names,
names the old patterns matched (locust-notes, locustfile.py) and others, as files, folders and links.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from triton_gke.sandbox import components, out_folder
from triton_gke.sandbox import run as sandbox_run
from triton_gke.sandbox.components import LoadSettings, LocustLoad, ScrapeTargets
from triton_gke.sandbox.leftovers import default_state_dir
from triton_gke.sandbox.out_folder import OUTPUTS, WRITTEN_LIST, check_out_folder, prepare_out_folder
from triton_gke.sandbox.single_run import default_lock_file
from triton_gke.settings import ConfigError, from_stack_file

OWN_NAMES = sorted({name for names in OUTPUTS.values() for name in names})
# Names `locust*` and the other old patterns matched, and names nobody reserves.
OTHER_NAMES = st.one_of(
    st.sampled_from(["locust-conf", "locust-notes", "locustfile.py", "locust-link", "locust", "file_sd.old", "notes"]),
    st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9._-]{0,8}", fullmatch=True),
).filter(lambda name: not name.startswith(WRITTEN_LIST))
KINDS = ("file", "folder", "link-to-folder", "link-to-file", "dangling-link")
LINKS = {"link-to-folder", "link-to-file", "dangling-link"}
Tree = dict[str, tuple[Any, ...]]


def make_entry(path: Path, kind: str, outside: Path) -> None:
    if kind == "file":
        path.write_text(f"the user's {path.name}\n")
    elif kind == "folder":  # with a file, and a link out of the folder that a removal must not follow
        path.mkdir()
        (path / "inside.txt").write_text("the user's\n")
        (path / "out-link").symlink_to(outside)
    else:
        target = {"link-to-folder": outside, "link-to-file": outside / "keep.txt", "dangling-link": outside / "none"}
        path.symlink_to(target[kind])


def tree(root: Path) -> Tree:
    """Every path below root as it is (links read, never followed)."""
    found: Tree = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                found[relative] = ("folder",)
            else:
                found[relative] = ("file", path.read_bytes())
    return found


def expected_refusal(entries: dict[str, str], listing: list[str] | str | None, scenario: str) -> bool:
    if listing is None:
        return bool(entries)
    if listing == "link":
        return True
    return any(name in entries and (entries[name] in LINKS or name not in listing) for name in OUTPUTS[scenario])


@st.composite
def folders(draw: st.DrawFn) -> dict[str, Any]:
    # The sandbox's own names, mostly as it writes them (files, folders), and others of every kind.
    own_kinds = st.sampled_from(["file"] * 6 + ["folder"] * 4 + sorted(LINKS))
    entries = draw(st.dictionaries(st.sampled_from(OWN_NAMES), own_kinds, max_size=5))
    entries |= draw(st.dictionaries(OTHER_NAMES, st.sampled_from(KINDS), max_size=4))
    some = st.lists(st.one_of(st.sampled_from(OWN_NAMES), OTHER_NAMES, st.just("../x")), max_size=8)
    # An earlier run's list (every output name, as the sandbox writes it, plus lines of any kind), another list, none.
    kind = draw(st.sampled_from(["none", "link", "some", "everything", "everything", "everything"]))
    listing = {"none": None, "link": "link"}.get(kind) or draw(some) + (OWN_NAMES if kind == "everything" else [])
    scenario = draw(st.sampled_from(sorted(OUTPUTS)))
    return {"entries": entries, "listing": listing, "scenario": scenario, "out_is_link": draw(st.integers(0, 5)) == 0}


@settings(max_examples=300, deadline=None)
@given(case=folders(), keep_data=st.booleans())
def test_the_sandbox_refuses_in_one_line_or_removes_only_what_it_wrote(case: dict[str, Any], keep_data: bool) -> None:
    entries, listing, scenario = case["entries"], case["listing"], case["scenario"]
    keep_data = keep_data and scenario == "load"
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = base / "outside"
        (outside / "sub").mkdir(parents=True)
        (outside / "keep.txt").write_text("not the sandbox's\n")
        real = base / "real"
        real.mkdir()
        for name, kind in entries.items():
            make_entry(real / name, kind, outside)
        if listing == "link":
            (real / WRITTEN_LIST).symlink_to(outside / "keep.txt")
        elif listing is not None:
            (real / WRITTEN_LIST).write_text("".join(f"{name}\n" for name in listing))
        out = real
        if case["out_is_link"]:
            out = base / "link"
            out.symlink_to(real)
        before = tree(base)
        refused = case["out_is_link"] or expected_refusal(entries, listing, scenario)

        try:
            check_out_folder(out, scenario)
            prepare_out_folder(out, scenario, keep_data)
        except ConfigError as err:
            message = str(err)
            assert refused, message
            assert message.startswith(f"--out {out}: ") and message.isprintable(), message
            assert tree(base) == before  # nothing changed
            event("refused")
            return
        assert not refused
        after = tree(base)

    removed = {n for n in OUTPUTS[scenario] if n in entries}  # each of them listed (else refused), so the run's
    event(f"accepted, removing {'some' if removed else 'nothing'}")
    listing_path, data = f"real/{WRITTEN_LIST}", f"real/{out_folder.PROMETHEUS_DATA}"
    gone = {p for p in before if p.startswith("real/") and p.split("/")[1] in removed}
    changed = {p for p in before if after.get(p) != before[p]} - {listing_path}
    assert changed <= gone, f"changed what the sandbox did not write: {changed - gone}"
    assert not gone & set(after) - {data}, "left an output of an earlier run"
    assert set(after) - set(before) <= {listing_path, data}
    if keep_data:  # made again, empty, for this run's Prometheus
        assert after[data] == ("folder",) and not [p for p in after if p.startswith(f"{data}/")]
    else:
        assert (data in after) == (data in before and out_folder.PROMETHEUS_DATA not in removed)
    written = after[listing_path][1].decode().splitlines()
    assert set(OUTPUTS[scenario]) <= set(written) <= set(OWN_NAMES), written


def test_make_sandbox_twice_into_its_default_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """build/sandbox holds the lock and the run states (made before the folder is prepared) and an earlier run's
    outputs of either scenario: each run removes only its own scenario's outputs and keeps the rest."""
    monkeypatch.chdir(tmp_path)  # the project folder: contracts/paths.py project_dir
    default = sandbox_run._parser().parse_args([]).out
    default_state_dir().mkdir(parents=True)
    default_lock_file().write_text("")
    for scenario in ("load", "load", "rollout", "load", "rollout"):
        check_out_folder(default, scenario)
        prepare_out_folder(default, scenario, keep_data=scenario == "load")  # --keep-data: the load scenario's
        left = [name for name in OUTPUTS[scenario] if (default / name).exists()]
        assert left == ([out_folder.PROMETHEUS_DATA] if scenario == "load" else []), left  # made again, empty
        write_outputs(default, scenario)
    assert {p.name for p in default.iterdir()} == {
        *OUTPUTS["load"],
        *OUTPUTS["rollout"],
        WRITTEN_LIST,
        default_lock_file().name,
        default_state_dir().name,
    }


def write_outputs(out: Path, scenario: str) -> None:
    """What a run of the scenario leaves: every output, folders holding a file."""
    for name in OUTPUTS[scenario]:
        if name in ("file_sd", out_folder.PROMETHEUS_DATA, out_folder.ROLLOUT):
            (out / name).mkdir(exist_ok=True)
            (out / name / "written.txt").write_text("by the run\n")
        else:
            (out / name).write_text("by the run\n")


def test_the_writers_take_their_names_from_the_one_home(tmp_path: Path) -> None:
    """What a load run writes into OUT is what out_folder.OUTPUTS lists: Locust's prefix and log, the Prometheus
    config, its rules and file_sd targets (the real writers, run here)."""
    load = LoadSettings("original", "http", "fp32", 1.0, 1, 1)
    locust = LocustLoad(load, SimpleNamespace(http_url="127.0.0.1:1", grpc_url="127.0.0.1:2"), tmp_path)  # type: ignore[arg-type]
    assert locust.csv_prefix == tmp_path / out_folder.LOCUST_PREFIX and locust.log_path.name in OUTPUTS["load"]
    command = locust.command()
    assert command[command.index("--csv") + 1] == command[command.index("--json-file") + 1] == str(locust.csv_prefix)
    slo = from_stack_file("dev").monitoring.slo
    targets = ScrapeTargets(triton={"http": "a:1", "grpc": "a:2", "metrics": "a:3"}, locust={"metrics": "a:4"})
    components.prometheus_files(tmp_path, SimpleNamespace(address="127.0.0.1:9"), "dev", slo, targets, "2s")  # type: ignore[arg-type]
    assert {p.name for p in tmp_path.iterdir()} <= set(OUTPUTS["load"])


def test_the_red_teams_folders_are_refused_in_one_line_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repro A (a link to a folder of locust-conf/ and a user's prometheus.yml) and repro B (locust-notes/,
    locustfile.py and locust-link): exit 2, one line, no traceback, nothing removed."""
    user = tmp_path / "user"
    (user / "locust-conf").mkdir(parents=True)
    (user / "locust-conf" / "users.csv").write_text("u\n")
    (user / "prometheus.yml").write_text("mine\n")
    (tmp_path / "link").symlink_to(user)
    notes = tmp_path / "notes"
    (notes / "locust-notes").mkdir(parents=True)
    (notes / "locust-notes" / "plan.txt").write_text("p\n")
    (notes / "locustfile.py").write_text("l\n")
    (notes / "locust-link").symlink_to(user)
    before = tree(tmp_path)
    for out, why in ((tmp_path / "link", "a symbolic link"), (user, "holds"), (notes, "holds")):
        for scenario in OUTPUTS:
            assert sandbox_run.main(["--out", str(out), "--scenario", scenario]) == 2
            err = capsys.readouterr().err
            assert err.startswith(f"error: --out {out}: {why}") and err.count("\n") == 1, err
    assert tree(tmp_path) == before
