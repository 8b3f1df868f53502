"""`build_router`: the read-only HTTP API, `/api/v1/…`, as one FastAPI router.

Every route is GET, answers JSON, and asks who is calling first (app.api.auth): a user sees
only their own jobs, usage and findings, a manager everything, as on the dashboard; cluster
policy recommendations are for managers only, as on the dashboard's Alerts page; occupancy
(GPUs by state) is the cluster's, shown to everyone as on the Overview. Every value reaches
SQL as a bound `$param` of a shipped query (sql/api, sql/dashboard, sql/jobs).

Mount it into any FastAPI application with `app.include_router(build_router(lake, settings))`:
its errors are JSON from its own route class (app.api.errors) and it serves its own OpenAPI
document at `/api/v1/openapi.json` (its routes only), so it needs nothing from the host.
"""

import datetime as dt
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import polars as pl
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.utils import get_openapi
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.access import Viewer
from app.api.auth import request_viewer
from app.api.errors import ApiError, JsonErrorRoute
from app.api.reader import LakeReader
from app.api.settings import ApiSettings
from app.api.windows import Window, window
from warehouse.lake import Lake

__all__ = ["OPENAPI_PATH", "PREFIX", "build_router"]

log = logging.getLogger("gpuledger.api")

PREFIX = "/api/v1"
OPENAPI_PATH = f"{PREFIX}/openapi.json"
VERSION = "1.0.0"
MAX_ROWS = 1000
# Buckets of occupancy per cluster in one answer: 10 weeks of 5-minute buckets (~3 MB of JSON)
MAX_BUCKETS = 20_160
# Job reports kept rendered (per opening of the lake): a dashboard widget polling a job, or
# several people looking at one, costs one report per refresh of the lake.
REPORT_CACHE_SIZE = 256

_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="A token of the `[api] tokens_file` (`<token> <user> [manager]` lines).",
)

Since = Annotated[
    str | None,
    Query(description="From this UTC date or time (2026-11-02, 2026-11-02T08:00:00Z)."),
]
Until = Annotated[
    str | None,
    Query(description="Up to this UTC time, or through this date; default: the end of the data."),
]
ClusterParam = Annotated[str | None, Query(description="One cluster; default: every cluster.")]


