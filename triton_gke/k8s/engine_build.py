"""EngineBuild: a Kubernetes Job on a GPU pool that builds the TensorRT plan of every TensorRT variant for the pinned
Triton image and that pool's compute capability, and writes it to the model bucket beside the ONNX it is built from.

Why on the cluster: a plan is tied to the GPU's compute capability and to the TensorRT version that built it
(server docs/user_guide/model_repository.md "TensorRT Models"; the TensorRT support matrix: without hardware
compatibility "engines are not portable across different GPU architectures", and Ampere-plus portability leaves a T4
out; ../shared/reference/toolchain-2026-12.md §1), so each GPU type of a stack builds its own, on a node of that type.

The pod, three steps in order (init containers run one after another, each to completion, before the containers,
https://kubernetes.io/docs/concepts/workloads/pods/init-containers/), sharing an emptyDir:
1. `fetch` (CLI_IMAGE, the Google Cloud CLI image: "gcloud, gsutil and bq",
   https://cloud.google.com/sdk/docs/downloads-docker): for each variant, the newest numbered version folder under
   gs://BUCKET/PREFIX/<variant>/ (the sync writes a new one per change, model_repo/sync.py); it skips a variant whose
   plan is already there, else downloads its model.onnx.
2. `build` (nvcr.io/nvidia/tensorrt:<the Triton tag>, the TensorRT container of the same monthly release, as NVIDIA's
   own GKE application builds its engines "for each Triton upgrade" with the matching nvcr.io/nvidia/tensorrt:XX.YY-py3
   and trtexec, server deploy/gke-marketplace-app/trt-engine/README.md): the recipe of model_repo/recipes.py for the
   tag's TensorRT major, on one GPU.
3. `upload` (the CLI image): `gcloud storage cp --no-clobber` (-n: never overwrite an existing object,
   https://cloud.google.com/sdk/gcloud/reference/storage/cp) to gs://BUCKET/PREFIX/<variant>/<N>/<plan file>, the name
   carrying the Triton release and the compute capability (model_repo/engines.py), so the writer needs no delete.

Triton's Deployment waits for the Job: pulumi-kubernetes reports a batch/v1 Job created only once its Complete
condition is True and fails it on a Failed condition, 10 minutes by default unless customTimeouts says otherwise
(https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/), so a depends_on on the Job is "the
engines exist" (infra/region.py hands it to the Deployment with the bucket grants). A dependency rather than an init
container in every Triton pod: the build runs once per GPU type, not once per pod, and a failed build stops the update
before any serving pod is replaced.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke.k8s.common import GPU_NODES, non_root_container_security, non_root_pod_security, restricted_namespace
from triton_gke.model_repo.engines import PlanModel, engine_filename, engine_recipe
from triton_gke.model_repo.recipes import job_problem

ENGINE_NAMESPACE = "triton-engines"
# A release of the CLI's minimal image: `:stable` moves with every release, ":VERSION-stable" is one ("To install
# specific gcloud versions, use the :VERSION-stable tag", https://cloud.google.com/sdk/docs/downloads-docker). 594.0.0:
# 2026-11-17 (https://cloud.google.com/sdk/docs/release-notes). Its repository keeps a version for one year
# (GoogleCloudPlatform/cloud-sdk-docker README, "Package retention policy"): move it on before 2027-11.
CLI_IMAGE = "gcr.io/google.com/cloudsdktool/google-cloud-cli:594.0.0-stable"
TENSORRT_IMAGE = "nvcr.io/nvidia/tensorrt"
ENGINE_UID = 1000
WORK_DIR = "/work"
# Budget of one variant's build: the ONNX Runtime TensorRT start that builds a repository's engines took up to 750 s
# in Triton 23.05 (triton-inference-server/server #6014); twice that per variant, plus 10 minutes for image pulls and
# copies, bounds the Job (activeDeadlineSeconds) and Pulumi's wait for it.
BUILD_S_PER_VARIANT = 750
PULL_AND_COPY_S = 600
# One retry: a preempted Spot node or a transient pull error gets a second pod; a recipe that fails fails twice.
BACKOFF_LIMIT = 1
# No ttlSecondsAfterFinished: the Job object stays once finished (its pod holds no GPU then). Removed by a TTL
# (https://kubernetes.io/docs/concepts/workloads/controllers/ttlafterfinished/), it would be gone from the cluster but
# not from Pulumi's state: a `pulumi refresh` drops it and the next `up` creates it again, which needs a spare GPU node
# (red team). The Job is Pulumi's to delete, with the stack.
# The pod template annotation that carries the model repository's digest: a new repository is a new template.
MODEL_DIGEST_ANNOTATION = "triton-gke/model-repository-digest"


@dataclass(frozen=True)
class EngineBuildArgs:
    triton_image_tag: str
    model_repository: pulumi.Input[str]  # gs://BUCKET/PREFIX
    # The repository's plan models (model_repo/engines.py plan_models: precision, batch and inputs as built).
    variants: tuple[PlanModel, ...]
    accelerator_type: str
    compute_capability: str
    # The Google service account the Job acts as through Workload Identity (reads the ONNX, creates the plans).
    writer_email: pulumi.Input[str] | None
    # The Kubernetes service account the Job runs as in ENGINE_NAMESPACE; a stack passes its own
    # (policy/principals.py engine_service_account), the principal bound to its engine writer.
    service_account: str = "engine-builder"
    model_digest: str = ""
    node_selector: Mapping[str, str] | None = None
    toleration_key: str | None = None
    # What the Job waits for (the writer's grants and Workload Identity binding, the model upload).
    depends_on: Sequence[pulumi.Resource] = ()


def deadline_s(variants: int) -> int:
    """activeDeadlineSeconds of a Job building `variants` plans."""
    return variants * 2 * BUILD_S_PER_VARIANT + PULL_AND_COPY_S


def build_commands(args: EngineBuildArgs) -> list[str]:
    """Per variant, the shell lines of the build step: the image tag's recipe, run in WORK_DIR/<variant>, skipped where
    the fetch step found the plan already in the bucket (a `skip` marker)."""
    lines = ["set -eu"]
    for v in args.variants:
        built = engine_recipe(args.triton_image_tag, args.compute_capability, v)
        problem = job_problem(built)
        if problem:  # the stack's settings refuse it first (settings/serving.py); a direct caller gets the reason
            raise ValueError(f"variant {v.name!r} under {args.triton_image_tag}: {problem}")
        folder = shlex.quote(f"{WORK_DIR}/{v.name}")
        steps = " && ".join(shlex.join(step) for step in built.steps)
        lines.append(f"if [ ! -e {folder}/skip ]; then cd {folder} && {steps}; fi")
    return lines


def _gcloud_lines(args: EngineBuildArgs, repository: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The preamble of a gcloud step (a writable config dir) and, per variant, its bucket folder and work folder."""
    folders = [
        (shlex.quote(f"{repository.rstrip('/')}/{v.name}"), shlex.quote(f"{WORK_DIR}/{v.name}")) for v in args.variants
    ]
    # One plain upload per plan: gcloud storage splits a large file into temporary objects it composes and then
    # deletes ("parallel composite uploads", https://cloud.google.com/storage/docs/parallel-composite-uploads); their
    # names do not end in .plan and the writer may delete nothing (infra/engine_writer.py), so that would fail.
    return [
        "set -eu",
        f"export CLOUDSDK_CONFIG={WORK_DIR}/.gcloud",
        "export CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED=False",
    ], folders


