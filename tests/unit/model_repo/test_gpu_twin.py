"""The GPU twin's curves file, its timing rule (processor sharing) and the model folder it writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_gke.contracts.paths import T4_SERVICE_CURVES
from triton_gke.model_repo import gpu_service
from triton_gke.model_repo.configs import validate_config_text
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.gpu_twin import TwinSpec, read_curves, read_rows, write_twin
from triton_gke.model_repo.settings import REFERENCE_VARIANTS

# ---------------------------------------------------------------- the curves file


def test_curves_cover_each_reference_variant_to_its_max_batch():
    curves = read_curves()
    assert set(curves) == {v.name for v in REFERENCE_VARIANTS}
    for variant in REFERENCE_VARIANTS:
        assert set(curves[variant.name]) == set(range(1, variant.max_batch_size + 1)), variant.name


def test_interpolated_rows_are_linear_between_their_sourced_neighbours():
    """The marking agrees with the values: each interpolated row is the line between the nearest published or
    derived rows of its variant (edit an anchor without regenerating the rows between, and this fails)."""
    rows = read_rows()
    for variant in {r.variant for r in rows}:
        anchors = {r.batch: r.exec_ms for r in rows if r.variant == variant and r.kind != "interpolated"}
        for row in (r for r in rows if r.variant == variant and r.kind == "interpolated"):
            assert row.exec_ms == pytest.approx(gpu_service.curve_ms(anchors, row.batch), abs=6e-4), row


def test_every_sourced_row_names_a_source_the_file_explains():
    text = T4_SERVICE_CURVES.read_text(encoding="utf-8")
    legend = {line[2:].split(":")[0] for line in text.splitlines() if line.startswith("# ") and ":" in line}
    for row in read_rows():
        if row.kind == "interpolated":
            continue
        keys = row.source.split(";")
        assert row.source and all(key in legend for key in keys), row
        assert row.kind == "published" or row.how, f"{row}: a derived row says how"


def test_curves_never_come_from_the_reference_figures():
    """253 ... 2,236.6 RPS are for comparison only: no row's source is the reference tutorial."""
    assert all("tutorial" not in row.source.lower() and "reference" not in row.source.lower() for row in read_rows())


def test_a_row_listed_twice_is_refused(tmp_path: Path):
    path = tmp_path / "c.csv"
    path.write_text("variant,batch,exec_ms,kind,source,how\nx,1,1,published,S,\nx,1,2,published,S,\n")
    with pytest.raises(ModelRepoError, match="twice"):
        read_curves(path)


# ---------------------------------------------------------------- the timing rule


def test_curve_interpolates_and_refuses_batches_beyond_it():
    curve = {1: 2.0, 4: 5.0}
    assert gpu_service.curve_ms(curve, 2) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="covers"):
        gpu_service.curve_ms(curve, 5)
    assert gpu_service.service_s(curve, 4, 10) == pytest.approx(0.05)


def test_curve_text_round_trips():
    curve = read_curves()["trt_fp16"]
    assert gpu_service.parse_curve(gpu_service.format_curve(curve)) == curve


def test_sharing_of_two_staggered_executions():
    """A (1 s of work) starts at 0, B (1 s) at 0.5: A alone does 0.5, then both at half speed; A ends at 1.5,
    B then alone, at 2.0."""
    assert gpu_service.shared_finish_s([1.0, 1.0], [0.0, 0.5]) == pytest.approx([1.5, 2.0])


def test_a_measured_speedup_shortens_sharing():
    assert gpu_service.shared_finish_s([1.0, 1.0], [0.0, 0.0], speedup=(1.0, 1.5)) == pytest.approx([4 / 3, 4 / 3])


@settings(max_examples=60, deadline=None)
@given(works=st.lists(st.floats(0.001, 1.0), min_size=1, max_size=6))
def test_sharing_conserves_the_gpus_work(works):
    """Started together with s(m) = 1, executions end in order of work and the last ends after the total work:
    the GPU is never idle and never faster than one GPU."""
    ends = gpu_service.shared_finish_s(works, [0.0] * len(works))
    assert max(ends) == pytest.approx(sum(works))
    assert sorted(ends) == pytest.approx([ends[i] for i in sorted(range(len(works)), key=works.__getitem__)])
    assert all(end >= work - 1e-12 for end, work in zip(ends, works, strict=True))


# ---------------------------------------------------------------- the model folder


def test_written_twin_carries_its_curve_and_batching(tmp_path: Path):
    curve = read_curves()["trt_int8_bs16_count4"]
    spec = TwinSpec("trt_int8_bs16_count4", curve, 10.0, 16, (16,), 20000, 4)
    folder = write_twin(tmp_path, spec)
    config = validate_config_text((folder / "config.pbtxt").read_text(), folder / "config.pbtxt")
    assert gpu_service.parse_curve(config.parameters["service_curve_ms"].string_value) == curve
    assert float(config.parameters["time_scale"].string_value) == 10.0
    assert list(config.dynamic_batching.preferred_batch_size) == [16]
    assert config.instance_group[0].count == 4 and config.backend == "python"
    assert {p.name for p in (folder / "1").iterdir()} == {"model.py", "gpu_service.py"}


def test_a_max_batch_beyond_the_curve_is_refused():
    with pytest.raises(ModelRepoError, match="beyond its curve"):
        TwinSpec("x", {1: 1.0, 2: 1.5}, 1.0, 4)
