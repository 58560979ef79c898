"""JSON response bodies encoded by orjson (domain/json_output.py says why)."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse as StarletteJSONResponse

from firstlume.domain.json_output import dumps


class JSONResponse(StarletteJSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content)