def fetch_commands(args: EngineBuildArgs, repository: str) -> list[str]:
    """Shell lines of the fetch step: the newest version folder of each variant, its plan's presence, its ONNX."""
    plan = engine_filename(args.triton_image_tag, args.compute_capability)
    lines, folders = _gcloud_lines(args, repository)
    for v, (base, folder) in zip(args.variants, folders, strict=True):
        lines += [
            f"mkdir -p {folder}",
            # Version folders are whole numbers (model_repo/sync.py); the greatest is the one Triton serves.
            f"v=$(gcloud storage ls {base}/ | sed -n 's#.*/\\([0-9][0-9]*\\)/$#\\1#p' | sort -n | tail -1)",
            f'test -n "$v" || {{ echo "no version folder under {v.name}/" >&2; exit 1; }}',
            f'echo "$v" > {folder}/version',
            f'if gcloud storage ls {base}/"$v"/{plan} >/dev/null 2>&1; then touch {folder}/skip; '
            f'else gcloud storage cp {base}/"$v"/model.onnx {folder}/model.onnx; fi',
        ]
    return lines


def upload_commands(args: EngineBuildArgs, repository: str) -> list[str]:
    plan = engine_filename(args.triton_image_tag, args.compute_capability)
    lines, folders = _gcloud_lines(args, repository)
    for base, folder in folders:
        lines.append(
            f"[ -e {folder}/skip ] || gcloud storage cp --no-clobber {folder}/{plan} "
            f'{base}/"$(cat {folder}/version)"/{plan}'
        )
    return lines


