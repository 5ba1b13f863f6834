"""Settings for the model repository: the variants to serve and where the model comes from.

Kept free of heavy imports (no onnx/numpy) so stack configuration code can build and
validate these dataclasses cheaply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from triton_gke.contracts.gpus import gpu_memory_bytes
from triton_gke.contracts.naming import COMPUTE_CAPABILITY, MODEL_NAME_RE
from triton_gke.contracts.triton import TRT_CACHE_DIR
from triton_gke.model_repo.errors import ModelRepoError

# Triton 25.06 (2.59): the last releases on CUDA 12 (12.9). It runs on every driver GKE installs for a
# T4: R535 (DEFAULT) through the forward-compatibility package, R550/R570 through CUDA 12 minor-version
# compatibility, R575+ natively. 25.08 and later are CUDA 13, which an R550 or R570 driver cannot run.
TRITON_IMAGE_TAG = "25.06-py3"

# Triton dropped the TensorFlow backend after 25.02, so SavedModels need an image <= 25.02.
LAST_TENSORFLOW_RELEASE = (25, 2)

# Field widths in Triton's model configuration (model_config.proto,
# https://github.com/triton-inference-server/common/blob/main/protobuf/model_config.proto): max_batch_size,
# preferred_batch_size and instance_group count are int32, max_queue_delay_microseconds is uint64.
INT32_MAX = 2**31 - 1
UINT64_MAX = 2**64 - 1
FIELD_MAXIMUM = {
    "max_batch_size": INT32_MAX,
    "preferred_batch_size": INT32_MAX,
    "instance_count": INT32_MAX,
    "max_queue_delay_us": UINT64_MAX,
}

PRECISIONS = ("none", "FP32", "FP16", "INT8")
# Type of the image tensor clients send. UINT8 puts a Cast and the /255 scaling into the graph,
# so each request carries 1 byte per pixel channel instead of 4 (150,528 instead of 602,112 bytes
# for a 224x224x3 image): less network, less (de)serialisation, lower load-balancer data cost.
INPUT_DTYPES = ("FP32", "UINT8")

# ---------------------------------------------------------------- physical bounds: what one GPU must hold
# Every variant loads on every GPU the server sees, each with instance_count instances (instance_group KIND_GPU
# "count" instances on each GPU, model_repo/configs.py), and each instance runs a batch of up to max_batch_size.
# So one GPU holds at least, summed over the variants: instance_count x (weights + max_batch_size x input bytes).
# Activations, the CUDA context and the TensorRT workspace (model_repo/configs.py TRT_WORKSPACE_BYTES, up to 1 GiB)
# are NOT counted: the sum is a lower bound, so a configuration it refuses cannot run at all.
# The GPU's memory: contracts/gpus.py GPU_MEMORY_BYTES (NVIDIA T4 datasheet: 16 GB); the build's GPU is the T4.
DEFAULT_GPU = "nvidia-tesla-t4"
# Input of the built-in ResNet-50: one 224 x 224 x 3 image (model_repo/resnet50.py IMAGE_SIZE), 4 bytes per value
# as FP32, 1 as UINT8: 602,112 and 150,528 bytes per batch item.
RESNET50_INPUT_VALUES = 3 * 224 * 224
INPUT_BYTES = {"FP32": 4 * RESNET50_INPUT_VALUES, "UINT8": RESNET50_INPUT_VALUES}
# Weights one instance keeps on the GPU, measured on the built model (build/model_repository/<variant>/1/model.onnx
# written by `triton-gke model-repo custom`): the FP32 ResNet-50 file is 102,132,044 bytes (4 bytes x ~25.5 M
# parameters; torchvision's ResNet50_Weights.IMAGENET1K_V1 lists 25,557,032), the INT8 (QDQ) file 26,053,398 bytes.
# A FP16 TensorRT engine holds the FP32 weights at 2 bytes each: half, 51,066,022 bytes.
WEIGHT_BYTES = {"none": 102_132_044, "FP32": 102_132_044, "FP16": 51_066_022, "INT8": 26_053_398}

_TAG_RE = re.compile(r"^(\d{2})\.(\d{2})(-[A-Za-z0-9_.-]+)?$")

# Triton container releases on NGC (nvcr.io/nvidia/tritonserver): monthly, per NVIDIA's release-notes index
# (https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/, which lists 25.06 then 25.08: there
# was no 25.07), from 21.08 (server 2.13.0) to 26.10 (2.74.0,
# https://github.com/triton-inference-server/server/releases/tag/v2.74.0). Add a month here once NVIDIA publishes it.
FIRST_KNOWN_RELEASE = (21, 8)
LAST_KNOWN_RELEASE = (26, 10)
MISSING_RELEASES = frozenset({(25, 7)})
# Only YY.MM-py3 is the full server with the ONNX Runtime and TensorRT backends these models use. The other tags
# of the same repository (NGC catalogue, https://catalog.ngc.nvidia.com/orgs/nvidia/containers/tritonserver, and
# the Triton README "Build a custom Triton image": -py3-min is the base for building one) are not that server.
OTHER_IMAGES = {
    "-py3-sdk": "the client SDK image (perf_analyzer, clients), not a server",
    "-py3-min": "the minimal base for building a custom Triton image, with no server in it",
    "-py3-igpu": "the Jetson/iGPU (arm64) build, which does not run on an x86 T4 node",
    "-py3-igpu-sdk": "the Jetson/iGPU client SDK image, not a server",
    "-pyt-python-py3": "a server with only the PyTorch and Python backends (no ONNX Runtime or TensorRT)",
    "-tf2-python-py3": "a server with only the TensorFlow and Python backends (no ONNX Runtime or TensorRT)",
    "-vllm-python-py3": "a server with only the vLLM and Python backends (no ONNX Runtime or TensorRT)",
    "-trtllm-python-py3": "a server with only the TensorRT-LLM and Python backends (no ONNX Runtime)",
}
# From 25.08 the images are built on CUDA 13 ("Release 25.08 is based on CUDA 13.0.0 which requires NVIDIA Driver
# release 575 or later. However, if you are running on a data center GPU (for example, T4 ...), you can use NVIDIA
# driver release 470.57 (or later R470), 525.85 (or later R525), 535.86 (or later R535), or 545.23 (or later R545)":
# https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-25-08.html, same text up to 26.04).
# So on a T4, R550 and R570 cannot run them; 25.06 (CUDA 12.9) runs on every branch from R470 up.
FIRST_CUDA13_RELEASE = (25, 8)
CUDA13_NATIVE_BRANCH = 575
CUDA13_FORWARD_COMPAT_BRANCHES = (470, 525, 535, 545)


@dataclass(frozen=True)
class VariantSettings:
    """One served model: a precision plus the batching/instance tuning knobs."""

    name: str
    precision: str  # "none" (plain onnxruntime) | "FP32" | "FP16" | "INT8" (TensorRT)
    max_batch_size: int
    preferred_batch_size: int
    max_queue_delay_us: int
    instance_count: int
    input_dtype: str = "FP32"  # "FP32" | "UINT8": UINT8 casts and scales to [0, 1] inside the model

    @property
    def uses_tensorrt(self) -> bool:
        return self.precision != "none"

    @property
    def uint8_input(self) -> bool:
        return self.input_dtype == "UINT8"


def _reference(name: str, precision: str, batch: int = 64, count: int = 1) -> VariantSettings:
    return VariantSettings(name, precision, batch, batch, 20000, count)


# The five variants of the original tutorial, with TF-TRT replaced by ONNX Runtime + TensorRT.
REFERENCE_VARIANTS: tuple[VariantSettings, ...] = (
    _reference("original", "none"),
    _reference("trt_fp32", "FP32"),
    _reference("trt_fp16", "FP16"),
    _reference("trt_int8", "INT8"),
    _reference("trt_int8_bs16_count4", "INT8", batch=16, count=4),
)


@dataclass(frozen=True)
class ModelRepoSettings:
    """What to build. Input/output names and shapes are read from the model itself."""

    variants: tuple[VariantSettings, ...] = REFERENCE_VARIANTS
    source: str | None = None  # ONNX file or TF SavedModel dir; None = built-in ResNet-50
    triton_image_tag: str = TRITON_IMAGE_TAG
    labels: str | None = None  # labels file (one class per line); None = placeholder names
    # Container path where ONNX Runtime keeps TensorRT engines; the Triton pod mounts a volume there
    # (contracts/triton.py), so engines are built once per pod, not on every model load.
    trt_cache_dir: str = TRT_CACHE_DIR
    # Compute capabilities ("7.5") whose TensorRT plans the cluster builds (k8s/engine_build.py, the stack's
    # tritonBuildEngines): the TensorRT variants are then served as plans (configs.tensorrt_plan_config, one file per
    # capability), their model.onnx kept beside them as the build's source. Empty: ONNX Runtime with its TensorRT
    # accelerator, which builds its own engines in each pod.
    plan_compute_capabilities: tuple[str, ...] = ()


def default_settings() -> ModelRepoSettings:
    return ModelRepoSettings()


def image_release(tag: str) -> tuple[int, int]:
    """(year, month) of a released Triton server image tag such as '25.10-py3'; ModelRepoError says why not."""
    match = _TAG_RE.fullmatch(tag) if isinstance(tag, str) else None  # `$` alone lets "25.10-py3\n" through
    if not match:
        raise ModelRepoError(
            f"{tag!r} is not a Triton release tag (expected YY.MM-py3, e.g. {TRITON_IMAGE_TAG})",
            field="triton_image_tag",
        )
    release = int(match.group(1)), int(match.group(2))
    suffix = match.group(3) or ""
    if suffix != "-py3":
        what = OTHER_IMAGES.get(suffix, "not the server image")
        raise ModelRepoError(f"{tag!r} is {what}; use the server image {tag[:5]}-py3", field="triton_image_tag")
    if not is_known_release(release):
        raise ModelRepoError(
            f"{tag!r} is not a released Triton image; known releases "
            f"{_show_release(FIRST_KNOWN_RELEASE)}-py3 to {_show_release(LAST_KNOWN_RELEASE)}-py3 (none in 25.07)",
            field="triton_image_tag",
        )
    return release


def is_known_release(release: tuple[int, int]) -> bool:
    return (
        1 <= release[1] <= 12
        and FIRST_KNOWN_RELEASE <= release <= LAST_KNOWN_RELEASE
        and release not in MISSING_RELEASES
    )


def _show_release(release: tuple[int, int]) -> str:
    return f"{release[0]:02d}.{release[1]:02d}"


def runs_on_driver(release: tuple[int, int], branch: int) -> bool:
    """Whether a Triton image of `release` runs on a T4 with driver `branch` (e.g. 535), per its release notes."""
    if release < FIRST_CUDA13_RELEASE:
        return branch >= min(CUDA13_FORWARD_COMPAT_BRANCHES)
    return branch >= CUDA13_NATIVE_BRANCH or branch in CUDA13_FORWARD_COMPAT_BRANCHES


def is_saved_model_dir(path: Path) -> bool:
    return path.is_dir() and any((path / n).is_file() for n in ("saved_model.pb", "saved_model.pbtxt"))


def _bytes(number: int) -> str:
    return f"{number / 1e9:,.1f} GB" if number >= 10**9 else f"{number / 1e6:,.1f} MB"


def _footprint(settings: ModelRepoSettings, variant: VariantSettings) -> tuple[int, int]:
    """(weight bytes per instance, input bytes per batch item) of a variant on the GPU.

    The built-in ResNet-50 by the figures above; your own model by its file's size as the weights (its input shape
    is only read at build time, so its input is not counted: the bound stays a lower bound).
    """
    if settings.source is None:
        return WEIGHT_BYTES[variant.precision], INPUT_BYTES[variant.input_dtype]
    path = Path(settings.source)
    return (path.stat().st_size if path.is_file() else 0), 0


def gpu_memory_problem(
    settings: ModelRepoSettings, gpu: str, memory_bytes: int
) -> tuple[VariantSettings, str, str] | None:
    """(variant, field, one-line why) when the variants cannot fit in one `gpu` of `memory_bytes`; None when they can.

    field: "instance_count" or "max_batch_size", whichever adds more bytes in the variant that adds the most.
    """
    terms = []
    for v in settings.variants:
        weights, item = _footprint(settings, v)
        terms.append((v, weights, item, v.instance_count * weights, v.instance_count * v.max_batch_size * item))
    total = sum(w + b for *_, w, b in terms)
    if total <= memory_bytes:
        return None
    variant, *_, weights_total, batch_total = max(terms, key=lambda t: max(t[3], t[4]))
    field = "instance_count" if weights_total >= batch_total else "max_batch_size"
    formula = " + ".join(
        f"{v.name} {v.instance_count} x ({_bytes(w)} weights + {v.max_batch_size} x {i:,} input bytes)"
        for v, w, i, *_ in terms
    )
    why = f"{formula} = {_bytes(total)} is more than the {gpu}'s {memory_bytes / 1e9:g} GB of GPU memory"
    return variant, field, why


def validate_settings(settings: ModelRepoSettings, gpu: str | None = DEFAULT_GPU) -> None:
    """Raise ModelRepoError (one line naming the key and value) on the first problem found.

    gpu: the accelerator every variant must fit in (its memory from contracts/gpus.py); None skips that check.
    """
    release = image_release(settings.triton_image_tag)
    if not settings.variants:
        raise ModelRepoError("at least one model variant is required", field="variants")
    seen: set[str] = set()
    for variant in settings.variants:
        _validate_variant(variant)
        if variant.name in seen:
            raise ModelRepoError(f"duplicate model name {variant.name!r}", field="variants")
        seen.add(variant.name)
    validate_source(settings, release)
    if settings.labels is not None and not Path(settings.labels).is_file():
        raise ModelRepoError(f"file not found: {settings.labels}", field="labels")
    for cc in settings.plan_compute_capabilities:
        if not COMPUTE_CAPABILITY.fullmatch(cc):
            raise ModelRepoError(
                f"{cc!r} is not a compute capability MAJOR.MINOR (e.g. 7.5)", field="plan_compute_capabilities"
            )
    if not settings.trt_cache_dir.startswith("/"):
        raise ModelRepoError(f"{settings.trt_cache_dir!r} must be an absolute container path", field="trt_cache_dir")
    if gpu is not None:
        memory = gpu_memory_bytes(gpu)
        problem = gpu_memory_problem(settings, gpu, memory) if memory else None
        if problem:
            variant, field, why = problem
            raise ModelRepoError(
                f"{field} {getattr(variant, field)}: {why}", field="variants", subject=f"variant {variant.name!r}"
            )


def _validate_variant(v: VariantSettings) -> None:
    def refuse(reason: str) -> ModelRepoError:
        return ModelRepoError(reason, field="variants", subject=f"variant {v.name!r}")

    if not isinstance(v.name, str) or not MODEL_NAME_RE.fullmatch(v.name):
        raise ModelRepoError(
            "use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit",
            field="variants",
            subject=f"variant name {v.name!r}",
        )
    if v.precision not in PRECISIONS:
        raise refuse(f"precision {v.precision!r} is not one of {', '.join(PRECISIONS)}")
    if v.input_dtype not in INPUT_DTYPES:
        raise refuse(f"input_dtype {v.input_dtype!r} is not one of {', '.join(INPUT_DTYPES)}")
    for key in ("max_batch_size", "preferred_batch_size", "max_queue_delay_us", "instance_count"):
        value = getattr(v, key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise refuse(f"{key} must be an integer, got {value!r}")
        if value > FIELD_MAXIMUM[key]:
            raise refuse(f"{key} must be <= {FIELD_MAXIMUM[key]:,} (model config field), got {value}")
    if v.max_batch_size <= 0:
        raise refuse(f"max_batch_size must be >= 1, got {v.max_batch_size}")
    if not 1 <= v.preferred_batch_size <= v.max_batch_size:
        raise refuse(
            f"preferred_batch_size must be between 1 and max_batch_size "
            f"({v.max_batch_size}), got {v.preferred_batch_size}"
        )
    if v.max_queue_delay_us < 0:
        raise refuse(f"max_queue_delay_us must be >= 0, got {v.max_queue_delay_us}")
    if v.instance_count < 1:
        raise refuse(f"instance_count must be >= 1, got {v.instance_count}")


def validate_source(settings: ModelRepoSettings, release: tuple[int, int]) -> None:
    """The model source exists and suits the image's release and the variants (release: image_release's)."""
    if settings.source is None:
        return
    path = Path(settings.source)
    if not path.exists():
        raise ModelRepoError(f"model file not found: {path}", field="source")
    if path.is_dir():
        if not is_saved_model_dir(path):
            raise ModelRepoError(f"{path} is a directory without saved_model.pb (not a TF SavedModel)", field="source")
        if release > LAST_TENSORFLOW_RELEASE:
            raise ModelRepoError(
                f"{path} is a TF SavedModel, but triton_image_tag {settings.triton_image_tag} has no "
                "TensorFlow backend (removed after 25.02); convert it to ONNX or use an image <= 25.02-py3",
                field="source",
            )
        uint8 = next((v.name for v in settings.variants if v.uint8_input), None)
        if uint8:
            raise ModelRepoError(
                "input_dtype UINT8 is not available for a TF SavedModel "
                "(the cast is added to an ONNX graph); use an ONNX source",
                field="variants",
                subject=f"variant {uint8!r}",
            )
        if settings.plan_compute_capabilities and any(v.uses_tensorrt for v in settings.variants):
            raise ModelRepoError(
                f"{path} is a TF SavedModel, but TensorRT plans are built from ONNX (trtexec --onnx, "
                "k8s/engine_build.py); use an ONNX source or leave the engine build off",
                field="source",
            )
        int8 = next((v.name for v in settings.variants if v.precision == "INT8"), None)
        if int8:
            raise ModelRepoError(
                "precision INT8 is not available for a TF SavedModel "
                "(Triton's TF-TRT accepts FP32/FP16 only); use an ONNX source for INT8",
                field="variants",
                subject=f"variant {int8!r}",
            )
