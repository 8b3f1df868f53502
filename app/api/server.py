"""`create_api_app`: a FastAPI application serving the API alone (tests, and until it is
mounted into `gpuledger serve`), and `python -m app.api.server` to run it.

    python -m app.api.server --lake /data/lake --port 8080
"""

from pathlib import Path

import click
from fastapi import FastAPI

from app.api.reader import LakeReader
from app.api.router import build_router
from app.api.settings import ApiSettings

__all__ = ["create_api_app"]


def create_api_app(
    lake: Path, settings: ApiSettings, *, reader: LakeReader | None = None
) -> FastAPI:
    """The API's routes in an application of their own (its OpenAPI at /api/v1/openapi.json;
    no interactive docs pages, which would load scripts from a CDN)."""
    app = FastAPI(title="gpuledger API", openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(build_router(lake, settings, reader=reader))
    return app


@click.command()
@click.option("--lake", type=click.Path(path_type=Path), default=None, help="Lake root.")
@click.option("--address", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
def main(lake: Path | None, address: str, port: int) -> None:
    """Serve the read-only HTTP API (/api/v1) of the lake, per the configuration's [api]."""
    import uvicorn

    from app.config import ConfigError, lake_root, load_config

    try:
        settings = ApiSettings.from_config(load_config())
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if not settings.enabled:
        raise click.ClickException(
            "nobody could sign in: set [api] tokens_file (or trusted_user_header)"
        )
    root = lake or lake_root()
    # the router's lifespan opens and warms the lake before the first request is taken
    uvicorn.run(create_api_app(root, settings), host=address, port=port)


if __name__ == "__main__":
    main()
