"""The FastAPI application of `gpuledger serve`: `/metrics` and `/healthz` over one lake.

Other routers (the read-only API under /api/v1) are mounted beside them by passing them to
`create_app`; this module owns only `/metrics` and `/healthz`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from app.serve.cache import MetricsCache
from app.serve.settings import ServeSettings
from warehouse.lake import Lake

__all__ = ["EXPOSITION_TYPE", "create_app"]

EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def create_app(
    lake: Lake,
    settings: ServeSettings,
    *,
    routers: Sequence[APIRouter] = (),
    cache: MetricsCache | None = None,
    guard: Callable[[Request], Response | None] | None = None,
) -> FastAPI:
    """The application: the figures are read at startup (before the first request is
    answered) and refreshed in the background while the lake changes. `cache`: a seam for
    tests (default: a MetricsCache of `lake`). `guard`: who may read /metrics (it returns the
    refusal to send, or None), e.g. app.api.auth.managers_only beside the API; default:
    whoever reaches the address."""
    metrics = cache or MetricsCache(lake, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        metrics.start()
        try:
            yield
        finally:
            metrics.stop()

    app = FastAPI(
        title="gpuledger",
        summary="GPU-cluster usage attributed to jobs, users and accounts.",
        lifespan=lifespan,
        # the API's own document is at /api/v1/openapi.json; no docs pages (CDN scripts)
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.metrics = metrics
    app.state.lake = lake.root

    # HEAD as well: a health probe or load balancer that checks with HEAD got 405
    @app.api_route(
        "/metrics",
        methods=["GET", "HEAD"],
        response_class=PlainTextResponse,
        include_in_schema=False,
    )
    async def read_metrics(request: Request) -> Response:
        """The lake's figures in Prometheus' text format (read from memory). On the event
        loop, not in the worker threads the API's reads wait for: 50 clients asking for job
        reports made a scrape take 2 s (5 ms alone)."""
        refused = guard(request) if guard is not None else None
        if refused is not None:
            return refused
        return PlainTextResponse(metrics.text, media_type=EXPOSITION_TYPE)

    @app.api_route("/healthz", methods=["GET", "HEAD"], include_in_schema=False)
    async def read_health(request: Request) -> JSONResponse:
        """200 once the figures were read from the lake ("ok"; "stale" while the last reading
        failed and the figures before it are served); 503 before ("starting", or "failing"
        when no reading succeeded). The lake's path and the reading's `error` (file names,
        the engine's message) are told to whoever may read /metrics: with a `guard`, a probe
        without credentials gets the status alone."""
        read, error = metrics.refreshes > 0, metrics.error
        status = ("stale" if read else "failing") if error else ("ok" if read else "starting")
        body: dict[str, str] = {"status": status}
        if guard is None or guard(request) is None:
            body["lake"] = str(lake.root)
            if error is not None:
                body["error"] = error
        return JSONResponse(body, status_code=200 if read else 503)

    for router in routers:
        app.include_router(router)
    return app
