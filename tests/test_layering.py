"""What the import contracts (`make check`: import-linter, pyproject.toml) cannot see: `api/` holds
nothing of the database package, not even through another module's names, so that a re-export
does not hide an ORM class."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import firstlume.api


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