class _ReportCache:
    """The last rendered job reports: (lake generation, cluster, job id) → (owner, JSON)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple[int, str, str], tuple[str | None, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[int, str, str]) -> tuple[str | None, str] | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[int, str, str], value: tuple[str | None, str]) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def _same_user(name: str | None, viewer: str | None) -> bool:
    """Whether the lake's user `name` is the viewer's: user names match in any case (a
    viewer's name is lower-cased where it comes from a token, a proxy or a sign-in, the
    scheduler's is as the scheduler writes it)."""
    return name is not None and viewer is not None and name.lower() == viewer.lower()


def _rows(frame: pl.DataFrame, **extra: Any) -> list[dict[str, Any]]:
    return [{**extra, **row} for row in frame.to_dicts()]


_SEVERITY_RANK = {"critical": 0, "warn": 1}
_NO_TIME = dt.datetime.min.replace(tzinfo=dt.UTC)


def _most_severe_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings of several clusters' feeds in the feed's own order
    (sql/dashboard/findings_feed.sql): the most severe, then the newest (none last), then by
    finding_id. Stable sorts, the last key sorted first."""
    ordered = sorted(rows, key=lambda row: str(row["finding_id"]))
    ordered.sort(
        key=lambda row: (row["detected_ts"] is not None, row["detected_ts"] or _NO_TIME),
        reverse=True,
    )
    ordered.sort(key=lambda row: _SEVERITY_RANK.get(row["severity"], 2))
    return ordered


def build_router(
    lake: Lake,
    settings: ApiSettings,
    *,
    reader: LakeReader | None = None,
) -> APIRouter:
    """The API over the lake at `lake`, letting in whom `settings` says.

    `reader` is a seam (tests pass one reading a lake they built); by default one is made and
    kept for the router's life. The router's lifespan (merged into the application's by
    `include_router`) opens and warms the lake at start-up, so the first request is as fast
    as the next; a lake that cannot be read then is logged, and its requests answer 503.
    """
    lake_reader = reader or LakeReader(lake, settings.refresh_s)

    @asynccontextmanager
    async def warm_at_startup(_app: FastAPI) -> AsyncIterator[None]:
        try:
            await run_in_threadpool(lake_reader.warm)
        except Exception as exc:  # the requests will name it; the server still starts
            log.warning("the lake at %s could not be opened at start-up: %s", lake.root, exc)
        yield

    router = APIRouter(
        prefix=PREFIX, route_class=JsonErrorRoute, tags=["gpuledger"], lifespan=warm_at_startup
    )

    def viewer(
        request: Request,
        _bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)],
    ) -> Viewer:
        found = request_viewer(settings, request)
        request.state.viewer = found  # (JsonErrorRoute tells a lake error's file to managers)
        return found

    Who = Annotated[Viewer, Depends(viewer)]
    reports = _ReportCache(REPORT_CACHE_SIZE)

    extents: dict[int, dict[str, dict[str, Any]]] = {}

    def extent() -> dict[str, dict[str, Any]]:
        """Each cluster's data_start and data_end, read once per opening of the lake."""
        generation = lake_reader.fresh_generation()
        known = extents.get(generation)
        if known is None:
            frame = lake_reader.run("views/data_extent").sort("cluster")  # (a view: no order)
            known = {row["cluster"]: row for row in frame.to_dicts()}
            extents.clear()
            extents[generation] = known
        return known

    def clusters(cluster: str | None) -> tuple[list[str], dt.datetime | None]:
        """The clusters asked for (all, or the one named: 404 when unknown), and their end of
        data (the latest), the `now` of default windows."""
        known = extent()
        if cluster is not None:
            if cluster not in known:
                names = ", ".join(sorted(known)) or "none"
                raise ApiError(404, f"no cluster {cluster!r} in the lake (known: {names})")
            return [cluster], known[cluster]["data_end"]
        ends = [row["data_end"] for row in known.values() if row["data_end"] is not None]
        return sorted(known), max(ends) if ends else None

    def own_user(who: Viewer, user: str | None) -> str | None:
        """The user whose rows a query may return: anyone's a manager asks for, else only
        the caller's own (403 when they ask for someone else's)."""
        if who.is_manager:
            return user
        if user is not None and not _same_user(user, who.user):
            raise ApiError(403, f"{who.user} may see only their own jobs and usage, not {user}'s")
        return who.user

    @router.get("/whoami", summary="Who the API takes the caller for")
    def whoami(who: Who) -> dict[str, Any]:
        return {"user": who.user, "manager": who.is_manager}

    @router.get("/clusters", summary="The lake's clusters and when each one's data begins and ends")
    def list_clusters(who: Who) -> dict[str, Any]:
        return {"clusters": list(extent().values())}

    @router.get(
        "/jobs/{cluster}/{job_id:path}",
        summary="One job's report: the JSON of `gpuledger job JOBID --format json`",
        response_class=Response,
        responses={200: {"content": {"application/json": {}}}},
    )
    def job_report(cluster: str, job_id: str, who: Who) -> Response:
        from app.commands.job import render_json
        from detectors.job_report import AmbiguousJob, UnknownJob

        # a user is told the same of another's job as of none: which ids exist is not theirs
        # to learn (a 403 for one and a 404 for the other would list them)
        not_found = ApiError(404, f"no job {job_id!r} of {who.user}'s on {cluster!r}")
        key = (lake_reader.fresh_generation(), cluster, job_id)
        cached = reports.get(key)
        if cached is None and not who.is_manager:
            # whose it is, before its report is built: built for another's job alone, the
            # answer took twice as long as for no job, and told which ids exist
            owners = lake_reader.run("api/job_owner", cluster=cluster, job_id=job_id)
            if not any(_same_user(o, who.user) for o in owners["user"].to_list()):
                raise not_found
        if cached is None:
            try:
                report = lake_reader.job_report(job_id, cluster)
            except (UnknownJob, AmbiguousJob) as exc:
                raise (ApiError(404, str(exc)) if who.is_manager else not_found) from None
            cached = (report.job.get("user"), render_json(report))
            reports.put(key, cached)
        owner, body = cached
        if not who.is_manager and not _same_user(owner, who.user):
            raise not_found
        return Response(body, media_type="application/json")

    @router.get("/jobs", summary="The last jobs started (a user's own, or anyone's for a manager)")
    def jobs(
        who: Who,
        user: Annotated[
            str | None, Query(description="Whose jobs; default: the caller's (a manager: all).")
        ] = None,
        cluster: ClusterParam = None,
        since: Since = None,
        until: Until = None,
        limit: Annotated[int, Query(ge=1, le=MAX_ROWS, description="At most this many.")] = 20,
    ) -> dict[str, Any]:
        whose = own_user(who, user)
        names, _ = clusters(cluster)
        span = window(since, until, None, default_days=None)
        frame = lake_reader.run(
            "api/jobs_recent",
            cluster=cluster,
            user=whose,
            start=span.since,
            end=span.until,
            limit=limit,
        )
        return {"user": whose, "jobs": _rows(frame)}

    @router.get(
        "/usage", summary="GPU-hours over whole UTC days, by cluster/account/user/partition"
    )
    def usage(
        who: Who,
        group_by: Annotated[
            Literal["cluster", "account", "user", "partition"],
            Query(description="What to total by."),
        ] = "user",
        cluster: ClusterParam = None,
        since: Since = None,
        until: Until = None,
    ) -> dict[str, Any]:
        whose = own_user(who, None)
        _, data_end = clusters(cluster)
        span = window(since, until, data_end)
        first, after = span.days()
        frame = lake_reader.run(
            "api/usage_grouped",
            group_by=group_by,
            cluster=cluster,
            user=whose,
            start=first,
            end=after,
        ).rename({"group_value": group_by} if group_by != "cluster" else {})
        if group_by == "cluster":
            frame = frame.drop("group_value")
        return {
            "group_by": group_by,
            "user": whose,
            "first_day": first.isoformat(),
            "last_day": (after - dt.timedelta(days=1)).isoformat(),
            "rows": _rows(frame),
        }

    def per_cluster(
        cluster: str | None, query: Callable[[str], pl.DataFrame]
    ) -> list[dict[str, Any]]:
        names, _ = clusters(cluster)
        return [row for name in names for row in _rows(query(name), cluster=name)]

    def span_of(cluster: str | None, since: str | None, until: str | None) -> Window:
        _, data_end = clusters(cluster)
        return window(since, until, data_end)

    @router.get("/findings", summary="What the detectors found (about the caller's jobs, or all)")
    def findings(
        who: Who,
        cluster: ClusterParam = None,
        since: Since = None,
        until: Until = None,
        severity: Annotated[
            list[Literal["critical", "warn", "info"]] | None,
            Query(description="Only these severities (repeat the parameter for several)."),
        ] = None,
        job_id: Annotated[str | None, Query(description="Only about this job.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_ROWS, description="At most this many.")] = 200,
    ) -> dict[str, Any]:
        span = span_of(cluster, since, until)
        rows = per_cluster(
            cluster,
            lambda name: lake_reader.run(
                "dashboard/findings_feed",
                cluster=name,
                start=span.since,
                end=span.until,
                viewer=who.user_filter,
                needle="",
                severities=list(severity or []),
                subject_kinds=[],
                job_id=job_id,
                limit=limit,
            ),
        )
        # each cluster's feed is cut at `limit`: the cut of them all is made after merging
        return {**span.as_json(), "findings": _most_severe_first(rows)[:limit]}

    @router.get("/recommendations", summary="Cluster policy recommendations (managers only)")
    def recommendations(who: Who, cluster: ClusterParam = None) -> dict[str, Any]:
        if not who.is_manager:
            raise ApiError(403, "cluster policy recommendations are for managers")
        rows = per_cluster(
            cluster,
            lambda name: lake_reader.run("dashboard/recommendation_list", cluster=name, needle=""),
        )
        return {"recommendations": rows}

    @router.get("/occupancy", summary="GPUs by state (active, idle allocated, free, unseen)")
    def occupancy(
        who: Who,
        cluster: ClusterParam = None,
        since: Since = None,
        until: Until = None,
        limit: Annotated[
            int,
            Query(
                ge=1,
                le=MAX_BUCKETS,
                description="At most this many buckets of each cluster, the first of the "
                "window; where more remain, `next_since` is where the next page begins.",
            ),
        ] = MAX_BUCKETS,
    ) -> dict[str, Any]:
        span = span_of(cluster, since, until)
        frames = {
            name: lake_reader.run(
                "dashboard/occupancy_series", cluster=name, start=span.since, end=span.until
            )
            for name in clusters(cluster)[0]  # (a mart's buckets of a cluster: cheap to read)
        }
        # one cut for every cluster, the earliest bucket past a cluster's `limit`: each page
        # holds every cluster's buckets before it, and the next page those from it on
        cuts = [frame["bucket"][limit] for frame in frames.values() if frame.height > limit]
        cut = min(cuts) if cuts else None
        rows: list[dict[str, Any]] = []
        for name, frame in frames.items():
            kept = frame if cut is None else frame.filter(pl.col("bucket") < cut)
            rows += _rows(kept, cluster=name)
        page = {"next_since": cut.isoformat()} if cut is not None else {}
        return {**span.as_json(), "series": rows, **page}

    schema: dict[str, Any] = {}

    @router.get("/openapi.json", include_in_schema=False)
    def openapi() -> dict[str, Any]:
        if not schema:
            schema.update(
                get_openapi(
                    title="gpuledger API",
                    version=VERSION,
                    description="Read-only: job reports, usage, findings, recommendations "
                    "and occupancy from the gpuledger lake. Authenticate with a bearer token.",
                    routes=[r for r in router.routes if getattr(r, "include_in_schema", False)],
                )
            )
        return schema

    @router.api_route(
        "/{rest:path}",
        # every method but GET gets the API's JSON 405 (HEAD and OPTIONS got the framework's
        # {"detail": …} and an Allow header of methods the API never answers)
        methods=["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE", "TRACE"],
        include_in_schema=False,
    )
    def unknown(request: Request, rest: str) -> None:
        if request.method != "GET":
            raise ApiError(405, "the API is read-only: GET only", {"Allow": "GET"})
        raise ApiError(404, f"no endpoint {PREFIX}/{rest} (see {OPENAPI_PATH})")

    return router
