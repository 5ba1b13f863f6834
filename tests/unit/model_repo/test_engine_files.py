"""The plan-file pattern the sync accepts inside a staged version folder (model_repo/engines.py is_engine_file) is
exactly the set of names engine_filename gives: every plan the Job can write, and nothing else."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from triton_gke.model_repo.engines import engine_filename, is_engine_file

TAGS = st.builds(lambda y, m: f"{y:02d}.{m:02d}-py3", st.integers(20, 40), st.integers(1, 12))
CAPABILITIES = st.builds(lambda major, minor: f"{major}.{minor}", st.integers(1, 99), st.integers(0, 9))


@given(TAGS, CAPABILITIES, st.text("abc/019_", max_size=20))
def test_every_plan_the_job_writes_is_an_engine_file_in_any_folder(tag: str, capability: str, folder: str) -> None:
    try:
        name = engine_filename(tag, capability)
    except Exception:  # a release the toolkit does not know: no plan of it is ever written
        return
    assert is_engine_file(name) and is_engine_file(f"{folder}/{name}")


def test_listed_names() -> None:
    assert is_engine_file("trt_fp16/3/model.25.06.cc75.plan") and is_engine_file("model.26.06.cc120.plan")
    for other in ("trt/3/model.onnx", "model.plan", "model.25.06.cc75.plan.tmp", "x/model.25.6.cc75.plan",
                  "model.25.06.cc075.plan", "model.25.06.cc75.plan/"):  # fmt: skip
        assert not is_engine_file(other), other
