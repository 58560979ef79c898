"""The Job and Secret of a run phase: valid for the API server, hardened, and never the token in clear."""

from __future__ import annotations

import base64
import copy
import json
import re

import kubernetes_validate
import pytest
from kubernetes.client import ApiClient, V1Job, V1Secret

from firstlume.launchers import manifests
from firstlume.launchers.base import PhaseLaunch, PhaseRef
from firstlume.settings import KubernetesSettings

# The oldest and newest minors kubernetes-validate ships offline, and one between.
KUBERNETES_VERSIONS = ["1.25.0", "1.31.0", "1.37.0"]
TOKEN = "flx_phase_token_that_must_never_appear_in_a_pod_spec"

MINIMAL = KubernetesSettings(image="registry.example/firstlume:1.0")
FULL = KubernetesSettings(
    image="registry.example/firstlume:1.0",
    namespace="firstlume-runs",
    image_pull_policy="Always",
    image_pull_secrets=("registry-credentials",),
    service_account="runner",
    cpu_request="500m",
    cpu_limit="2",
    memory_request="1Gi",
    memory_limit="4Gi",
    work_dir_size_limit="10Gi",
    active_deadline_seconds=3600,
    ttl_seconds_after_finished=600,
    node_selector={"firstlume.dev/pool": "runners", "kubernetes.io/arch": "amd64"},
    tolerations=(
        {"key": "dedicated", "operator": "Equal", "value": "runners", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ),
    pod_annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    env_from_secrets=("cloud-credentials", "terraform-cloud"),
    run_as_user=20000,
    instance="prod",
)
NO_RESOURCES = KubernetesSettings(
    image="firstlume",
    cpu_request=None,
    memory_request=None,
    memory_limit=None,
    work_dir_size_limit=None,
)
CONFIGS = {"minimal": MINIMAL, "full": FULL, "no-resources": NO_RESOURCES}

RUN_IDS = [
    "0b7e3c2a-3f41-4c55-9d1e-6a0f2b9c8d71",  # UUID
    "01HZX3K9Q5V7W8Y2B4C6D8E0FG",  # ULID, upper case
    "run_with.Under-scores",
    "x" * 200,
    "ünïcødé run",
]


def launch_for(run_id: str = RUN_IDS[0], phase: str = "plan", attempt: int = 1) -> PhaseLaunch:
    return PhaseLaunch(
        run_id=run_id,
        phase=phase,
        attempt=attempt,
        token=TOKEN,
        control_plane_url="http://firstlume.firstlume.svc.cluster.local:8000",
        org_slug="acme",
        stack_slug="network",
    )


def every_manifest() -> list[tuple[str, dict]]:
    produced = []
    for config_name, config in CONFIGS.items():
        for run_id in RUN_IDS:
            for phase, attempt in (("plan", 1), ("apply", 3)):
                launch = launch_for(run_id, phase, attempt)
                job = manifests.job(config, launch)
                secret = manifests.token_secret(config, launch)
                owned = copy.deepcopy(secret)
                owned["metadata"].update(
                    manifests.secret_owner_patch(
                        job["metadata"]["name"], "6f1c1a52-8a4e-4c57-a3a5-0d1d4e6f7a8b"
                    )["metadata"]
                )
                tag = f"{config_name}/{run_id[:12]}/{phase}"
                produced += [(f"{tag}/job", job), (f"{tag}/secret", secret), (f"{tag}/owned-secret", owned)]
    return produced


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_validates_against_the_official_schema_in_strict_mode(version: str) -> None:
    for name, manifest in every_manifest():
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(
                f"{name} is invalid for Kubernetes {version}: {'.'.join(map(str, exc.path))}: {exc.message}"
            )


def test_strict_validation_would_catch_an_unknown_field() -> None:
    job = manifests.job(MINIMAL, launch_for())
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_manifests_round_trip_through_the_client_models_unchanged(config: KubernetesSettings) -> None:
    launch = launch_for()
    job = manifests.job(config, launch)
    secret = manifests.token_secret(config, launch)
    serializer = ApiClient()
    assert serializer.sanitize_for_serialization(V1Job.from_dict(job)) == job
    assert serializer.sanitize_for_serialization(V1Secret.from_dict(secret)) == secret


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_job_name_is_a_dns_label_of_at_most_63_characters(run_id: str) -> None:
    for phase, attempt in (("plan", 1), ("apply", 12345)):
        name = manifests.job_name(run_id, phase, attempt)
        assert len(name) <= 63
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name
        assert name.endswith(f"-{phase}-{attempt}")
        assert manifests.job_name(run_id, phase, attempt) == name


def test_job_name_keeps_a_dns_safe_run_id_readable() -> None:
    assert manifests.job_name(RUN_IDS[0], "plan", 1) == f"fl-{RUN_IDS[0]}-plan-1"


def test_job_names_differ_for_run_ids_that_differ_only_by_case_or_length() -> None:
    names = {
        manifests.job_name(run_id, "plan", 1)
        for run_id in ("01HZXABC", "01hzxabc", "01HzxAbc", "a" * 100, "a" * 101, "run.1", "run-1")
    }
    assert len(names) == 7


def test_job_name_refuses_what_it_cannot_name() -> None:
    with pytest.raises(ValueError, match="phase"):
        manifests.job_name("run", "Plan Phase", 1)
    with pytest.raises(ValueError, match="attempt"):
        manifests.job_name("run", "plan", -1)
    with pytest.raises(ValueError, match="run id"):
        manifests.job_name("", "plan", 1)


def test_labels_carry_the_full_ids_and_annotations_always_do() -> None:
    launch = launch_for(RUN_IDS[1], "apply", 2)
    job = manifests.job(FULL, launch)
    labels = job["metadata"]["labels"]
    assert labels[manifests.LABEL_RUN] == RUN_IDS[1]
    assert labels[manifests.LABEL_PHASE] == "apply"
    assert labels[manifests.LABEL_ATTEMPT] == "2"
    assert labels[manifests.LABEL_INSTANCE] == "prod"
    assert job["spec"]["template"]["metadata"]["labels"] == labels
    notes = job["metadata"]["annotations"]
    assert notes[manifests.ANNOTATION_ORG] == "acme"
    assert notes[manifests.ANNOTATION_STACK] == "network"
    assert manifests.ref_of(labels, notes) == PhaseRef(RUN_IDS[1], "apply", 2)


def test_a_run_id_too_long_for_a_label_is_hashed_in_labels_and_whole_in_annotations() -> None:
    run_id = "x" * 200
    job = manifests.job(MINIMAL, launch_for(run_id))
    label = job["metadata"]["labels"][manifests.LABEL_RUN]
    assert len(label) <= 63 and label != run_id
    assert label == manifests.label_value(run_id)
    assert job["metadata"]["annotations"][manifests.ANNOTATION_RUN] == run_id
    assert manifests.ref_of(job["metadata"]["labels"], job["metadata"]["annotations"]).run_id == run_id


def test_job_runs_one_pod_once_with_the_configured_deadline_and_ttl() -> None:
    spec = manifests.job(FULL, launch_for())["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["completions"] == 1 and spec["parallelism"] == 1
    assert spec["activeDeadlineSeconds"] == 3600
    assert spec["ttlSecondsAfterFinished"] == 600
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == "runner"
    assert pod["automountServiceAccountToken"] is False
    assert pod["nodeSelector"] == {"firstlume.dev/pool": "runners", "kubernetes.io/arch": "amd64"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    assert (
        spec["template"]["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"]
        == "false"
    )


def test_container_has_resources_and_a_hardened_security_context() -> None:
    pod = manifests.job(FULL, launch_for())["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 20000
    assert security["allowPrivilegeEscalation"] is False
    assert security["privileged"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["command"] == ["firstlume", "executor"]
    assert container["envFrom"] == [
        {"secretRef": {"name": "cloud-credentials"}},
        {"secretRef": {"name": "terraform-cloud"}},
    ]


def test_the_work_dir_is_a_writable_volume_under_a_read_only_root() -> None:
    pod = manifests.job(FULL, launch_for())["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {item["name"]: item for item in container["env"]}
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    work_dir = env["FIRSTLUME_WORK_DIR"]["value"]
    assert volumes[mounts[work_dir]]["emptyDir"] == {"sizeLimit": "10Gi"}
    for variable in ("HOME", "TMPDIR"):
        assert env[variable]["value"] in mounts


def test_executor_environment_follows_the_protocol() -> None:
    launch = launch_for(phase="apply", attempt=2)
    (container,) = manifests.job(MINIMAL, launch)["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item for item in container["env"]}
    assert env["FIRSTLUME_CONTROL_PLANE_URL"]["value"] == launch.control_plane_url
    assert env["FIRSTLUME_RUN_ID"]["value"] == launch.run_id
    assert env["FIRSTLUME_PHASE"]["value"] == "apply"
    assert env["FIRSTLUME_ATTEMPT"]["value"] == "2"
    assert env["FIRSTLUME_EXECUTOR_TOKEN"] == {
        "name": "FIRSTLUME_EXECUTOR_TOKEN",
        "valueFrom": {
            "secretKeyRef": {
                "name": manifests.secret_name(launch.run_id, "apply", 2),
                "key": manifests.TOKEN_KEY,
            }
        },
    }


def test_the_token_is_only_in_the_secret_never_in_the_job() -> None:
    launch = launch_for()
    job = manifests.job(FULL, launch)
    assert TOKEN not in json.dumps(job)
    assert base64.b64encode(TOKEN.encode()).decode() not in json.dumps(job)
    secret = manifests.token_secret(FULL, launch)
    assert base64.b64decode(secret["data"][manifests.TOKEN_KEY]).decode() == TOKEN
    assert "stringData" not in secret
    assert secret["metadata"]["labels"] == job["metadata"]["labels"]


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_the_executor_pod_holds_no_control_plane_secret(config: KubernetesSettings) -> None:
    """Executors run untrusted Terraform code: the only Secret their pod may read is the phase
    token's, owned by its Job; no Kubernetes API token is mounted; its service account is its own."""
    launch = launch_for()
    pod = manifests.job(config, launch)["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == config.service_account
    (container,) = pod["containers"]
    secret_keys = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e]
    assert secret_keys == [
        {"name": manifests.secret_name(launch.run_id, "plan", 1), "key": manifests.TOKEN_KEY}
    ]
    assert [source["secretRef"]["name"] for source in container.get("envFrom", [])] == list(
        config.env_from_secrets
    )
    assert all(set(volume) == {"name", "emptyDir"} for volume in pod["volumes"])
    names = {e["name"] for e in container["env"]}
    assert not names & {
        "FIRSTLUME_DATABASE_URL",
        "FIRSTLUME_ENCRYPTION_KEYS",
        "FIRSTLUME_PUBSUB_URL",
        "FIRSTLUME_DATA_DIR",
    }
    assert not [name for name in names if name.startswith("FIRSTLUME_K8S_")]


def test_the_owner_reference_makes_the_job_own_the_secret() -> None:
    patch = manifests.secret_owner_patch("fl-run-plan-1", "uid-1")
    assert patch == {
        "metadata": {
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "fl-run-plan-1",
                    "uid": "uid-1",
                    "controller": False,
                    "blockOwnerDeletion": False,
                }
            ]
        }
    }


def test_selectors_select_the_labels_they_are_built_from() -> None:
    ref = PhaseRef(RUN_IDS[0], "plan", 1)
    labels = manifests.labels(FULL, ref)
    for selector in (
        manifests.instance_selector(FULL),
        manifests.run_selector(FULL, ref.run_id),
        manifests.phase_selector(FULL, ref),
    ):
        for term in selector.split(","):
            key, value = term.split("=")
            assert labels[key] == value
    assert "prod" in manifests.instance_selector(FULL)
