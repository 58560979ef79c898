"""No import circle among the services: each module can be read (and imported) after the ones it
names, and none is the centre that everything leans on and that leans back on everything.

Every import counts, wherever it is written: at the top, under TYPE_CHECKING, or inside a
function (where a circle is usually hidden)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import firstlume

PACKAGE = Path(firstlume.__file__).parent
SERVICES = "firstlume.services"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The names a statement imports, as modules or as attributes of modules."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    return [f"{source}.{alias.name}" for alias in node.names] + [source]


def _services_graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in (PACKAGE / "services").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        named: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in _imported(node, module, path.name == "__init__.py"):
                    # `from package import module` names the module; `from module import name`
                    # names the module that holds it.
                    while name and name not in paths:
                        name = name.rpartition(".")[0]
                    if name:
                        named.add(name)
        graph[module] = named - {module}
    return graph


def test_the_graph_sees_the_services_and_their_imports() -> None:
    graph = _services_graph()

    assert {"firstlume.services.context", "firstlume.services.transitions"} <= set(graph)
    assert "firstlume.services.context" in graph["firstlume.services.transitions"]


def test_no_services_module_imports_itself_back() -> None:
    graph = _services_graph()
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        cycle = error.args[1]
        raise AssertionError(f"import circle among {SERVICES}: {' -> '.join(cycle)}") from None
