"""The Helm chart: its values against its schema, the values its templates use, and the chart as
Helm itself renders it (helm-python-sdk, Helm 4's engine in-process: no helm binary) over a
matrix of values, every manifest validated strictly against the official Kubernetes schemas,
`helm lint` clean, the settings the control plane reads from it, and the executors' isolation."""

from __future__ import annotations

import base64
import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml

from firstlume.launchers import kubernetes as kubernetes_launcher
from firstlume.launchers import manifests
from firstlume.launchers.base import PhaseLaunch
from firstlume.settings import KubernetesSettings, Settings, env_name

ROOT = Path(__file__).resolve().parents[1]
K8S_VARIABLES = {env_name(KubernetesSettings, name) for name in KubernetesSettings.model_fields}
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
        ("controlPlane.databasePoolSize", 0, "less than the minimum"),
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
    assert set_here == K8S_VARIABLES - left_out


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


# -- rendered by Helm's own engine (helm-python-sdk: Helm 4's library, no binary) --------------

RELEASE = "firstlume"
NAMESPACE = "firstlume"
# The oldest Kubernetes the README supports, and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.25.0", kubernetes_validate.utils.latest_version())
SERVICE_MONITOR_SCHEMA = json.loads(
    (Path(__file__).parent / "fixtures" / "servicemonitor.schema.json").read_text()
)

MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "external-postgresql-existing-secret": {
        "secret": {"existingSecret": "postgres-credentials"},
        "controlPlane": {"publicUrl": "https://firstlume.internal.example.com/"},
    },
    "chart-created-secret": {
        "secret": {
            "existingSecret": "",
            "databaseUrl": "postgresql+asyncpg://firstlume:pw@postgres:5432/firstlume",
            "encryptionKeys": f"{KEY},{KEY}",
            "pubsubUrl": "postgres://firstlume:pw@postgres:5432/firstlume",
        },
        "imagePullSecrets": [{"name": "registry"}],
    },
    "ingress": {
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "host": "firstlume.example.com",
            "tlsSecretName": "firstlume-tls",
            "annotations": {"nginx.ingress.kubernetes.io/proxy-read-timeout": "3600"},
        }
    },
    "heartbeat-timeout": {
        "controlPlane": {
            "heartbeatTimeout": 42,
            "schedulerInterval": 0.5,
            "databasePoolSize": 8,
            "databaseMaxOverflow": 4,
            "databasePoolTimeout": 2.5,
        }
    },
    "executor-resources-and-node-selectors": {
        "controlPlane": {"tolerations": [{"key": "system", "operator": "Exists", "effect": "NoSchedule"}]},
        "executor": {
            "namespace": "firstlume-runs",
            "resources": {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
            "nodeSelector": {"pool": "runners", "kubernetes.io/arch": "amd64"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "runners", "effect": "NoSchedule"}
            ],
            "podAnnotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
            "envFromSecrets": ["cloud-credentials"],
            "serviceAccount": {
                "create": True,
                "name": "terraform",
                "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/firstlume"},
            },
        },
    },
    "metrics-network-policy-one-replica": {
        "controlPlane": {"replicaCount": 1},
        "metrics": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}, "interval": "15s"}
        },
        "networkPolicy": {
            "enabled": True,
            "ingressFrom": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
            ],
        },
    },
    "no-rbac-no-service-accounts-no-migrations": {
        "rbac": {"create": False},
        "controlPlane": {"serviceAccount": {"create": False, "name": "platform"}},
        "executor": {"serviceAccount": {"create": False, "name": "runner"}},
        "migrations": {"enabled": False},
    },
}


def merged(overrides: dict[str, Any]) -> dict[str, Any]:
    def merge(base: Any, extra: Any) -> Any:
        if isinstance(base, dict) and isinstance(extra, dict):
            return {**base, **{key: merge(base.get(key), value) for key, value in extra.items()}}
        return copy.deepcopy(extra)

    return merge(VALUES, overrides)  # type: ignore[no-any-return]


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The chart's manifests as `helm install` would send them, parsed."""
    with helm_python.Chart.load(CHART) as chart:
        rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    documents = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".yaml"):
            documents += [doc for doc in yaml.safe_load_all(text) if doc]
    return documents


def of_kind(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in documents if doc["kind"] == kind]


