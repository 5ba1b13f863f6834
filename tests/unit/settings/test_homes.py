"""One home per rule: each stack key is read and checked by exactly one step of the settings layer.

settings/homes.py names that step for every key of Pulumi.yaml's schema; these tests trace every typed read of the
settings layer (Reader.integer, .string, .strings, .boolean, .choice, .path) while real stacks load, and fail when
a key is read in any other step, so a second copy of a key's rule cannot come back unnoticed. (Reader.raw alone is
not traced: settings/capacity.py is_set compares a value already checked with its default, and checks nothing.)
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, stack_settings
from triton_gke.k8s.on_cluster_args import image_tag_problem
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.recipes import driver_needed, image_runs_on_driver
from triton_gke.model_repo.settings import FIRST_CUDA13_RELEASE, image_release, is_known_release
from triton_gke.settings import ConfigError, load_stack_settings, serving
from triton_gke.settings.homes import HOMES, STEPS
from triton_gke.settings.reader import Reader
from triton_gke.settings.schema import config_schema
from triton_gke.settings.serving import MODEL_FIELD_KEYS

KEYS = config_schema()[1]
# Every released month the toolkit knows from 25.06 (the tables' range): what the driver rule is asked about.
KNOWN_RELEASES_FOR_DRIVERS = {(y, m) for y in range(25, 28) for m in range(1, 13) if is_known_release((y, m))}
TYPED_READS = ("integer", "string", "strings", "boolean", "choice", "path")
ENTRY = load_stack_settings.__code__
# A sized stack (targetRps) takes the branches of the capacity step the shipped stacks do not.
CONFIGS = {
    "dev": stack_settings("dev"),
    "staging": stack_settings("staging"),
    "prod": stack_settings("prod"),
    "dev sized": stack_settings("dev", targetRps=100, gpuMinNodes=None, gpuMaxNodes=30),
}


def _step_reading() -> str:
    """The step of load_stack_settings the current read happens in (the frame it called), by name."""
    frame = sys._getframe(2)
    while frame.f_code is not ENTRY and frame.f_back is not None and frame.f_back.f_code is not ENTRY:
        frame = frame.f_back
    if frame.f_code is ENTRY:
        return "load_stack_settings itself"
    if frame.f_back is None:
        return "outside load_stack_settings"
    return f"{frame.f_globals['__name__']}.{frame.f_code.co_name}"


@contextmanager
def traced_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, set[str]]]:
    """Key -> the steps that read it, for every typed read made inside the block."""
    reads: dict[str, set[str]] = defaultdict(set)
    for name in TYPED_READS:
        original: Callable[..., Any] = getattr(Reader, name)

        def traced(self: Reader, key: str, *args: Any, _original: Callable[..., Any] = original, **kw: Any) -> Any:
            reads[key].add(_step_reading())
            return _original(self, key, *args, **kw)

        monkeypatch.setattr(Reader, name, traced)
    yield reads
    monkeypatch.undo()


def misplaced(reads: dict[str, set[str]]) -> dict[str, set[str]]:
    """Keys read in a step other than their home, with the steps that read them."""
    homes = {key: f"{step.__module__}.{step.__name__}" for key, step in HOMES.items()}
    return {key: steps for key, steps in reads.items() if steps != {homes.get(key)}}


def _load_all(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    with traced_reads(monkeypatch) as reads:
        for name, config in CONFIGS.items():
            load_stack_settings(config, stack=name.split()[0])
    return reads


def test_every_key_of_the_schema_has_exactly_one_home() -> None:
    assert set(HOMES) == set(KEYS)
    assert sum(len(keys) for keys in STEPS.values()) == len(HOMES), "a key is listed under two steps"


def test_every_key_is_read_in_its_home_and_nowhere_else(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _load_all(monkeypatch)
    assert set(reads) == set(KEYS), f"never read: {sorted(set(KEYS) - set(reads))}"
    assert misplaced(reads) == {}


def test_a_second_reader_of_a_key_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trace can fail: a step that re-reads another step's key (as serving once re-read gpuAcceleratorType)."""
    original = serving.serving

    def rereads(reader: Reader) -> object:
        reader.string("gpuAcceleratorType")
        return original(reader)

    monkeypatch.setattr(serving, "serving", rereads)
    with traced_reads(monkeypatch) as reads:
        load_stack_settings(CONFIGS["dev"], stack="dev")
    assert misplaced(reads)["gpuAcceleratorType"] == {"triton_gke.settings.cluster.gpu_pool", f"{__name__}.rereads"}


# ---------------------------------------------------------------- one rule, its field as data, three names
TAGS = st.one_of(
    st.from_regex(r"[0-9]{2}\.[0-9]{2}(-py3|-py3-sdk|-py3-min|-py4|)", fullmatch=True),
    st.text(max_size=12).filter(lambda text: text.strip() == text and text.isprintable()),
)


@settings(max_examples=150, deadline=None)
@given(tag=TAGS)
@example(tag="null")  # found by this test in a `make test` run
def test_a_bad_triton_tag_gives_one_reason_under_each_callers_own_name(tag: str) -> None:
    """image_release's refusal carries its field and reason as data: the stack names tritonImageTag, the public
    component image_tag, the model-repo builder triton_image_tag, each with the same reason (no text surgery)."""
    try:
        image_release(tag)
    except ModelRepoError as err:
        assert err.field == "triton_image_tag" and str(err) == f"triton_image_tag: {err.reason}"
        stack = _refusal({"tritonImageTag": tag})
        if tag == "null":  # what `pulumi up` passes for an empty stack-file value: the reader refuses it first
            assert stack == f"{PROJECT}:tritonImageTag: 'null' is not valid; an empty value in the stack file; " + (
                "remove the line or quote the text"
            )
        else:
            assert stack == f"{PROJECT}:{MODEL_FIELD_KEYS[err.field]}: {err.reason}"
        assert image_tag_problem(tag, driver_branch=535) == f"image_tag: {err.reason}"
    else:
        assert image_tag_problem(tag, driver_branch=580) is None


def _refusal(overrides: dict[str, str]) -> str | None:
    try:
        load_stack_settings(CONFIGS["dev"] | {f"{PROJECT}:{k}": v for k, v in overrides.items()}, stack="dev")
    except ConfigError as err:
        return str(err)
    return None


@settings(max_examples=120, deadline=None)
@given(
    release=st.sampled_from(sorted(KNOWN_RELEASES_FOR_DRIVERS)),
    branch=st.sampled_from((450, 470, 525, 535, 545, 550, 570, 575, 580, 590)),
)
def test_the_component_and_the_stack_follow_one_driver_rule(release: tuple[int, int], branch: int) -> None:
    """TritonOnCluster's image_tag check and the stack's tritonImageTag check both ask model_repo/recipes.py
    image_runs_on_driver (infra/data/triton_toolchain.csv, and runs_on_driver before it): for any release and driver
    branch the component accepts a tag exactly when that rule says the image runs (a 26.06 image on R535 was accepted
    by the component and refused by the stack before)."""
    tag = f"{release[0]:02d}.{release[1]:02d}-py3"
    accepted = image_tag_problem(tag, driver_branch=branch) is None
    cuda12 = release < FIRST_CUDA13_RELEASE
    assert accepted == (cuda12 or image_runs_on_driver(release, branch))
    if not accepted:
        assert driver_needed(release) in image_tag_problem(tag, driver_branch=branch)
