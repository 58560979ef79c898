"""`-json` UI messages as the text a person would have read without -json."""

from __future__ import annotations

import json
from typing import Any

SENSITIVE = "(sensitive)"


def readable_message(message: dict[str, Any]) -> str:
    """One message as its log text, ending with a newline ("" for a message that shows nothing)."""
    kind = message.get("type")
    if kind == "outputs":
        return render_outputs(message.get("outputs") or {})
    text = str(message.get("@message", ""))
    diagnostic = message.get("diagnostic")
    if kind == "diagnostic" and isinstance(diagnostic, dict):
        details = []
        if diagnostic.get("address"):
            details.append(f"  with {diagnostic['address']}")
        range_ = diagnostic.get("range")
        if isinstance(range_, dict) and range_.get("filename"):
            line = (range_.get("start") or {}).get("line")
            details.append(f"  on {range_['filename']}" + (f" line {line}" if line else ""))
        if diagnostic.get("detail"):
            details.append("")
            details.extend("  " + line for line in str(diagnostic["detail"]).splitlines())
        if details:
            text += "\n" + "\n".join(details)
    return text + "\n"


def render_outputs(outputs: dict[str, Any]) -> str:
    """The root module's outputs as `terraform apply` prints them after "Apply complete!", except
    that a sensitive one reads `(sensitive)`. The `-json` message never carries a sensitive value;
    an output whose value is null is not shown (as Terraform does)."""
    lines = []
    for name in sorted(outputs):
        output = outputs[name] if isinstance(outputs[name], dict) else {}
        if output.get("sensitive"):
            lines.append(f"{name} = {SENSITIVE}")
        elif output.get("value") is not None:
            lines.append(f"{name} = {render_value(output['value'], output.get('type'))}")
    return "\nOutputs:\n\n" + "\n".join(lines) + "\n" if lines else ""


def render_value(value: Any, type_: Any = None, indent: str = "") -> str:
    """A value in Terraform's own notation; `type_` is its type as `-json` describes it (e.g.
    "string", ["list", "string"], ["object", {...}]), which decides tolist/toset/tomap."""
    kind, inner = _type_parts(type_)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        if "\n" in value:
            return "<<EOT\n" + value + "\nEOT"
        return json.dumps(value, ensure_ascii=False)
    inside = indent + "  "
    if isinstance(value, list):
        if not value:
            return "[]"
        types = inner if kind == "tuple" and isinstance(inner, list) else [inner] * len(value)
        items = "".join(
            f"{inside}{render_value(v, t, inside)},\n" for v, t in zip(value, types, strict=False)
        )
        body = f"[\n{items}{indent}]"
        return {"list": f"tolist({body})", "set": f"toset({body})"}.get(kind or "", body)
    if isinstance(value, dict):
        if not value:
            return "{}"
        fields = inner if kind == "object" and isinstance(inner, dict) else dict.fromkeys(value, inner)
        items = "".join(
            f"{inside}{json.dumps(k, ensure_ascii=False)} = {render_value(value[k], fields.get(k), inside)}\n"
            for k in sorted(value)
        )
        body = f"{{\n{items}{indent}}}"
        return f"tomap({body})" if kind == "map" else body
    return json.dumps(value)


def _type_parts(type_: Any) -> tuple[str | None, Any]:
    if isinstance(type_, list) and len(type_) == 2 and isinstance(type_[0], str):
        return type_[0], type_[1]
    return (type_ if isinstance(type_, str) else None), None
