"""The read-only HTTP API (`/api/v1/…`): job reports, usage, findings, recommendations and
occupancy, for the people the dashboard shows them to.

Light on purpose: the `[api]` section (`app.api.settings`) is loaded with every configuration,
on machines without the `serve` extra, so FastAPI is imported only when the router is built.
`build_router` and `ApiSettings` are the names a server needs:

    from app.api import ApiSettings, build_router
    app.include_router(build_router(lake, ApiSettings.from_config(load_config())))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.api.router import build_router
    from app.api.settings import ApiSettings

__all__ = ["ApiSettings", "build_router"]


def __getattr__(name: str) -> Any:
    if name == "build_router":
        from app.api.router import build_router

        return build_router
    if name == "ApiSettings":
        from app.api.settings import ApiSettings

        return ApiSettings
    raise AttributeError(name)
