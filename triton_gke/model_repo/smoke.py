"""After `pulumi up`: send one image to each Triton address and check the answer against the model repository.

    triton-gke smoke http://ADDRESS [http://localhost:8000 ...] [--model original] [--repository DIR]

The expected answer is what ONNX Runtime computes, on this machine, from the very ONNX file the repository holds
for that model (build/model_repository/MODEL/1/model.onnx, what `pulumi up` uploaded): the image is fixed (drawn
from a seeded generator, the seed chosen for the widest margin between the first and second class), so a served
model that answers another class is not the model that was built. TensorRT variants run that file's network at
lower precision, so only the top class is compared, and the margin is printed: a margin of a few hundredths may flip
under FP16 or INT8, one of tenths should not.

Where inference needs a key (the stack's inferenceAuth, its default), the environment gives it, never the command
line (which other users of the machine can read): TRITON_INFERENCE_KEY_HEADER (`pulumi stack output
inferenceKeyHeader`) and TRITON_INFERENCE_KEY (`pulumi stack output inferenceKey --show-secrets`), both or neither.

One line per address: `ADDRESS MODEL: class N "LABEL" (expected N, margin M) ok`, or why not. Exit 0 when every
address answered as expected, 1 when one did not (or could not be reached), 2 for bad input.
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bounded_files import read_text_file
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.contracts.naming import MODEL_NAME_RE
from triton_gke.one_line import OneLineParser

DEFAULT_REPOSITORY = Path("build/model_repository")
DEFAULT_MODEL = "original"
# Candidate seeds for the image; the one with the widest top-1 margin under ONNX Runtime is sent.
SEEDS = range(16)
# Triton's data types this check can build an image of, as numpy types.
NUMPY_TYPES = {"TYPE_FP32": np.float32, "TYPE_UINT8": np.uint8}
CONFIG_BYTES = 1 << 20
# How much of a user's text an error line repeats.
MAX_SHOWN = 200
HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
# Random blocks per image side (a dimension it divides is drawn as that many blocks; channels stay as they are).
CELLS = 8
TIMEOUT_S = 60.0
KEY_HEADER_ENV, KEY_ENV = "TRITON_INFERENCE_KEY_HEADER", "TRITON_INFERENCE_KEY"
# What contracts/triton.py inference_key_header names and the stack generates (k8s/on_cluster_args.py ADMIN_KEY).
HEADER_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
KEY_TEXT = re.compile(r"[A-Za-z0-9._~+/-]+")


class SmokeError(ValueError):
    """Bad input (a repository, model or address): one line naming it."""


@dataclass(frozen=True)
class Expected:
    model: str
    input_name: str
    output_name: str
    datatype: str  # tritonclient's name: FP32, UINT8
    image: np.ndarray  # with its batch dimension
    top: int
    margin: float
    labels: tuple[str, ...]

    def label(self, index: int) -> str:
        return self.labels[index] if 0 <= index < len(self.labels) else "?"


def _config(model_dir: Path) -> mc.ModelConfig:
    path = model_dir / "config.pbtxt"
    if not path.is_file():
        raise SmokeError(f"{path}: no such model config; build it with `make model-repo` (or name --repository)")
    config = mc.ModelConfig()
    try:
        text_format.Parse(read_text_file(path, CONFIG_BYTES, "a model config", SmokeError), config)
    except text_format.ParseError as err:
        raise SmokeError(f"{path}: not a Triton model config ({err})") from None
    if len(config.input) != 1 or len(config.output) != 1:
        raise SmokeError(f"{path}: the smoke test sends one image to a model with one input and one output")
    return config


def _image(config: mc.ModelConfig, path: Path, seed: int) -> np.ndarray:
    tensor = config.input[0]
    kind = mc.DataType.Name(tensor.data_type)
    if kind not in NUMPY_TYPES or any(d <= 0 for d in tensor.dims):
        raise SmokeError(
            f"{path}: input {tensor.name!r} is {kind} {list(tensor.dims)}; expected FP32 or UINT8 with fixed dims"
        )
    dims = list(tensor.dims)
    # Coarse random blocks, as model_repo/resnet50.py synthetic_images draws: i.i.d. pixel noise is averaged away by
    # global pooling and leaves every image with almost the same features, hence a thin margin between classes.
    coarse = [CELLS if d > CELLS and d % CELLS == 0 else d for d in dims]
    values = np.random.default_rng(seed).random(coarse, dtype=np.float32)
    for axis, (full, small) in enumerate(zip(dims, coarse, strict=True)):
        values = values.repeat(full // small, axis=axis)
    image = (values * 255).astype(np.uint8) if kind == "TYPE_UINT8" else values
    return image[None] if config.max_batch_size > 0 else image


def _labels(path: Path) -> tuple[str, ...]:
    """The class names of the output's label_filename (one per line), or none when there is no such file; anything
    else there (a folder, a FIFO, a dangling link) is the bounded reader's to refuse."""
    if not os.path.lexists(path):
        return ()
    return tuple(read_text_file(path, CONFIG_BYTES, "a labels file", SmokeError).splitlines())


