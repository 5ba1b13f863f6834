"""bench.runner: endpoints, variant selection and payload copies, a variant that cannot be served."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import pytest
from triton_gke.bench import runner
from triton_gke.bench.load_plan import LoadPlan
from triton_gke.bench.results import payload_pairs
from triton_gke.bench.slo_search import (
    RateLadder,
)
from triton_gke.model_repo.settings import REFERENCE_VARIANTS
from triton_gke.sandbox.triton import TritonStartError

from tests.unit.bench.test_slo_search import SLO


# ---------------------------------------------------------------- runner helpers
def test_stack_target_reads_the_endpoint_from_stack_outputs() -> None:
    outputs = {"httpEndpoint": "http://203.0.113.7/v2/models/MODEL/infer", "lbAddress": "203.0.113.7"}
    assert runner.endpoint_from_outputs(outputs) == "203.0.113.7:80"
    with pytest.raises(runner.BenchError, match="globalLoadBalancer"):
        runner.endpoint_from_outputs({"clusters": {}})


def test_variant_selection_and_payload_copies() -> None:
    assert [v.name for v in runner.select_variants(REFERENCE_VARIANTS, ("trt_int8",))] == ["trt_int8"]
    assert len(runner.select_variants(REFERENCE_VARIANTS, ())) == 5
    with pytest.raises(runner.BenchError, match="'nope' is not deployed"):
        runner.select_variants(REFERENCE_VARIANTS, ("nope",))
    (copy,) = runner.payload_copies(REFERENCE_VARIANTS, ("original",))
    assert (copy.name, copy.input_dtype, copy.max_batch_size) == ("original_uint8", "UINT8", 64)
    model = runner.read_model(copy, None)
    assert (model.payload, model.bytes_per_request) == ("uint8", 150_528)
    served_uint8 = [copy, *REFERENCE_VARIANTS[1:]]  # a stack that already serves original_uint8 with UINT8
    (back,) = runner.payload_copies(served_uint8, ("original_uint8",))
    assert (back.name, back.input_dtype) == ("original_uint8_fp32", "FP32")
    with pytest.raises(runner.BenchError, match="--uint8: 'nope'"):
        runner.payload_copies(REFERENCE_VARIANTS, ("nope",))
    names = ["original", "original_uint8", "trt_int8", "x_uint8_fp32", "x_uint8"]
    assert payload_pairs(names) == [("original", "original_uint8"), ("x_uint8", "x_uint8_fp32")]


def test_a_variant_that_cannot_be_served_is_reported_and_skipped() -> None:
    @contextlib.contextmanager
    def broken_server(_model: str) -> Iterator[runner.Endpoint]:
        raise TritonStartError("tritonserver exited with code 1 before it was ready\n(log tail)")
        yield  # a generator, as a server context is

    plan = LoadPlan(RateLadder(1, 1.5, 0.05, 10, 0.5), 1, 1.0, 0.0, 1.0, dataclasses.replace(SLO, min_requests=4))
    config = runner.BenchConfig("dev", "sandbox", plan, repeats=1)
    outcome = runner.run_all(config, [runner.read_model(REFERENCE_VARIANTS[0], None)], broken_server, lambda _: None)
    assert outcome.runs == [] and outcome.summaries == []
    assert outcome.failed == ["original: not measured: tritonserver exited with code 1 before it was ready"]
