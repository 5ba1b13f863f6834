"""A real tritonserver (from the nvidia-pytriton wheel) serving the CPU twins.

The model has random weights: these tests check serving, not accuracy.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from tests.support.checkout import PROJECT_DIR
from triton_gke.model_repo.build import BuildResult
from triton_gke.model_repo.resnet50 import synthetic_images
from triton_gke.sandbox.netns import NetworkNamespace, isolation_available
from triton_gke.sandbox.processes import free_port, stop_process
from triton_gke.sandbox.triton import TritonServer, TritonStartError

pytest_plugins = ("tests.support.triton_fixtures",)


VARIANTS = ["original", "trt_fp32", "trt_fp16", "trt_int8", "trt_int8_bs16_count4"]


needs_isolation = pytest.mark.skipif(not isolation_available(), reason="no permission for `unshare -n` here")


def infer(client: httpclient.InferenceServerClient, model: str, images: np.ndarray, **output_args) -> object:
    request = httpclient.InferInput("input", list(images.shape), "FP32")
    request.set_data_from_numpy(images)
    # Name the output: without it, tritonclient 2.73 cannot reshape a 2.51 server's reply.
    return client.infer(model, [request], outputs=[httpclient.InferRequestedOutput("probabilities", **output_args)])


def stats(client: httpclient.InferenceServerClient, model: str) -> tuple[int, int]:
    entry = client.get_inference_statistics(model)["model_stats"][0]
    return int(entry["inference_count"]), int(entry["execution_count"])


def onnxruntime_probabilities(model_file: Path, images: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    return session.run(["probabilities"], {"input": images})[0]


@pytest.fixture(scope="module")
def client(cpu_triton: TritonServer) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(cpu_triton.http_url, concurrency=16, network_timeout=120)


def test_every_twin_is_ready(client: httpclient.InferenceServerClient) -> None:
    index = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
    assert index == dict.fromkeys(VARIANTS, "READY")
    assert client.is_server_ready()
    count4 = client.get_model_config("trt_int8_bs16_count4")["instance_group"]
    assert [(g["count"], g["kind"]) for g in count4] == [(4, "KIND_CPU")]


@pytest.mark.parametrize("model", VARIANTS)
def test_inference_matches_onnxruntime(
    client: httpclient.InferenceServerClient, model_repos: BuildResult, model: str
) -> None:
    images = synthetic_images(3, seed=7)
    served = infer(client, model, images).as_numpy("probabilities")
    expected = onnxruntime_probabilities(model_repos.cpu_out / model / "1" / "model.onnx", images)
    assert served.shape == (3, 1000)
    assert served.argmax(axis=1).tolist() == expected.argmax(axis=1).tolist()
    np.testing.assert_allclose(served, expected, rtol=1e-4, atol=1e-6)


def test_classification_returns_labels_from_labels_txt(client: httpclient.InferenceServerClient) -> None:
    images = synthetic_images(2, seed=11)
    top = infer(client, "original", images, class_count=3).as_numpy("probabilities")
    probabilities = infer(client, "original", images).as_numpy("probabilities")
    for row, probs in zip(top, probabilities, strict=True):
        score, index, label = row[0].decode().split(":")
        assert int(index) == probs.argmax() and label == f"class_{probs.argmax():04d}"
        assert float(score) == pytest.approx(probs.max(), rel=1e-5)


def test_dynamic_batching_merges_concurrent_requests(client: httpclient.InferenceServerClient) -> None:
    inferences_before, executions_before = stats(client, "original")
    images = synthetic_images(16, seed=3)
    requests = []
    for image in images:
        request = httpclient.InferInput("input", [1, 224, 224, 3], "FP32")
        request.set_data_from_numpy(image[None])
        outputs = [httpclient.InferRequestedOutput("probabilities")]
        requests.append(client.async_infer("original", [request], outputs=outputs))
    results = [r.get_result().as_numpy("probabilities") for r in requests]
    assert all(r.shape == (1, 1000) for r in results)
    # The statistics can lag the responses: a CI rehearsal read 14 of 16 right after the client held all 16
    # results (the backend reports a batch's statistics after releasing its responses). Read until the count
    # settles; it must still reach exactly 16.
    deadline = time.monotonic() + 10
    inferences, executions = stats(client, "original")
    while inferences - inferences_before < 16 and time.monotonic() < deadline:
        time.sleep(0.05)
        inferences, executions = stats(client, "original")
    assert inferences - inferences_before == 16
    assert 1 <= executions - executions_before < 16  # several requests per model execution


@needs_isolation
def test_session_server_runs_in_a_loopback_only_namespace(cpu_triton: TritonServer) -> None:
    assert cpu_triton.netns is not None
    with socket.create_server(("127.0.0.1", 0)) as host_listener:
        port = host_listener.getsockname()[1]
        probe = (
            "import socket, sys\n"
            f"try: socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "except OSError: sys.exit(0)\n"
            "sys.exit(1)\n"
        )
        inside = subprocess.run(cpu_triton.netns.wrap([sys.executable, "-c", probe]), timeout=30)
    assert inside.returncode == 0, "a process in the namespace reached a port on the host"
    route = subprocess.run(
        cpu_triton.netns.wrap([sys.executable, "-c", "import socket; socket.create_connection(('8.8.8.8', 53), 2)"]),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert route.returncode != 0 and "unreachable" in route.stderr


# ---------------------------------------------------------------- the sandbox runner itself
@pytest.fixture
def one_model_repo(model_repos: BuildResult, tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(model_repos.cpu_out / "original", repo / "original")
    return repo


def test_kill_suspend_and_restart_keep_the_same_address(one_model_repo: Path) -> None:
    with TritonServer(one_model_repo, isolate_network=isolation_available()) as server:
        url = server.http_url
        server.kill()
        assert not server.is_running() and not server.health("live")
        server.restart()
        client = httpclient.InferenceServerClient(url)
        assert server.http_url == url and client.is_model_ready("original")
        assert infer(client, "original", synthetic_images(1, seed=1)).as_numpy("probabilities").shape == (1, 1000)
        server.suspend()
        assert server.is_running() and not server.health("live")  # hung: alive but silent
        server.resume()
        assert server.health("live")
        prefix = server.shm_prefix
    assert not list(Path("/dev/shm").glob(f"{prefix}*"))


def test_bad_model_config_fails_start_with_the_server_log(one_model_repo: Path) -> None:
    config = one_model_repo / "original" / "config.pbtxt"
    config.write_text(config.read_text().replace("preferred_batch_size: 64", "preferred_batch_size: 65"))
    server = TritonServer(one_model_repo, ready_timeout_s=60)
    try:
        with pytest.raises(TritonStartError) as caught:
            server.start()
        assert "exited with code 1" in str(caught.value)
        assert "preferred" in str(caught.value)  # Triton's own reason, from the log tail
        assert not server.is_running()
    finally:
        server.close()


@needs_isolation
def test_namespace_forwards_only_what_it_is_asked_to() -> None:
    port = free_port()  # free on the host; the server binds the same number inside
    with NetworkNamespace() as ns:
        command = ns.wrap([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)])
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert _http_get_eventually(ns.forward(port))
            with socket.socket() as direct:  # the host's own port stays closed
                assert direct.connect_ex(("127.0.0.1", port)) != 0
        finally:
            stop_process(server, 10)


def _http_get_eventually(port: int, attempts: int = 50) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for _ in range(attempts):
        try:
            with opener.open(f"http://127.0.0.1:{port}/", timeout=2) as response:
                return response.status == 200
        except OSError:
            time.sleep(0.1)
    return False


# ---------------------------------------------------------------- triton-gke smoke against a real tritonserver
TRITON_GKE = Path(sys.executable).parent / "triton-gke"


def smoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TRITON_GKE), "smoke", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("model", ["original", "trt_int8"])
def test_smoke_answers_ok_with_the_class_triton_itself_ranks_first(
    cpu_triton: TritonServer, client: httpclient.InferenceServerClient, model_repos: BuildResult, model: str
) -> None:
    # The expected answer comes from the repository `pulumi up` uploads (the GPU one), the server serves its twins.
    from triton_gke.model_repo.smoke import expected_answer

    url = f"http://{cpu_triton.http_url}"
    done = smoke(url, "--model", model, "--repository", str(model_repos.out))
    assert done.returncode == 0 and done.stderr == "", (done.stdout, done.stderr)
    (line,) = done.stdout.splitlines()
    expected = expected_answer(model_repos.out, model)
    # Triton's classification extension ranks the classes itself (labels.txt): the independent check.
    request = httpclient.InferInput("input", list(expected.image.shape), "FP32")
    request.set_data_from_numpy(expected.image)
    ranked = client.infer(model, [request], outputs=[httpclient.InferRequestedOutput("probabilities", class_count=1)])
    _, index, label = ranked.as_numpy("probabilities")[0][0].decode().split(":")
    assert line.startswith(f"{url} {model}: class {index} {label!r} (expected {index}, margin ")
    assert line.endswith(") ok")


def test_smoke_says_which_class_a_server_answers_that_is_not_the_built_model(
    cpu_triton: TritonServer, model_repos: BuildResult, tmp_path: Path
) -> None:
    """A served model that differs from the repository's (here: the repository's final layer shifted by one class,
    as a stale upload would differ) answers another class: exit 1, one line naming both."""
    import onnx
    from onnx import numpy_helper

    stale = tmp_path / "repository"
    shutil.copytree(model_repos.out / "original", stale / "original")
    model_file = stale / "original" / "1" / "model.onnx"
    model = onnx.load(model_file)
    gemm = next(n for n in model.graph.node if n.op_type == "Gemm")
    for initializer in model.graph.initializer:
        if initializer.name in gemm.input[1:]:
            weights = numpy_helper.to_array(initializer)
            initializer.CopyFrom(numpy_helper.from_array(np.roll(weights, 1, axis=0), initializer.name))
    onnx.save(model, model_file)
    done = smoke(f"http://{cpu_triton.http_url}", "--repository", str(stale))
    assert done.returncode == 1 and done.stderr == "", (done.stdout, done.stderr)
    (line,) = done.stdout.splitlines()
    found = re.fullmatch(r"\S+ original: class (\d+) 'class_\d+', expected (\d+) 'class_\d+'", line)
    assert found, line
    served, expected = map(int, found.groups())
    assert expected == (served + 1) % 1000, line


def test_smoke_reports_an_address_that_does_not_answer_and_still_checks_the_others(
    cpu_triton: TritonServer, model_repos: BuildResult
) -> None:
    closed = free_port()
    done = smoke(f"http://127.0.0.1:{closed}", f"http://{cpu_triton.http_url}", "--repository", str(model_repos.out))
    assert done.returncode == 1, (done.stdout, done.stderr)
    down, up = done.stdout.splitlines()
    assert down.startswith(f"http://127.0.0.1:{closed} original: no answer: ")
    assert up.endswith(") ok")


README_SMOKE = ".venv/bin/triton-gke smoke http://localhost:8000"


@needs_isolation
def test_the_readmes_smoke_command_verbatim_against_triton_on_port_8000(cpu_triton: TritonServer) -> None:
    """The deploy page's line after `kubectl port-forward svc/triton 8000:8000` (docs/deploy-steps.md, step 5), run as
    shown from the repository root, in Triton's own network namespace, where tritonserver listens on 8000 as the
    port-forward would expose it."""
    steps = (PROJECT_DIR / "docs" / "deploy-steps.md").read_text()
    assert f"\n{README_SMOKE}  " in steps
    assert cpu_triton.netns is not None
    done = subprocess.run(
        cpu_triton.netns.wrap(["sh", "-c", README_SMOKE]), cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    (line,) = done.stdout.splitlines()
    assert line.startswith("http://localhost:8000 original: class ") and line.endswith(") ok"), line