def _top_two(scores: np.ndarray) -> tuple[int, float]:
    """The top class and its margin over the second, from one image's scores."""
    flat = np.asarray(scores, dtype=np.float64).reshape(-1)
    order = np.argsort(flat)[::-1]
    return int(order[0]), float(flat[order[0]] - flat[order[1]])


def expected_answer(repository: Path, model: str) -> Expected:
    """The image to send and the class ONNX Runtime gives it, from the repository's own ONNX file of `model`."""
    import onnxruntime  # the models extra; only now

    if not MODEL_NAME_RE.fullmatch(model):
        raise SmokeError(f"--model {model[:MAX_SHOWN]!r}: not a model folder name (letters, digits, '_', '.', '-')")
    if not repository.is_dir():
        raise SmokeError(f"--repository {repository}: not a folder; name the built repository (build/model_repository)")
    model_dir = repository / model
    config = _config(model_dir)
    onnx_path = model_dir / "1" / "model.onnx"
    if not onnx_path.is_file():
        raise SmokeError(f"{onnx_path}: no ONNX file to compute the expected answer from")
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    best: tuple[float, int, np.ndarray] | None = None
    for seed in SEEDS:
        image = _image(config, model_dir, seed)
        (scores,) = session.run([config.output[0].name], {config.input[0].name: image})
        top, margin = _top_two(scores)
        if best is None or margin > best[0]:
            best = (margin, top, image)
    assert best is not None
    label_file = config.output[0].label_filename
    labels = _labels(model_dir / label_file) if label_file else ()
    return Expected(
        model=model,
        input_name=config.input[0].name,
        output_name=config.output[0].name,
        datatype=mc.DataType.Name(config.input[0].data_type).removeprefix("TYPE_"),
        image=best[2],
        top=best[1],
        margin=best[0],
        labels=labels,
    )


def parse_address(text: str) -> tuple[str, bool]:
    """(host:port, ssl) of an http(s) URL; a path is allowed only as the stack's `httpEndpoint` output writes it."""
    # Shown shortened, and without a user:password an address may carry.
    safe = re.sub(r"//[^/@]*@", "//***@", text)
    shown = repr(safe[:MAX_SHOWN]) + ("..." if len(safe) > MAX_SHOWN else "")
    try:
        url = urllib.parse.urlsplit(text)
        port = url.port
    except ValueError:  # an unclosed [IPv6 or a port that is no number from 0 to 65535
        raise SmokeError(f"address {shown}: not an http(s)://HOST[:PORT] URL") from None
    if url.scheme not in ("http", "https") or not url.hostname:
        raise SmokeError(f"address {shown}: expected http://HOST[:PORT] or https://HOST[:PORT]")
    if url.username is not None or url.query or url.fragment:
        raise SmokeError(f"address {shown}: expected no user, query or fragment (Triton takes none)")
    if url.path not in ("", "/") and not url.path.startswith("/v2/models/"):
        raise SmokeError(f"address {shown}: expected no path (Triton's API is under /v2)")
    if port == 0:
        raise SmokeError(f"address {shown}: port 0 is no port a server listens on")
    if not _valid_host(url.hostname):
        raise SmokeError(f"address {shown}: {url.hostname[:MAX_SHOWN]!r} is not an IP address or a DNS name")
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    return f"{host}:{port or (443 if url.scheme == 'https' else 80)}", url.scheme == "https"


