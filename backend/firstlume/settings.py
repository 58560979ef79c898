"""Typed settings, read once from FIRSTLUME_* environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class SettingsError(ValueError):
    pass


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be on or off (got {raw!r}).")


def _positive_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds (got {raw!r}).") from None
    if value <= 0:
        raise SettingsError(f"{name} must be greater than zero (got {raw!r}).")
    return value


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    database_url: str
    encryption_keys: tuple[str, ...] = ()
    heartbeat_timeout: float = 600.0
    scheduler_enabled: bool = True
    scheduler_interval: float = 1.0
    launcher: str = "local"
    public_url: str = "http://127.0.0.1:8000"
    pubsub_url: str = "memory://"
    executor_heartbeat_interval: float = 10.0
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        data_dir = Path(env.get("FIRSTLUME_DATA_DIR", "./.firstlume")).resolve()
        database_url = env.get("FIRSTLUME_DATABASE_URL") or f"sqlite+aiosqlite:///{data_dir / 'firstlume.db'}"
        if not database_url.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise SettingsError(
                "FIRSTLUME_DATABASE_URL must start with sqlite+aiosqlite:// or postgresql+asyncpg://."
            )
        keys = tuple(k.strip() for k in env.get("FIRSTLUME_ENCRYPTION_KEYS", "").split(",") if k.strip())
        launcher = env.get("FIRSTLUME_LAUNCHER", "local")
        if launcher not in ("local", "kubernetes"):
            raise SettingsError(f"FIRSTLUME_LAUNCHER must be local or kubernetes (got {launcher!r}).")
        default_pubsub = "memory://"
        if database_url.startswith("postgresql"):
            default_pubsub = "postgres://" + database_url.split("://", 1)[1]
        return cls(
            data_dir=data_dir,
            database_url=database_url,
            encryption_keys=keys,
            heartbeat_timeout=_positive_float(
                "FIRSTLUME_HEARTBEAT_TIMEOUT", env.get("FIRSTLUME_HEARTBEAT_TIMEOUT", "600")
            ),
            scheduler_enabled=_bool("FIRSTLUME_SCHEDULER", env.get("FIRSTLUME_SCHEDULER", "on")),
            scheduler_interval=_positive_float(
                "FIRSTLUME_SCHEDULER_INTERVAL", env.get("FIRSTLUME_SCHEDULER_INTERVAL", "1")
            ),
            launcher=launcher,
            public_url=env.get("FIRSTLUME_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/"),
            pubsub_url=env.get("FIRSTLUME_PUBSUB_URL", default_pubsub),
            executor_heartbeat_interval=_positive_float(
                "FIRSTLUME_EXECUTOR_HEARTBEAT_INTERVAL",
                env.get("FIRSTLUME_EXECUTOR_HEARTBEAT_INTERVAL", "10"),
            ),
            environ=env,
        )
