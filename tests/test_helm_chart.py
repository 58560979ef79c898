"""The Helm chart, read statically: its values against its schema, the values its templates use,
the wiring of settings, probes, RBAC and migrations, and the image it runs.

With a `helm` binary (on PATH or in $HELM), the chart is also rendered and every manifest is
validated against the official Kubernetes schemas."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from firstlume.launchers import kubernetes as kubernetes_launcher
from firstlume.settings import KubernetesSettings, Settings, env_name

ENV_VARS = {env_name(KubernetesSettings, name) for name in KubernetesSettings.model_fields}

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "firstlume"
TEMPLATES = sorted(path for path in (CHART / "templates").iterdir() if path.is_file())
VALUES: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # base64 of 32 bytes, tests only

VALUES_PATH = re.compile(r"\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def template(name: str) -> str:
    return (CHART / "templates" / name).read_text()


def errors(values: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(values)]


def with_value(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    values = copy.deepcopy(base or VALUES)
    *parents, leaf = path.split(".")
    node = values
    for key in parents:
        node = node[key]
    node[leaf] = value
    return values


def used_paths() -> dict[str, set[str]]:
    """Every `.Values.a.b` in the templates, with the files that use it."""
    found: dict[str, set[str]] = {}
    for path in TEMPLATES:
        for match in VALUES_PATH.finditer(path.read_text()):
            found.setdefault(match.group(1).lstrip("."), set()).add(path.name)
    return found


def leaf_paths(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        return [p for key, child in node.items() for p in leaf_paths(child, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


# -- values and schema -------------------------------------------------------------------------


def test_the_schema_is_a_valid_draft_7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)


def test_values_yaml_validates_against_the_schema() -> None:
    assert errors(VALUES) == []


def test_the_chart_may_create_its_own_secret_from_values() -> None:
    values = copy.deepcopy(VALUES)
    values["secret"].update(
        existingSecret="",
        databaseUrl="postgresql+asyncpg://firstlume:pw@postgres:5432/firstlume",
        encryptionKeys=f"{KEY},{KEY}",
    )
    assert errors(values) == []


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("controlPlane.heartbeatTimeout", -1, "less than or equal to the minimum"),
        ("controlPlane.heartbeatTimeout", "ten minutes", "is not of type"),
        ("controlPlane.replicaCount", 0, "less than the minimum"),
        ("controlPlane.scheduler", "on", "is not of type 'boolean'"),
        ("controlPlane.logLevel", "loud", "is not one of"),
        ("image.pullPolicy", "Sometimes", "is not one of"),
        ("image.tag", "1.0 beta", "does not match"),
        ("executor.resources", {"limits": {"memory": "lots"}}, "is not valid under any"),
        ("executor.resources", {"limit": {"memory": "1Gi"}}, "Additional properties"),
        ("executor.activeDeadlineSeconds", 0, "less than the minimum"),
        ("executor.ttlSecondsAfterFinished", 1.5, "is not of type 'integer'"),
        ("executor.tolerations", [{"key": "a", "operator": "In"}], "is not one of"),
        ("executor.namespace", "Runs_Namespace", "is not valid under any"),
        ("executor.envFromSecrets", ["Cloud Credentials"], "does not match"),
        ("executor.nodeSelector", {"pool": 3}, "is not of type 'string'"),
        ("service.port", 70000, "greater than the maximum"),
        ("runAsUser", 0, "less than the minimum"),
        ("controlPlane.heartbeat_timeout", 600, "Additional properties"),
        ("replicas", 3, "Additional properties"),
        ("secret.existingSecret", "", "should be non-empty"),
        ("ingress.enabled", True, "should be non-empty"),
    ],
)
def test_wrong_values_are_rejected(path: str, value: Any, expected: str) -> None:
    found = errors(with_value(path, value))
    assert found, f"{path}={value!r} was accepted"
    assert any(expected in error for error in found), found


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("databaseUrl", "mysql://firstlume@db/firstlume"),
        ("databaseUrl", "sqlite+aiosqlite:///firstlume.db"),
        ("encryptionKeys", "not-a-key"),
        ("encryptionKeys", f"{KEY};{KEY}"),
        ("pubsubUrl", "http://broker"),
    ],
)
def test_a_chart_created_secret_rejects_malformed_connection_values(field: str, value: str) -> None:
    values = copy.deepcopy(VALUES)
    values["secret"].update(
        existingSecret="",
        databaseUrl="postgresql+asyncpg://firstlume:pw@postgres:5432/firstlume",
        encryptionKeys=KEY,
    )
    values["secret"][field] = value
    assert errors(values)


# -- templates against values ------------------------------------------------------------------


def test_every_values_path_the_templates_use_exists_in_values_yaml() -> None:
    paths = used_paths()
    assert paths, "no .Values paths found: the pattern or the templates changed"
    missing = []
    for path, files in sorted(paths.items()):
        node: Any = VALUES
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                missing.append(f".Values.{path} (in {', '.join(sorted(files))})")
                break
            node = node[key]
    assert missing == []


def test_every_value_in_values_yaml_is_used_by_a_template() -> None:
    used = set(used_paths())
    unused = [
        leaf
        for leaf in leaf_paths(VALUES)
        if not any(leaf == path or leaf.startswith(path + ".") for path in used)
    ]
    assert unused == []


def test_heartbeat_timeout_is_wired_to_its_environment_variable() -> None:
    assert re.search(
        r"^\s*FIRSTLUME_HEARTBEAT_TIMEOUT:\s*\{\{\s*\.Values\.controlPlane\.heartbeatTimeout\b",
        template("configmap.yaml"),
        re.MULTILINE,
    )
    assert "configMapRef" in template("deployment.yaml")


def test_the_configmap_sets_every_launcher_setting_except_the_kubeconfig() -> None:
    configmap = template("configmap.yaml")
    assert re.search(r"^\s*FIRSTLUME_LAUNCHER:\s*kubernetes\s*$", configmap, re.MULTILINE)
    set_here = set(re.findall(r"^\s*(FIRSTLUME_K8S_[A-Z_]+):", configmap, re.MULTILINE))
    # In the cluster the launcher uses its service account, and the watch keeps its default.
    left_out = {"FIRSTLUME_K8S_KUBECONFIG", "FIRSTLUME_K8S_CONTEXT", "FIRSTLUME_K8S_WATCH_TIMEOUT_SECONDS"}
    assert set_here == set(ENV_VARS) - left_out


def test_probes_point_at_the_health_endpoints() -> None:
    deployment = template("deployment.yaml")
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        block = re.search(rf"{probe}:\n((?:\s{{12,}}.*\n)+)", deployment)
        assert block, probe
        assert f"path: {path}" in block.group(1), probe
        assert "port: http" in block.group(1), probe
    assert re.search(r"containerPort: 8000", deployment)
    assert re.search(r"- serve\n\s+- --host\n\s+- 0\.0\.0\.0", deployment)


def test_migrations_run_before_the_new_version_is_installed_or_upgraded() -> None:
    job = template("migrations-job.yaml")
    assert "helm.sh/hook: pre-install,pre-upgrade" in job
    assert 'command: ["firstlume", "migrate"]' in job
    assert "FIRSTLUME_DATABASE_URL" in template("_helpers.tpl")
    # The chart's own Secret must exist before that hook runs.
    secret = template("secret.yaml")
    assert "helm.sh/hook: pre-install,pre-upgrade" in secret
    assert re.search(r'helm.sh/hook-weight: "-\d+"', secret)
    assert "helm.sh/resource-policy: keep" in secret


def test_the_control_plane_reads_the_database_url_and_key_ring_from_the_secret() -> None:
    deployment = template("deployment.yaml") + template("_helpers.tpl")
    for variable, key in (
        ("FIRSTLUME_DATABASE_URL", "database-url"),
        ("FIRSTLUME_ENCRYPTION_KEYS", "encryption-keys"),
        ("FIRSTLUME_PUBSUB_URL", "pubsub-url"),
    ):
        assert re.search(rf"name: {variable}\n\s+valueFrom:\n\s+secretKeyRef:\n.*\n\s+key: {key}", deployment)


def static_yaml(text: str) -> list[dict[str, Any]]:
    """Documents of a template whose directives only decorate metadata: drop them and parse."""
    lines = [line for line in text.splitlines() if not re.fullmatch(r"\s*\{\{-?.*-?\}\}\s*", line)]
    plain = re.sub(r"\{\{.*?\}\}", "placeholder", "\n".join(lines))
    return [doc for doc in yaml.safe_load_all(plain) if doc]


def test_rbac_grants_the_launcher_exactly_what_it_uses_in_the_run_namespace() -> None:
    role, binding = static_yaml(template("rbac.yaml"))
    assert role["kind"] == "Role" and binding["kind"] == "RoleBinding"
    assert "firstlume.runNamespace" in template("rbac.yaml")
    granted = {
        (resource, verb) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]
    }
    assert "*" not in {verb for _, verb in granted} | {resource for resource, _ in granted}
    verbs = {"create": "create", "read": "get", "list": "list", "patch": "patch", "delete": "delete"}
    source = Path(kubernetes_launcher.__file__).read_text()
    needed = {("pods/log", "get")}
    for verb, kind in re.findall(r"\.(create|read|list|patch|delete)_namespaced_(job|secret|pod)\b", source):
        needed.add((f"{kind}s", verbs[verb]))
        if verb == "list" and kind in ("job", "pod"):
            needed.add((f"{kind}s", "watch"))  # the watcher streams these lists
    assert granted == needed


def test_executors_get_their_own_service_account_without_an_api_token() -> None:
    accounts = template("serviceaccount.yaml")
    assert accounts.count("kind: ServiceAccount") == 2
    assert accounts.count("automountServiceAccountToken: false") == 2
    assert "firstlume.executorServiceAccountName" in template("configmap.yaml")


def test_every_workload_runs_hardened() -> None:
    helpers = template("_helpers.tpl")
    for setting in (
        "runAsNonRoot: true",
        "allowPrivilegeEscalation: false",
        "readOnlyRootFilesystem: true",
        'drop: ["ALL"]',
        "type: RuntimeDefault",
    ):
        assert setting in helpers, setting
    for name in ("deployment.yaml", "migrations-job.yaml"):
        text = template(name)
        assert 'include "firstlume.podSecurityContext"' in text, name
        assert 'include "firstlume.containerSecurityContext"' in text, name
        assert "mountPath: /tmp" in text, name


def test_chart_metadata_matches_the_project() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2" and chart["name"] == "firstlume"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    assert chart["appVersion"] == project["version"]


# -- the image ---------------------------------------------------------------------------------


def test_the_dockerfile_builds_a_non_root_image_with_a_pinned_terraform() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in dockerfile
    version = re.search(r"^ARG TERRAFORM_VERSION=(\d+\.\d+\.\d+)$", dockerfile, re.MULTILINE)
    checksum = re.search(r"^ARG TERRAFORM_SHA256=([0-9a-f]{64})$", dockerfile, re.MULTILINE)
    assert version and checksum
    assert "releases.hashicorp.com/terraform/${TERRAFORM_VERSION}/" in dockerfile
    assert 'echo "${TERRAFORM_SHA256}  /tmp/terraform.zip" | sha256sum -c -' in dockerfile
    uid = re.search(r"^ARG UID=(\d+)$", dockerfile, re.MULTILINE)
    assert uid and int(uid.group(1)) == VALUES["runAsUser"] > 0
    assert re.search(r"^USER \$\{UID\}:\$\{UID\}$", dockerfile, re.MULTILINE)
    assert 'ENTRYPOINT ["firstlume"]' in dockerfile
    # The image serves the web UI: it is built (checked against the schema) and shipped.
    assert "RUN npm run build" in dockerfile and "COPY schema.graphql" in dockerfile
    assert "COPY --from=ui /src/backend/firstlume/static /src/backend/firstlume/static" in dockerfile


def test_the_docker_context_leaves_out_local_state() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in ("**/.venv", "**/.git", ".firstlume", "tests"):
        assert entry in ignored


# -- rendered, when helm is at hand -------------------------------------------------------------

HELM = os.environ.get("HELM") or shutil.which("helm")
FULL_VALUES = {
    "imagePullSecrets": [{"name": "registry"}],
    "secret": {
        "existingSecret": "",
        "databaseUrl": "postgresql+asyncpg://firstlume:pw@postgres:5432/firstlume",
        "encryptionKeys": f"{KEY},{KEY}",
        "pubsubUrl": "postgres://firstlume:pw@postgres:5432/firstlume",
    },
    "controlPlane": {"tolerations": [{"key": "system", "operator": "Exists", "effect": "NoSchedule"}]},
    "executor": {
        "namespace": "firstlume-runs",
        "resources": {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        "nodeSelector": {"pool": "runners"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "runners", "effect": "NoSchedule"}
        ],
        "envFromSecrets": ["cloud-credentials"],
    },
    "ingress": {"enabled": True, "host": "firstlume.example.com", "tlsSecretName": "firstlume-tls"},
}


@pytest.mark.skipif(HELM is None, reason="no helm binary (set HELM or put helm on PATH)")
@pytest.mark.parametrize("values", [{}, FULL_VALUES], ids=["defaults", "full"])
def test_the_rendered_chart_is_valid_for_kubernetes(values: dict[str, Any], tmp_path: Path) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    rendered = subprocess.run(
        [HELM, "template", "firstlume", str(CHART), "--namespace", "firstlume", "--kube-version", "1.30.0",
         "--values", str(values_file)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    documents = [doc for doc in yaml.safe_load_all(rendered) if doc]
    for version in ("1.25.0", "1.37.0"):
        for doc in documents:
            kubernetes_validate.validate(doc, version, strict=True)
    (configmap,) = [doc for doc in documents if doc["kind"] == "ConfigMap"]
    config = Settings.from_env(configmap["data"]).k8s
    assert config.instance == "firstlume"