def one(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = of_kind(documents, kind)
    return found


def launcher_settings(documents: list[dict[str, Any]]) -> Settings:
    """What the control plane reads from the chart's ConfigMap (its Secret adds the database)."""
    return Settings.from_env(one(documents, "ConfigMap")["data"])


@pytest.fixture(scope="module", params=sorted(MATRIX))
def rendered(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    return request.param, merged(MATRIX[request.param]), render(MATRIX[request.param])


def test_every_matrix_entry_fits_the_values_schema() -> None:
    for name, overrides in MATRIX.items():
        assert errors(merged(overrides)) == [], name


def test_the_chart_lints_without_errors_or_warnings() -> None:
    for name, overrides in MATRIX.items():
        report = helm_python.lint(CHART, overrides, strict=True, namespace=NAMESPACE)
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert report["errors"] == [] and problems == [], (name, report)


def test_lint_catches_a_value_the_schema_refuses() -> None:
    report = helm_python.lint(CHART, {"controlPlane": {"heartbeatTimeout": -1}}, namespace=NAMESPACE)
    assert any(m["severity"] == 3 for m in report["messages"]) or report["errors"], report


def test_every_rendered_manifest_is_valid_for_kubernetes(
    rendered: tuple[str, dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, _, documents = rendered
    assert documents
    for doc in documents:
        if doc["kind"] == "ServiceMonitor":  # a CRD: kubernetes-validate knows only built-in kinds
            jsonschema.validate(doc, SERVICE_MONITOR_SCHEMA)
            continue
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def test_strict_validation_refuses_an_unknown_field() -> None:
    deployment = one(render({}), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)
    monitor = one(render(MATRIX["metrics-network-policy-one-replica"]), "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["paths"] = "/metrics"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, SERVICE_MONITOR_SCHEMA)


def test_the_configmap_is_read_by_the_settings_model_as_the_values_say(
    rendered: tuple[str, dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, values, documents = rendered
    settings = launcher_settings(documents)
    executor = values["executor"]
    assert (
        settings.launcher == "kubernetes"
        and settings.scheduler_enabled is values["controlPlane"]["scheduler"]
    )
    assert settings.heartbeat_timeout == values["controlPlane"]["heartbeatTimeout"]
    assert settings.scheduler_interval == values["controlPlane"]["schedulerInterval"]
    assert settings.database_pool_size == values["controlPlane"]["databasePoolSize"]
    assert settings.database_max_overflow == values["controlPlane"]["databaseMaxOverflow"]
    assert settings.database_pool_timeout == values["controlPlane"]["databasePoolTimeout"]
    k8s = settings.k8s
    assert k8s.instance == RELEASE
    assert k8s.namespace == (executor["namespace"] or NAMESPACE)
    assert (
        k8s.image
        == f"{values['image']['repository']}:{yaml.safe_load((CHART / 'Chart.yaml').read_text())['appVersion']}"
    )
    assert k8s.service_account == (executor["serviceAccount"]["name"] or f"{RELEASE}-executor")
    requests, limits = executor["resources"].get("requests", {}), executor["resources"].get("limits", {})
    assert (k8s.cpu_request, k8s.memory_request) == (
        str(requests["cpu"]) if "cpu" in requests else None,
        requests.get("memory"),
    )
    assert (k8s.cpu_limit, k8s.memory_limit) == (limits.get("cpu"), limits.get("memory"))
    assert k8s.node_selector == executor["nodeSelector"]
    assert [t.manifest() for t in k8s.tolerations] == executor["tolerations"]
    assert k8s.pod_annotations == executor["podAnnotations"]
    assert list(k8s.env_from_secrets) == executor["envFromSecrets"]
    assert list(k8s.image_pull_secrets) == [s["name"] for s in values["imagePullSecrets"]]
    public = values["controlPlane"]["publicUrl"].rstrip("/")
    assert settings.public_url == (public or f"http://{RELEASE}.{NAMESPACE}.svc.cluster.local:8000")


def test_the_control_plane_reads_its_secrets_from_the_named_secret(
    rendered: tuple[str, dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, values, documents = rendered
    secret_name = values["secret"]["existingSecret"] or RELEASE
    deployment = one(documents, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert {name: (ref["name"], ref["key"]) for name, ref in refs.items()} == {
        "FIRSTLUME_DATABASE_URL": (secret_name, "database-url"),
        "FIRSTLUME_ENCRYPTION_KEYS": (secret_name, "encryption-keys"),
        "FIRSTLUME_PUBSUB_URL": (secret_name, "pubsub-url"),
    }
    configmap = one(documents, "ConfigMap")["data"]
    assert not {"FIRSTLUME_DATABASE_URL", "FIRSTLUME_ENCRYPTION_KEYS", "FIRSTLUME_PUBSUB_URL"} & set(
        configmap
    )
    secrets = of_kind(documents, "Secret")
    if values["secret"]["existingSecret"]:
        assert secrets == []
    else:
        (secret,) = secrets
        decoded = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
        assert decoded == {
            "database-url": values["secret"]["databaseUrl"],
            "encryption-keys": values["secret"]["encryptionKeys"],
            "pubsub-url": values["secret"]["pubsubUrl"],
        }
    for job in of_kind(documents, "Job"):
        (migrate,) = job["spec"]["template"]["spec"]["containers"]
        assert migrate["env"][0]["valueFrom"]["secretKeyRef"]["name"] == secret_name


def test_ingress_routes_the_host_to_the_service() -> None:
    documents = render(MATRIX["ingress"])
    ingress = one(documents, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"hosts": ["firstlume.example.com"], "secretName": "firstlume-tls"}]
    (rule,) = ingress["spec"]["rules"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    service = one(documents, "Service")
    assert rule["host"] == "firstlume.example.com"
    assert backend == {"name": service["metadata"]["name"], "port": {"name": "http"}}
    assert of_kind(render({}), "Ingress") == []


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_the_service_monitor_scrapes_metrics_of_the_control_plane_service() -> None:
    documents = render(MATRIX["metrics-network-policy-one-replica"])
    monitor, service = one(documents, "ServiceMonitor"), one(documents, "Service")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["interval"] == "15s"
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert of_kind(render({}), "ServiceMonitor") == []  # off by default


def test_a_disruption_budget_keeps_the_control_plane_up_through_drains() -> None:
    documents = render({})
    budget, deployment = one(documents, "PodDisruptionBudget"), one(documents, "Deployment")
    assert budget["spec"]["maxUnavailable"] == 1
    assert selects(
        budget["spec"]["selector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"]
    )
    # One replica: a budget would only block node drains.
    assert of_kind(render(MATRIX["metrics-network-policy-one-replica"]), "PodDisruptionBudget") == []


def test_network_policies_admit_executors_and_the_listed_peers_and_isolate_executors() -> None:
    documents = render(MATRIX["metrics-network-policy-one-replica"])
    control, executors = of_kind(documents, "NetworkPolicy")
    deployment = one(documents, "Deployment")
    assert selects(
        control["spec"]["podSelector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"]
    )
    (rule,) = control["spec"]["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    same_namespace, from_executors, ingress_controller = rule["from"]
    assert same_namespace == {"podSelector": {}}
    assert (
        ingress_controller == MATRIX["metrics-network-policy-one-replica"]["networkPolicy"]["ingressFrom"][0]
    )
    # The executor pods the launcher creates are the ones admitted, and the ones isolated.
    k8s = launcher_settings(documents).k8s
    pod_labels = manifests.job(k8s, LAUNCH)["spec"]["template"]["metadata"]["labels"]
    assert from_executors["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": k8s.namespace}
    }
    assert selects(from_executors["podSelector"]["matchLabels"], pod_labels)
    assert executors["metadata"]["namespace"] == k8s.namespace
    assert selects(executors["spec"]["podSelector"]["matchLabels"], pod_labels)
    assert executors["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in executors["spec"]
    assert of_kind(render({}), "NetworkPolicy") == []  # off by default


# -- executor pods hold no control-plane secret --------------------------------------------------

LAUNCH = PhaseLaunch(
    run_id="0b7e3c2a-3f41-4c55-9d1e-6a0f2b9c8d71",
    phase="apply",
    attempt=1,
    token="flx_token",
    control_plane_url="http://firstlume.firstlume.svc.cluster.local:8000",
    org_slug="acme",
    stack_slug="network",
)


def test_executor_pods_of_the_chart_hold_no_control_plane_secret(
    rendered: tuple[str, dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, values, documents = rendered
    k8s = launcher_settings(documents).k8s
    control_plane_secret = values["secret"]["existingSecret"] or RELEASE
    pod = manifests.job(k8s, LAUNCH)["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == k8s.service_account
    (container,) = pod["containers"]
    secret_refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"] if "valueFrom" in e}
    assert secret_refs == {manifests.secret_name(LAUNCH.run_id, LAUNCH.phase, LAUNCH.attempt)}
    from_secrets = {source["secretRef"]["name"] for source in container.get("envFrom", [])}
    assert control_plane_secret not in from_secrets and from_secrets == set(
        values["executor"]["envFromSecrets"]
    )
    assert not [v for v in pod["volumes"] if {"secret", "projected", "configMap"} & set(v)]


def test_the_executor_service_account_has_no_token_and_no_role(
    rendered: tuple[str, dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, values, documents = rendered
    k8s = launcher_settings(documents).k8s
    accounts = {doc["metadata"]["name"]: doc for doc in of_kind(documents, "ServiceAccount")}
    if values["executor"]["serviceAccount"]["create"]:
        account = accounts[k8s.service_account]
        assert account["automountServiceAccountToken"] is False
        assert account["metadata"].get("namespace", NAMESPACE) == k8s.namespace
    else:
        assert k8s.service_account not in accounts
    bound = [
        subject
        for binding in of_kind(documents, "RoleBinding") + of_kind(documents, "ClusterRoleBinding")
        for subject in binding["subjects"]
    ]
    assert k8s.service_account not in {subject["name"] for subject in bound}
    assert of_kind(documents, "ClusterRole") == [] and of_kind(documents, "ClusterRoleBinding") == []
    if values["rbac"]["create"]:
        control_plane = values["controlPlane"]["serviceAccount"]["name"] or RELEASE
        assert [(s["kind"], s["name"]) for s in bound] == [("ServiceAccount", control_plane)]


def test_the_chart_refuses_to_hand_executors_the_control_plane_secret() -> None:
    with pytest.raises(helm_python.HelmRenderError, match="executors run untrusted code"):
        render({"executor": {"envFromSecrets": ["cloud-credentials", "firstlume"]}})
    # In another namespace that name is another Secret.
    assert render({"executor": {"namespace": "runs", "envFromSecrets": ["firstlume"]}})
