"""config.yaml at the stack path: defaults, values, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlume.executor.config_file import ConfigError, StackConfig, load_config, parse_config


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "config.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def test_missing_config_file_gives_the_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path)

    assert config == StackConfig(engine="terraform", variables={}, environment={}, text=None)


def test_empty_config_file_gives_the_defaults_and_keeps_its_text(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "# nothing yet\n"))

    assert (config.engine, config.variables, config.environment) == ("terraform", {}, {})
    assert config.text == "# nothing yet\n"


def test_documented_example_is_read_with_its_values_and_text(tmp_path: Path) -> None:
    text = (
        "engine: tofu\n"
        "variables:\n"
        "  region: eu-west-1\n"
        "  instance_count: 2\n"
        "  tags: {team: net, cost: [a, b]}\n"
        "  enabled: true\n"
        "environment:\n"
        '  TF_LOG: ""\n'
        "  AWS_REGION: eu-west-1\n"
    )

    config = load_config(write(tmp_path, text))

    assert config.engine == "tofu"
    assert config.variables == {
        "region": "eu-west-1",
        "instance_count": 2,
        "tags": {"team": "net", "cost": ["a", "b"]},
        "enabled": True,
    }
    assert config.environment == {"TF_LOG": "", "AWS_REGION": "eu-west-1"}
    assert config.text == text


@pytest.mark.parametrize("engine", ["terraform", "tofu", "terragrunt"])
def test_each_supported_engine_is_accepted(tmp_path: Path, engine: str) -> None:
    assert load_config(write(tmp_path, f"engine: {engine}\n")).engine == engine


def test_unknown_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown key 'backend'; expected only engine, variables, environment, watch"
    ):
        load_config(write(tmp_path, "backend: s3\n"))


def test_wrong_engine_names_the_key_and_the_choices(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"'engine' must be one of terraform, tofu, terragrunt; got 'pulumi'"
    ):
        load_config(write(tmp_path, "engine: pulumi\n"))


def test_variables_that_are_not_a_mapping_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'variables' must be a mapping .*; got a list"):
        load_config(write(tmp_path, "variables:\n  - region\n"))


def test_variable_value_that_json_cannot_carry_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'variables.since' must be a JSON value .*; got date"):
        load_config(write(tmp_path, "variables:\n  since: 2024-01-01\n"))


def test_environment_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'environment' must be a mapping .*; got a string"):
        load_config(write(tmp_path, "environment: TF_LOG=debug\n"))


def test_non_string_environment_value_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"'environment.TF_PARALLELISM' must be a string .*; got a number \(4\)"
    ):
        load_config(write(tmp_path, "environment:\n  TF_PARALLELISM: 4\n"))


def test_invalid_yaml_names_the_line_of_the_problem(tmp_path: Path) -> None:
    text = "engine: terraform\nvariables:\n  region: [eu\n  other: 1\n"

    with pytest.raises(ConfigError, match=r"config.yaml is not valid YAML: line 4, column \d+"):
        load_config(write(tmp_path, text))


def test_top_level_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"must be a mapping with the keys engine, variables, environment, watch; got a list",
    ):
        load_config(write(tmp_path, "- engine\n"))


def test_watch_is_a_list_of_globs() -> None:
    assert parse_config('watch: ["modules/**", "shared/*.tf"]\n').watch == ["modules/**", "shared/*.tf"]
    with pytest.raises(ConfigError, match=r"'watch' must be a list of path globs"):
        parse_config("watch: modules/**\n")
    with pytest.raises(ConfigError, match=r"'watch' must be a list of path globs"):
        parse_config("watch: [1]\n")
