"""Issue 44, bad input 3: a name holding a line break forged a line of `plan` output. gcp:project "my-project\\n"
passed its check (`re.match` with `$`, which also matches before a trailing newline) and reached every resource
name, the Workload Identity section of the text plan and the neg-cleanup command line.

Now the settings layer refuses it in one line naming the key, and the text plan escapes whatever is not printable in
each of its lines (offline/plan_view.py one_line_each), so no name, from the settings or from a library user's
component, can add a line. The characters are generated: every control character (C0, C1 with NEL U+0085), every
Unicode space, line and paragraph separator (U+2028, U+2029) and format character.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import stack_settings
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import image_release
from triton_gke.observability.settings import MonitoringError, validate_duration, validate_label_name
from triton_gke.offline.plan_view import capacity_table, render_text
from triton_gke.offline.runtime import Plan, PlannedResource
from triton_gke.settings import ConfigError, from_stack_file, load_stack_settings
from triton_gke.settings.keys import gcp_project

# Everything str.splitlines() splits at, and every other character that is not printable.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
UNPRINTABLE = st.one_of(
    st.sampled_from(LINE_BREAKS),
    st.characters(whitelist_categories=("Cc", "Cf", "Zs", "Zl", "Zp"), blacklist_characters=" "),
)
PROJECT_IDS = st.from_regex(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", fullmatch=True)


@st.composite
def spoiled(draw: st.DrawFn, valid: st.SearchStrategy[str]) -> str:
    """A valid value with one unprintable character put anywhere: first, inside or last."""
    text = draw(valid)
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(UNPRINTABLE) + text[at:]


@given(spoiled(PROJECT_IDS))
def test_a_project_id_with_any_unprintable_character_is_refused_naming_the_key(project: str) -> None:
    with pytest.raises(ConfigError) as refused:
        gcp_project({"gcp:project": project})
    assert str(refused.value).startswith("gcp:project: ") and str(refused.value).isprintable()


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(LINE_BREAKS))
def test_the_stack_settings_refuse_a_project_ending_in_a_line_break(brk: str) -> None:
    """Through the one settings reader, as `plan`, `pulumi up` and the sandbox read the stack."""
    with pytest.raises(ConfigError, match=r"^gcp:project: "):
        from_stack_file("dev", {"gcp:project": f"my-project{brk}"})


@given(st.sampled_from(LINE_BREAKS))
def test_other_anchored_rules_refuse_a_trailing_line_break(brk: str) -> None:
    with pytest.raises(ModelRepoError):
        image_release(f"25.10-py3{brk}")
    with pytest.raises(MonitoringError):
        validate_duration("retention", f"15d{brk}")
    with pytest.raises(MonitoringError):
        validate_label_name("label", f"region{brk}")


# ---------------------------------------------------------------- the text plan: one line per line it means


def _resource(
    type_: str, name: str, parent: PlannedResource | None = None, inputs: dict[str, object] | None = None
) -> PlannedResource:
    urn = f"urn:pulumi:dev::triton-gke::{type_}::{name}"
    return PlannedResource(type_, name, urn, True, parent.urn if parent else "", "", [], inputs or {}, parent)


def _plan(name: str) -> Plan:
    """A component, a child, a Workload Identity binding and a Triton Deployment, each carrying `name`."""
    parent = _resource("triton-gke:index:TritonGkeSystem", f"system-{name}")
    child = _resource("gcp:storage/bucket:Bucket", f"models-{name}", parent, {"name": f"bucket-{name}"})
    binding = _resource(
        "gcp:serviceaccount/iAMMember:IAMMember",
        f"reader-{name}",
        parent,
        {
            "role": "roles/iam.workloadIdentityUser",
            "member": f"serviceAccount:{name}.svc.id.goog[triton/triton-dev]",
            "serviceAccountId": f"projects/{name}/serviceAccounts/reader@{name}.iam.gserviceaccount.com",
        },
    )
    pod = {"serviceAccountName": f"triton-{name}", "containers": [{"image": "nvcr.io/nvidia/tritonserver:25.10-py3"}]}
    deployment = _resource(
        "kubernetes:apps/v1:Deployment",
        f"triton-{name}",
        parent,
        {"metadata": {"namespace": f"ns-{name}", "name": "triton"}, "spec": {"template": {"spec": pod}}},
    )
    return Plan(stack=f"dev-{name}", resources=[parent, child, binding, deployment])


@given(name=st.text(min_size=1, max_size=8).filter(str.isprintable), brk=UNPRINTABLE, at=st.integers(0, 8))
def test_no_name_adds_a_line_to_the_text_plan(name: str, brk: str, at: int) -> None:
    bad = name[:at] + brk + name[at:]
    lines, expected = render_text(_plan(bad), []).splitlines(), render_text(_plan(name), []).splitlines()
    assert len(lines) == len(expected), lines
    assert all(line.isprintable() for line in lines), lines


# ---------------------------------------------------------------- a block of several lines: several lines


@settings(max_examples=8, deadline=None)
@given(rate=st.integers(min_value=254, max_value=2000))
def test_the_capacity_warning_prints_as_a_line_of_its_own(rate: int) -> None:
    """Red team 44, finding 9: prod without targetRps and lbMaxRatePerPod above a pod's 253 req/s (the reference
    record of original on a T4) printed `... serve.\\nWarning: lbMaxRatePerPod ...` on one line, the warning hidden
    behind an escaped line break. The sizing block is now its lines: the warning and the backend split each start a
    line, and no line of the table holds an escaped line break."""
    stack = load_stack_settings(stack_settings("prod", lbMaxRatePerPod=rate), stack="prod")
    lines = capacity_table(stack).splitlines()
    explicit = lines.index("No targetRps: the explicit gpuMinNodes and gpuMaxNodes; the table shows what they serve.")
    assert lines[explicit + 1].startswith(f"Warning: lbMaxRatePerPod {rate} is above a pod's 253 req/s"), lines
    assert lines[explicit + 2].startswith(f"lbMaxRatePerPod {rate} req/s per pod, split over"), lines
    assert not [line for line in lines if "\\n" in line or not line.isprintable()], lines
