"""`create_api_app`: a FastAPI application serving the API alone, for tests; `gpuledger
serve` mounts the same router next to /metrics."""

from fastapi import FastAPI

from app.api.reader import LakeReader
from app.api.router import build_router
from app.api.settings import ApiSettings
from warehouse.lake import Lake

__all__ = ["create_api_app"]


def create_api_app(
    lake: Lake, settings: ApiSettings, *, reader: LakeReader | None = None
) -> FastAPI:
    """The API's routes in an application of their own (its OpenAPI at /api/v1/openapi.json;
    no interactive docs pages, which would load scripts from a CDN)."""
    app = FastAPI(title="gpuledger API", openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(build_router(lake, settings, reader=reader))
    return app
