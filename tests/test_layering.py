"""The direction of imports holds: `api/` maps requests onto services and runs no SQL of its own
(it imports neither SQLAlchemy nor the database package, not even through another module's
names), and the executor, which talks to the control plane over HTTP only, imports nothing of
the server.

Checked on the source (AST), so an import inside a function or under TYPE_CHECKING counts too,
and on the imported modules' names, so that a re-export does not hide an ORM class."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import firstlume.api

PACKAGE = Path(__file__).resolve().parents[1] / "backend" / "firstlume"
# Still annotated with ORM rows until its routes call one use case each (issue 38, item 5).

RULES = {
    "api": ("sqlalchemy", "firstlume.db"),
    "executor": (
        "firstlume.services",
        "firstlume.api",
        "firstlume.db",
        "firstlume.launchers",
        "firstlume.scheduler",
        "firstlume.pubsub",
        "firstlume.app",
    ),
}


def imported_modules(root: Path, path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                package = path.parent.relative_to(root.parent).parts
                base = ".".join(package[: len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found += [(node.lineno, module)]
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def violations(layer: str, root: Path = PACKAGE) -> list[str]:
    forbidden = RULES[layer]
    found = []
    for path in sorted((root / layer).rglob("*.py")):
        for line, module in imported_modules(root, path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(root)}:{line} imports {module}")
    return sorted(set(found))


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports_nothing_it_must_not(layer: str) -> None:
    assert (PACKAGE / layer).is_dir()
    assert violations(layer) == []


def test_the_check_sees_imports_anywhere_in_a_module(tmp_path: Path) -> None:
    root = tmp_path / "firstlume"
    (root / "api" / "rest").mkdir(parents=True)
    (root / "api" / "rest" / "probe.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from firstlume.db.models import Run\n"
        "def f():\n    import sqlalchemy.orm\n"
        "from ...db import engine\n"
        "from firstlume.services.reads import Run\n"
    )
    assert violations("api", root) == [
        "api/rest/probe.py:3 imports firstlume.db.models",
        "api/rest/probe.py:3 imports firstlume.db.models.Run",
        "api/rest/probe.py:5 imports sqlalchemy.orm",
        "api/rest/probe.py:6 imports firstlume.db",
        "api/rest/probe.py:6 imports firstlume.db.engine",
    ]


def of_the_database(value: object) -> bool:
    """A module, class or function of the database package (an ORM class, its engine, ...)."""
    name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
    return isinstance(name, str) and (name == "firstlume.db" or name.startswith("firstlume.db."))


def test_no_api_module_holds_anything_of_the_database_package() -> None:
    held = []
    for info in pkgutil.walk_packages(firstlume.api.__path__, "firstlume.api."):
        module = importlib.import_module(info.name)
        held += [f"{info.name}.{name}" for name, value in vars(module).items() if of_the_database(value)]
    assert held == []


def test_the_database_check_sees_re_exported_orm_classes() -> None:
    from firstlume.db import models
    from firstlume.services.reads.runs import RunRecord

    assert of_the_database(models.Run) and of_the_database(models) and of_the_database(models.new_id)
    assert not of_the_database(RunRecord) and not of_the_database(firstlume.api)
