"""The API's errors: every one is JSON `{"error": "<one line>", "status": <code>}`.

`JsonErrorRoute` is the route class of the API's router: it turns what a handler raises
(ApiError, a query parameter FastAPI refused, a lake error) into that body inside the router
itself, so the errors look the same whatever application the router is mounted in (exception
handlers would belong to the application). Nothing in an error echoes a token, and a lake
error names its file to managers only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from warehouse.errors import WarehouseError

__all__ = ["ApiError", "JsonErrorRoute", "error_response"]

log = logging.getLogger("gpuledger.api")


class ApiError(Exception):
    """A request the API refuses or cannot answer: the status and one line saying why."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


# An error names what it was asked (a job id, a user): at most this much of it, so that a
# 60,000-character id is not a 60 KB answer.
MAX_MESSAGE = 300


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    line = " ".join(message.split())  # one line
    if len(line) > MAX_MESSAGE:
        line = line[: MAX_MESSAGE - 1] + "…"
    return JSONResponse({"error": line, "status": status}, status, headers=dict(headers or {}))


def _validation_message(exc: RequestValidationError) -> str:
    """'limit: Input should be less than or equal to 1000' (each refused parameter named)."""
    parts = []
    for error in exc.errors():
        where = [str(p) for p in error.get("loc", ()) if p not in ("query", "path", "header")]
        parts.append(f"{'.'.join(where) or 'request'}: {error.get('msg', 'not valid')}")
    return "; ".join(parts) or "the request is not valid"


def _lake_error(request: Request, exc: WarehouseError) -> str:
    """What a lake error tells: the file and the engine's words to a manager, as /healthz and
    /metrics do (app.serve.server); to anyone else that the lake cannot be read now (a path
    under the lake and DuckDB's text are not every user's to read)."""
    viewer = getattr(request.state, "viewer", None)
    if viewer is not None and viewer.is_manager:
        return str(exc)
    return "the lake cannot be read now; an administrator must look at the server's log"


class JsonErrorRoute(APIRoute):
    """An APIRoute whose errors are the API's JSON errors."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiError as exc:
                return error_response(exc.status, exc.message, exc.headers)
            except RequestValidationError as exc:
                return error_response(422, _validation_message(exc))
            except HTTPException as exc:
                return error_response(exc.status_code, str(exc.detail), exc.headers)
            except WarehouseError as exc:  # a damaged or unreadable lake file
                log.error("lake error on %s: %s", request.url.path, exc)
                return error_response(503, _lake_error(request, exc))
            except Exception:
                log.exception("internal error on %s", request.url.path)
                return error_response(500, "internal error (the server's log says more)")

        return route
