"""A small hand-made lake for the API tests, and clients holding each kind of token.

Cluster della, day 2024-03-01 (T0): alice's job a1 on GPU 0 (busy 0.8) for 1 h from T0 and
her a2 on GPU 1 (never active) for 2 h from T0 + 1 h, partition gpu; bob's b1 on GPU 2 (busy
0.5) for 1 h from T0 + 2 h, partition debug, account chem. A warn finding about a1, one about
b1, and a node finding (no user).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.access import AccessPolicy
from app.api.settings import ApiSettings
from app.api.tokens import load_tokens
from tests.infra.lake_cache import cached_lake
from tests.marts import rows as r

H = 3600.0
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
BOSS = "boss-token-0123456789abcdefg"


def build(root: Path) -> Path:
    samples = (
        r.samples(range(0, int(H), 30), gpu_index=0, engine_active=0.8, power_w=400.0)
        + r.samples(range(int(H), int(3 * H), 30), gpu_index=1, engine_active=0.0)
        + r.samples(range(int(2 * H), int(3 * H), 30), gpu_index=2, engine_active=0.5)
    )
    jobs = [
        r.job("a1", 0, H, user="alice"),
        r.job("a2", H, 3 * H, user="alice"),
        r.job("b1", 2 * H, 3 * H, user="bob", account="chem", partition="debug"),
    ]
    job_gpus = [
        r.job_gpu("a1", 0, H, gpu_index=0),
        r.job_gpu("a2", H, 3 * H, gpu_index=1),
        r.job_gpu("b1", 2 * H, 3 * H, gpu_index=2),
    ]

    def finding(fid: str, job: str | None, user: str | None, kind: str = "job") -> dict:
        return {
            "cluster": r.CLUSTER,
            "finding_id": fid,
            "detector": "partial_idle" if job else "thermal",
            "severity": "warn",
            "subject_kind": kind,
            "subject_id": job or "g001",
            "job_id": job,
            "user": user,
            "node": None if job else "g001",
            "start_ts": r.at(0),
            "detected_ts": r.at(H),
            "message": f"about {job or 'g001'}",
        }

    r.land(
        root,
        "findings",
        [
            finding("f-a1", "a1", "alice"),
            finding("f-b1", "b1", "bob"),
            finding("f-node", None, None, "node"),
        ],
    )
    r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)
    return root


def shared(tmp_path_factory: pytest.TempPathFactory, into: Path | None = None) -> Path:
    """A copy at `into` (by default a new folder) of the lake `build` makes, built once per
    test run (tests/infra/lake_cache.py): the caller's own, to read or write."""
    into = into if into is not None else tmp_path_factory.mktemp("api") / "lake"
    return cached_lake(tmp_path_factory, "api", build, into)


def tokens_file(folder: Path) -> Path:
    path = folder / "api-tokens"
    path.write_text(
        f"# the API's tokens\n{ALICE} alice\n{BOB} Bob\n\n{BOSS} boss manager\n", encoding="utf-8"
    )
    os.chmod(path, 0o600)
    return path


def settings(folder: Path, **changes: object) -> ApiSettings:
    fields: dict[str, object] = {
        "tokens": load_tokens(tokens_file(folder)),
        "trusted_user_header": None,
        "trusted_proxies": frozenset(),
        "policy": AccessPolicy(),
    }
    fields.update(changes)
    return ApiSettings(**fields)  # type: ignore[arg-type]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
