"""The README's configuration tables, rendered from the settings model (`firstlume settings-docs`).

Each table sits between two markers in README.md, so `--write` replaces exactly the generated
part and a test can tell when the README is stale."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from firstlume.settings import K8S_PREFIX, KubernetesSettings, Settings, env_name, field_doc

TABLES = ("settings", "k8s-settings")


def _default(field: FieldInfo) -> str:
    extra = field_doc(field)
    if "default_text" in extra:
        return str(extra["default_text"])
    value = field.get_default(call_default_factory=True)
    if value is None or value in ((), {}, ""):
        return "none"
    if isinstance(value, bool):
        return "`on`" if value else "`off`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _helm(field: FieldInfo) -> str:
    helm = field_doc(field).get("helm")
    if helm is None:
        return ""
    return helm if " " in helm and "`" not in helm else f"`{helm}`"


def _rows(model: type[BaseSettings], skip: tuple[str, ...] = ()) -> list[tuple[str, FieldInfo]]:
    return [(name, field) for name, field in model.model_fields.items() if name not in skip]


def settings_table() -> str:
    lines = ["| variable | default | meaning | Helm value |", "|---|---|---|---|"]
    for name, field in _rows(Settings, skip=("k8s",)):
        lines.append(
            f"| `{env_name(Settings, name)}` | {_default(field)} | {field.description} | {_helm(field)} |"
        )
    k8s = Settings.model_fields["k8s"]
    lines.append(f"| `{K8S_PREFIX}*` | | {k8s.description} | |")
    return "\n".join(lines)


def k8s_settings_table() -> str:
    lines = ["| variable | default | Helm value (its default) | meaning |", "|---|---|---|---|"]
    for name, field in _rows(KubernetesSettings):
        helm = _helm(field)
        chart_default = field_doc(field).get("helm_default")
        if helm and chart_default and chart_default != field_doc(field).get("helm"):
            helm += f" ({chart_default})"
        lines.append(
            f"| `{env_name(KubernetesSettings, name)}` | {_default(field)} | {helm} | {field.description} |"
        )
    return "\n".join(lines)


def render(table: str) -> str:
    return {"settings": settings_table, "k8s-settings": k8s_settings_table}[table]()


def _markers(table: str) -> tuple[str, str]:
    return f"<!-- generated: {table} (firstlume settings-docs) -->", f"<!-- end: {table} -->"


def _pattern(table: str) -> re.Pattern[str]:
    start, end = _markers(table)
    return re.compile(rf"({re.escape(start)}\n).*?({re.escape(end)})", re.DOTALL)


def generated_parts(text: str) -> dict[str, str]:
    """The tables as they stand in a README's text, by name; a missing table is absent."""
    found = {}
    for table in TABLES:
        match = _pattern(table).search(text)
        if match:
            found[table] = text[match.end(1) : match.start(2)].removesuffix("\n")
    return found


def update(text: str) -> str:
    """`text` with each table between its markers replaced by the current one."""
    for table in TABLES:
        match = _pattern(table).search(text)
        if match is None:
            start, end = _markers(table)
            raise ValueError(f"README has no '{start}' … '{end}' block")
        text = text[: match.end(1)] + render(table) + "\n" + text[match.start(2) :]
    return text


def write(readme: Path) -> bool:
    """Rewrites the tables in `readme`; True when something changed."""
    before = readme.read_text()
    after = update(before)
    if after != before:
        readme.write_text(after)
    return after != before
