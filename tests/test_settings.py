"""One settings model: every FIRSTLUME_* variable typed, checked at start-up with a message that
names it, and documented in the README from the model itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlume import settings_docs
from firstlume.settings import (
    KubernetesSettings,
    Settings,
    SettingsError,
    Toleration,
    env_name,
)

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_keep_their_documented_values(tmp_path: Path) -> None:
    settings = Settings.from_env({"FIRSTLUME_DATA_DIR": str(tmp_path)})
    assert settings.data_dir == tmp_path.resolve()
    assert settings.database_url == f"sqlite+aiosqlite:///{tmp_path.resolve() / 'firstlume.db'}"
    assert settings.is_sqlite
    assert settings.encryption_keys == ()
    assert settings.heartbeat_timeout == 600
    assert settings.scheduler_enabled is True
    assert settings.scheduler_interval == 1
    assert settings.launcher == "local"
    assert settings.public_url == "http://127.0.0.1:8000"
    assert settings.pubsub_url == "memory://"
    assert settings.executor_heartbeat_interval == 10
    assert settings.k8s == KubernetesSettings()


def test_the_data_dir_defaults_to_dot_firstlume_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Settings.from_env({}).data_dir == tmp_path.resolve() / ".firstlume"


def test_every_variable_is_read_from_the_given_mapping_not_the_process(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "FIRSTLUME_DATA_DIR": str(tmp_path),
            "FIRSTLUME_DATABASE_URL": "postgresql+asyncpg://firstlume:pw@db:5432/firstlume",
            "FIRSTLUME_ENCRYPTION_KEYS": " k1 , k2,",
            "FIRSTLUME_HEARTBEAT_TIMEOUT": "30.5",
            "FIRSTLUME_SCHEDULER": "off",
            "FIRSTLUME_LAUNCHER": "kubernetes",
            "FIRSTLUME_PUBLIC_URL": "http://firstlume.runs.svc:8000/",
            "FIRSTLUME_SCHEDULER_INTERVAL": "0.2",
            "FIRSTLUME_EXECUTOR_HEARTBEAT_INTERVAL": "3",
            "FIRSTLUME_K8S_IMAGE": "registry.example/firstlume:2",
        }
    )
    assert settings.database_url == "postgresql+asyncpg://firstlume:pw@db:5432/firstlume"
    assert not settings.is_sqlite
    # The broadcaster follows the database unless given.
    assert settings.pubsub_url == "postgres://firstlume:pw@db:5432/firstlume"
    assert settings.encryption_keys == ("k1", "k2")
    assert settings.heartbeat_timeout == 30.5
    assert settings.scheduler_enabled is False
    assert settings.launcher == "kubernetes"
    assert settings.public_url == "http://firstlume.runs.svc:8000"
    assert settings.scheduler_interval == 0.2
    assert settings.executor_heartbeat_interval == 3
    assert settings.k8s.image == "registry.example/firstlume:2"
    assert "public_url" in settings.model_fields_set  # `serve` keeps a URL that was given


@pytest.mark.parametrize(("raw", "expected"), [("on", True), ("yes", True), ("1", True), ("OFF", False)])
def test_the_scheduler_switch_reads_on_and_off(raw: str, expected: bool) -> None:
    assert Settings.from_env({"FIRSTLUME_SCHEDULER": raw}).scheduler_enabled is expected


def test_a_blank_variable_keeps_its_default() -> None:
    settings = Settings.from_env(
        {"FIRSTLUME_DATABASE_URL": "", "FIRSTLUME_HEARTBEAT_TIMEOUT": " ", "FIRSTLUME_K8S_NAMESPACE": ""}
    )
    assert settings.is_sqlite and settings.heartbeat_timeout == 600
    assert settings.k8s.namespace == "default"


def test_settings_are_frozen() -> None:
    settings = Settings.from_env({})
    with pytest.raises(ValueError):
        settings.heartbeat_timeout = 1  # type: ignore[misc]


# -- the Kubernetes launcher's settings ---------------------------------------------------------


def test_kubernetes_settings_read_every_variable() -> None:
    k8s = Settings.from_env(
        {
            "FIRSTLUME_K8S_NAMESPACE": "runs",
            "FIRSTLUME_K8S_IMAGE": "registry.example/firstlume:2",
            "FIRSTLUME_K8S_IMAGE_PULL_POLICY": "Always",
            "FIRSTLUME_K8S_IMAGE_PULL_SECRETS": "a, b",
            "FIRSTLUME_K8S_SERVICE_ACCOUNT": "runner",
            "FIRSTLUME_K8S_CPU_REQUEST": "1",
            "FIRSTLUME_K8S_CPU_LIMIT": "2",
            "FIRSTLUME_K8S_MEMORY_REQUEST": "1Gi",
            "FIRSTLUME_K8S_MEMORY_LIMIT": "",
            "FIRSTLUME_K8S_WORK_DIR_SIZE_LIMIT": "20Gi",
            "FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS": "7200",
            "FIRSTLUME_K8S_TTL_SECONDS_AFTER_FINISHED": "60",
            "FIRSTLUME_K8S_NODE_SELECTOR": '{"pool": "runners"}',
            "FIRSTLUME_K8S_TOLERATIONS": '[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]',
            "FIRSTLUME_K8S_POD_ANNOTATIONS": '{"a": "b"}',
            "FIRSTLUME_K8S_ENV_FROM_SECRETS": "cloud",
            "FIRSTLUME_K8S_RUN_AS_USER": "1234",
            "FIRSTLUME_K8S_INSTANCE": "prod",
            "FIRSTLUME_K8S_KUBECONFIG": "/etc/kube/config",
            "FIRSTLUME_K8S_CONTEXT": "admin@prod",
            "FIRSTLUME_K8S_LAUNCH_GRACE_SECONDS": "30",
            "FIRSTLUME_K8S_IMAGE_PULL_GRACE_SECONDS": "45.5",
            "FIRSTLUME_K8S_WATCH_TIMEOUT_SECONDS": "60",
            "FIRSTLUME_K8S_HEALTH_CHECK_INTERVAL_SECONDS": "5",
        }
    ).k8s
    assert k8s == KubernetesSettings(
        image="registry.example/firstlume:2",
        namespace="runs",
        image_pull_policy="Always",
        image_pull_secrets=("a", "b"),
        service_account="runner",
        cpu_request="1",
        cpu_limit="2",
        memory_request="1Gi",
        memory_limit=None,  # explicitly empty: no limit, not the default
        work_dir_size_limit="20Gi",
        active_deadline_seconds=7200,
        ttl_seconds_after_finished=60,
        node_selector={"pool": "runners"},
        tolerations=(Toleration(key="dedicated", operator="Exists", effect="NoSchedule"),),
        pod_annotations={"a": "b"},
        env_from_secrets=("cloud",),
        run_as_user=1234,
        instance="prod",
        kubeconfig="/etc/kube/config",
        context="admin@prod",
        launch_grace_seconds=30.0,
        image_pull_grace_seconds=45.5,
        watch_timeout_seconds=60,
        health_check_interval_seconds=5.0,
    )
    assert k8s.tolerations[0].manifest() == {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}


def test_every_kubernetes_field_is_read_from_a_firstlume_k8s_variable() -> None:
    for name in KubernetesSettings.model_fields:
        assert env_name(KubernetesSettings, name) == f"FIRSTLUME_K8S_{name.upper()}"


def test_kubernetes_defaults_need_only_the_image() -> None:
    k8s = Settings.from_env({"FIRSTLUME_LAUNCHER": "kubernetes", "FIRSTLUME_K8S_IMAGE": "firstlume:1"}).k8s
    assert k8s.namespace == "default"
    assert k8s.kubeconfig is None  # in-cluster
    assert (k8s.cpu_request, k8s.memory_request, k8s.memory_limit) == ("250m", "512Mi", "2Gi")
    assert k8s.active_deadline_seconds == 10800 and k8s.ttl_seconds_after_finished == 3600


# -- start-up errors name the variable and what it expects --------------------------------------


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"FIRSTLUME_DATABASE_URL": "mysql://u:pw@db/x"}, "FIRSTLUME_DATABASE_URL must start with sqlite+aiosqlite://"),
        ({"FIRSTLUME_HEARTBEAT_TIMEOUT": "ten"}, "FIRSTLUME_HEARTBEAT_TIMEOUT must be a number (got 'ten')"),
        ({"FIRSTLUME_HEARTBEAT_TIMEOUT": "0"}, "FIRSTLUME_HEARTBEAT_TIMEOUT must be greater than 0"),
        ({"FIRSTLUME_SCHEDULER": "maybe"}, "FIRSTLUME_SCHEDULER must be on or off (got 'maybe')"),
        ({"FIRSTLUME_SCHEDULER_INTERVAL": "-1"}, "FIRSTLUME_SCHEDULER_INTERVAL must be greater than 0"),
        ({"FIRSTLUME_LAUNCHER": "docker"}, "FIRSTLUME_LAUNCHER must be one of 'local', 'kubernetes' or 'simulated'"),
        ({"FIRSTLUME_LAUNCHER": "kubernetes"}, "FIRSTLUME_K8S_IMAGE is required with FIRSTLUME_LAUNCHER=kubernetes"),
        ({"FIRSTLUME_K8S_IMAGE_PULL_POLICY": "Sometimes"}, "FIRSTLUME_K8S_IMAGE_PULL_POLICY must be one of"),
        ({"FIRSTLUME_K8S_MEMORY_LIMIT": "lots"}, "FIRSTLUME_K8S_MEMORY_LIMIT must be a Kubernetes quantity"),
        ({"FIRSTLUME_K8S_CPU_REQUEST": "-1"}, "FIRSTLUME_K8S_CPU_REQUEST must be a Kubernetes quantity"),
        ({"FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS": "1h"}, "FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS must be a whole number"),
        ({"FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS": "0"}, "FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS must be at least 1"),
        ({"FIRSTLUME_K8S_TTL_SECONDS_AFTER_FINISHED": "-5"}, "FIRSTLUME_K8S_TTL_SECONDS_AFTER_FINISHED must be at least 0"),
        ({"FIRSTLUME_K8S_NODE_SELECTOR": "pool=runners"}, "FIRSTLUME_K8S_NODE_SELECTOR is not valid JSON"),
        ({"FIRSTLUME_K8S_NODE_SELECTOR": '["pool"]'}, "FIRSTLUME_K8S_NODE_SELECTOR must be a JSON object"),
        ({"FIRSTLUME_K8S_NODE_SELECTOR": '{"pool": 3}'}, "FIRSTLUME_K8S_NODE_SELECTOR.pool must be a string"),
        ({"FIRSTLUME_K8S_TOLERATIONS": '{"key": "a"}'}, "FIRSTLUME_K8S_TOLERATIONS must be a JSON list"),
        ({"FIRSTLUME_K8S_TOLERATIONS": '[{"key": "a", "operator": "In"}]'}, "FIRSTLUME_K8S_TOLERATIONS[0].operator must be one of 'Exists' or 'Equal'"),
        ({"FIRSTLUME_K8S_TOLERATIONS": '[{"key": "a", "effect": "Never"}]'}, "FIRSTLUME_K8S_TOLERATIONS[0].effect must be one of"),
        ({"FIRSTLUME_K8S_TOLERATIONS": '[{"keys": "a"}]'}, "FIRSTLUME_K8S_TOLERATIONS[0].keys is not a known field"),
        ({"FIRSTLUME_K8S_TOLERATIONS": '[{"operator": "Equal"}]'}, "with operator Equal needs a key"),
        ({"FIRSTLUME_K8S_TOLERATIONS": '[{"operator": "Exists", "value": "x"}]'}, "with operator Exists takes no value"),
        ({"FIRSTLUME_K8S_TOLERATIONS": '[{"key": "a", "tolerationSeconds": true}]'}, "FIRSTLUME_K8S_TOLERATIONS[0].tolerationSeconds must be"),
        ({"FIRSTLUME_K8S_NAMESPACE": "Runs_Namespace"}, "FIRSTLUME_K8S_NAMESPACE must be a DNS-1123 label"),
        ({"FIRSTLUME_K8S_ENV_FROM_SECRETS": "good,Not Good"}, "FIRSTLUME_K8S_ENV_FROM_SECRETS must hold Kubernetes object names"),
        ({"FIRSTLUME_K8S_SERVICE_ACCOUNT": "Runner"}, "FIRSTLUME_K8S_SERVICE_ACCOUNT must hold Kubernetes object names"),
        ({"FIRSTLUME_K8S_RUN_AS_USER": "0"}, "FIRSTLUME_K8S_RUN_AS_USER must be at least 1"),
        ({"FIRSTLUME_K8S_INSTANCE": "two words"}, "FIRSTLUME_K8S_INSTANCE must be a Kubernetes label value"),
        ({"FIRSTLUME_K8S_LAUNCH_GRACE_SECONDS": "soon"}, "FIRSTLUME_K8S_LAUNCH_GRACE_SECONDS must be a number"),
    ],
)  # fmt: skip
def test_a_bad_value_is_refused_with_the_variable_and_what_it_expects(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(environ)
    assert message in str(raised.value)


def test_every_bad_variable_is_named_at_once() -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"FIRSTLUME_SCHEDULER": "maybe", "FIRSTLUME_K8S_RUN_AS_USER": "root"})
    lines = str(raised.value).splitlines()
    assert [line.split()[0] for line in lines] == ["FIRSTLUME_K8S_RUN_AS_USER", "FIRSTLUME_SCHEDULER"]


def test_a_refused_secret_is_never_echoed() -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"FIRSTLUME_DATABASE_URL": "mysql://firstlume:hunter2@db/firstlume"})
    assert "hunter2" not in str(raised.value)


# -- the README documents the model ------------------------------------------------------------


def test_the_readme_tables_are_generated_from_the_model() -> None:
    readme = (ROOT / "README.md").read_text()
    parts = settings_docs.generated_parts(readme)
    assert set(parts) == set(settings_docs.TABLES)
    for table, text in parts.items():
        assert text == settings_docs.render(table), (
            f"README.md's {table} table is stale: run `firstlume settings-docs --write README.md`"
        )


def test_the_tables_name_every_variable_with_its_meaning() -> None:
    core = settings_docs.render("settings")
    for name, field in Settings.model_fields.items():
        if name != "k8s":
            assert f"| `{env_name(Settings, name)}` |" in core
            assert field.description and field.description in core
    k8s = settings_docs.render("k8s-settings")
    for name, field in KubernetesSettings.model_fields.items():
        assert f"| `{env_name(KubernetesSettings, name)}` |" in k8s
        assert field.description and field.description in k8s
