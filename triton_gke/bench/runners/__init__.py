"""The load tools, run for real: Locust (runner, locust_steps), perf_analyzer, raw ONNX Runtime, a remote Triton."""
