"""`make chart`: the Helm chart renders with its default values and `helm lint --strict` finds
nothing, by Helm's own engine in process (helm-python-sdk: no helm binary).

The chart's behaviour (the manifests over a matrix of values, validated against Kubernetes'
schemas) is tests/test_helm_chart.py's; this is the quick gate that it renders at all."""

from __future__ import annotations

import sys
from pathlib import Path

import helm_python
import yaml

CHART = Path(__file__).resolve().parents[1] / "helm" / "firstlume"
NAMESPACE = "firstlume"


def main() -> int:
    with helm_python.Chart.load(CHART) as chart:
        rendered = chart.render({}, name="firstlume", namespace=NAMESPACE, is_install=True)
    manifests = [
        doc
        for path, text in rendered.items()
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    report = helm_python.lint(CHART, {}, strict=True, namespace=NAMESPACE)
    problems = [message for message in report["messages"] if message["severity"] >= 2]
    if report["errors"] or problems or not manifests:
        print(f"helm/firstlume: lint found {report['errors'] + problems}", file=sys.stderr)
        return 1
    print(f"helm/firstlume: {len(manifests)} manifests rendered, lint clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
