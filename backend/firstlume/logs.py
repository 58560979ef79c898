"""How the server logs: one JSON object per line (for a log pipeline), or plain text for a person
at a terminal (FIRSTLUME_LOG_FORMAT=text, as `make run` sets). Every record made while a request
is handled carries that request's id, the one its response returns in X-Request-ID."""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

REQUEST_ID: ContextVar[str | None] = ContextVar("firstlume_request_id", default=None)


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request_id = getattr(record, "request_id", None)
        return f"{text} [request {request_id}]" if request_id else text


# Executors call these every few seconds while a run lasts: at INFO they would drown the log.
ROUTINE_PATHS = ("/api/v1/executor/heartbeat", "/api/v1/executor/logs")


class RoutineAccessAtDebug(logging.Filter):
    """uvicorn's access line of a heartbeat or log upload becomes a DEBUG record: shown only
    when the server logs at debug."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        path = args[2] if len(args) > 2 else ""
        if isinstance(path, str) and path.split("?")[0] in ROUTINE_PATHS:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


def configure(log_format: str, level: str = "info") -> None:
    """The root logger's one handler, on stderr; uvicorn's loggers propagate to it."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("uvicorn.access").addFilter(RoutineAccessAtDebug())