class EngineBuild(pulumi.ComponentResource):
    """The namespace, service account and Job that build one GPU type's TensorRT plans."""

    job: kubernetes.batch.v1.Job

    def __init__(self, name: str, args: EngineBuildArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:k8s:EngineBuild", name, None, opts)
        self._args = args
        namespace = restricted_namespace(f"{name}-ns", ENGINE_NAMESPACE, self)
        ns = namespace.metadata.name
        child = pulumi.ResourceOptions(parent=self)
        account = kubernetes.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(
                name=args.service_account,
                namespace=ns,
                annotations=None
                if args.writer_email is None
                else {"iam.gke.io/gcp-service-account": args.writer_email},
            ),
            automount_service_account_token=False,
            opts=child,
        )
        deadline = deadline_s(len(args.variants))
        # Pulumi waits for the Job's completion: as long as the Job may run, plus the GPU node's scale-up.
        wait = pulumi.CustomTimeouts(create=f"{deadline // 60 + 15}m", update=f"{deadline // 60 + 15}m")
        self.job = kubernetes.batch.v1.Job(
            f"{name}-job",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(namespace=ns, labels=self.labels),
            spec=kubernetes.batch.v1.JobSpecArgs(
                backoff_limit=BACKOFF_LIMIT,
                active_deadline_seconds=deadline,
                template=self._pod_template(account),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on), custom_timeouts=wait),
        )
        self.register_outputs({"namespace": ns})

    @property
    def labels(self) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "engine-build",
            "app.kubernetes.io/component": "tensorrt-engines",
            "triton-gke/compute-capability": self._args.compute_capability.replace(".", "-"),
        }

    def _pod_template(self, account: kubernetes.core.v1.ServiceAccount) -> kubernetes.core.v1.PodTemplateSpecArgs:
        a = self._args
        toleration = GPU_NODES.toleration
        if a.toleration_key is not None:
            toleration = kubernetes.core.v1.TolerationArgs(
                key=a.toleration_key, operator=toleration.operator, effect=toleration.effect
            )
        repository = pulumi.Output.from_input(a.model_repository)
        work = [kubernetes.core.v1.VolumeMountArgs(name="work", mount_path=WORK_DIR)]
        env = [kubernetes.core.v1.EnvVarArgs(name="HOME", value=WORK_DIR)]

        def shell(name: str, image: str, lines: pulumi.Input[list[str]], gpu: bool) -> kubernetes.core.v1.ContainerArgs:
            return kubernetes.core.v1.ContainerArgs(
                name=name,
                image=image,
                command=["/bin/bash", "-c"],
                args=pulumi.Output.from_input(lines).apply(lambda ls: ["\n".join(ls)]),
                env=env,
                working_dir=WORK_DIR,
                resources=kubernetes.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": "1", "memory": "4Gi"},
                    limits={"memory": "8Gi", **({"nvidia.com/gpu": "1"} if gpu else {})},
                ),
                security_context=non_root_container_security(),
                volume_mounts=work,
            )

        return kubernetes.core.v1.PodTemplateSpecArgs(
            metadata=kubernetes.meta.v1.ObjectMetaArgs(
                labels=self.labels, annotations={MODEL_DIGEST_ANNOTATION: a.model_digest}
            ),
            spec=kubernetes.core.v1.PodSpecArgs(
                service_account_name=account.metadata.name,
                restart_policy="Never",
                node_selector=dict(a.node_selector or {"cloud.google.com/gke-accelerator": a.accelerator_type}),
                tolerations=[toleration],
                security_context=non_root_pod_security(ENGINE_UID),
                init_containers=[
                    shell("fetch", CLI_IMAGE, repository.apply(lambda r: fetch_commands(a, r)), gpu=False),
                    shell("build", f"{TENSORRT_IMAGE}:{a.triton_image_tag}", build_commands(a), gpu=True),
                ],
                containers=[shell("upload", CLI_IMAGE, repository.apply(lambda r: upload_commands(a, r)), gpu=False)],
                volumes=[
                    kubernetes.core.v1.VolumeArgs(
                        name="work", empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs(size_limit="20Gi")
                    )
                ],
            ),
        )