def _valid_host(host: str) -> bool:
    """An IP address, or a DNS name: labels of 1-63 letters, digits and '-', 253 characters at most (RFC 1123 2.1)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return len(host) <= 253 and all(HOST_LABEL.fullmatch(label) for label in host.removesuffix(".").split("."))
    return True


def key_headers(env: Mapping[str, str]) -> dict[str, str]:
    """The inference key's header from the environment ({} without one); SmokeError naming the variable if bad. The
    key itself is never repeated in a message."""
    header, key = env.get(KEY_HEADER_ENV, ""), env.get(KEY_ENV, "")
    if not header and not key:
        return {}
    if not header or not key:
        missing = KEY_HEADER_ENV if not header else KEY_ENV
        raise SmokeError(f"{missing}: set it too, or neither ({KEY_HEADER_ENV} and {KEY_ENV} go together)")
    if not HEADER_NAME.fullmatch(header):
        raise SmokeError(f"{KEY_HEADER_ENV}: {header[:MAX_SHOWN]!r} is not a header name (lowercase, digits, -)")
    if not KEY_TEXT.fullmatch(key):
        raise SmokeError(f"{KEY_ENV}: not a key (letters, digits and - . _ ~ + / only)")
    return {header: key}


def ask(address: str, expected: Expected, headers: Mapping[str, str] | None = None) -> str | None:
    """Send the image to `address` (with `headers`, the inference key); None when the answer is the expected class,
    else one line saying what happened."""
    import tritonclient.http as triton  # the local extra's HTTP client; only now

    url, ssl = parse_address(address)
    try:
        client = triton.InferenceServerClient(url, ssl=ssl, connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S)
        tensor = triton.InferInput(expected.input_name, list(expected.image.shape), expected.datatype)
        tensor.set_data_from_numpy(expected.image)
        outputs = [triton.InferRequestedOutput(expected.output_name)]
        result = client.infer(expected.model, [tensor], outputs=outputs, headers=dict(headers or {}) or None)
        scores = result.as_numpy(expected.output_name)
    except Exception as err:  # noqa: BLE001 - any failure to get an answer is this address's result, one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"no answer: {first[:MAX_SHOWN]}"
    if scores is None or scores.size < 2 or scores.dtype.kind not in "fiu":
        return f"no usable output {expected.output_name!r} (expected numbers, one per class)"
    top, _ = _top_two(scores)
    if top != expected.top:
        return f"class {top} {expected.label(top)!r}, expected {expected.top} {expected.label(expected.top)!r}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="triton-gke smoke", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("addresses", nargs="+", metavar="URL", help="Triton's HTTP address: http(s)://HOST[:PORT]")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"the model to ask (default {DEFAULT_MODEL})")
    parser.add_argument(
        "--repository",
        type=Path,
        default=DEFAULT_REPOSITORY,
        help=f"the built repository the stack uploaded (default {DEFAULT_REPOSITORY})",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        for address in args.addresses:
            parse_address(address)
        expected = expected_answer(args.repository, args.model)
        headers = key_headers(os.environ)
    except SmokeError as err:
        print(f"error: triton-gke smoke: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    wrong = 0
    for address in args.addresses:
        problem = ask(address, expected, headers)
        wrong += problem is not None
        verdict = problem or (
            f"class {expected.top} {expected.label(expected.top)!r} (expected {expected.top}, "
            f"margin {expected.margin:.3f}) ok"
        )
        print(f"{address} {expected.model}: {verdict}", flush=True)
    return EXIT_FAILED if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
