"""Time our Prometheus JSON → Parquet path against prometheus-api-client's DataFrame path.

Both start from the same raw response bodies (instant queries of range selectors, laid out as
Prometheus writes them) in one process. Ours: `block_from_body` → `pivot_window` → Parquet (wide
`gpu_samples` rows, events, job intervals). The client's: `json.loads` → `MetricRangeDataFrame`
(long: one row per series and timestamp, labels as columns) → `DataFrame.to_parquet`, which does
less work (no pivot, no validation). pandas is imported only here, only for the baseline.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Final

import numpy as np

__all__ = ["make_bodies", "run_prometheus_bench"]

_MODEL: Final = "NVIDIA H100 80GB HBM3"
# (family, column-like generator): GPU_UTIL/temps/clocks are integers, the rest 6-decimal doubles
_FAMILIES: Final = (
    ("DCGM_FI_DEV_GPU_UTIL", "int", 0, 100),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "ratio", 0, 1),
    ("DCGM_FI_PROF_SM_ACTIVE", "ratio", 0, 1),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "ratio", 0, 1),
    ("DCGM_FI_DEV_FB_USED", "int", 0, 81000),
    ("DCGM_FI_DEV_POWER_USAGE", "float", 60, 700),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 1e9, 5e9),
    ("DCGM_FI_DEV_GPU_TEMP", "int", 28, 85),
    ("DCGM_FI_DEV_SM_CLOCK", "int", 345, 1980),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "flags", 0, 1),
)


def make_bodies(*, gpus: int, points: int, interval_s: float = 15.0, seed: int = 7) -> list[bytes]:
    """One response body per family: `gpus` series of `points` samples, as Prometheus 2 lays
    them out (compact JSON, values as strings, ms-precision float timestamps)."""
    rng = np.random.default_rng(seed)
    t0 = 1_767_225_600.0
    ts = [f"{t0 + i * interval_s + 0.123:.3f}" for i in range(points)]
    bodies = []
    for family, kind, low, high in _FAMILIES:
        series = []
        for g in range(gpus):
            labels = {
                "__name__": family,
                "DCGM_FI_DRIVER_VERSION": "570.133.20",
                "Hostname": f"gpu-{g // 8 + 1:03d}",
                "UUID": f"GPU-{g:08x}-1111-2222-3333-{g:012x}",
                "cluster": "bench",
                "device": f"nvidia{g % 8}",
                "gpu": str(g % 8),
                "hpc_job": str(1000 + g // 4),
                "instance": f"10.0.0.{g // 8 + 1}:9400",
                "job": "dcgm",
                "modelName": _MODEL,
                "pci_bus_id": "00000000:18:00.0",
            }
            if kind == "counter":
                raw = low + np.cumsum(rng.uniform(0, 700_000, points))
                values = [f"{v:.0f}" for v in raw]
            elif kind == "flags":
                values = [str(v) for v in rng.choice([0, 1, 4], size=points, p=[0.6, 0.3, 0.1])]
            elif kind == "int":
                values = [str(v) for v in rng.integers(int(low), int(high) + 1, points)]
            else:
                values = [repr(round(float(v), 6)) for v in rng.uniform(low, high, points)]
            pairs = ",".join(f'[{t},"{v}"]' for t, v in zip(ts, values, strict=True))
            series.append(
                f'{{"metric":{json.dumps(labels, separators=(",", ":"))},"values":[{pairs}]}}'
            )
        bodies.append(
            (
                '{"status":"success","data":{"resultType":"matrix","result":['
                + ",".join(series)
                + "]}}"
            ).encode()
        )
    return bodies


def _ours(bodies: list[bytes], out: Path) -> int:
    import pyarrow.parquet as pq

    from collector.sources.prometheus.blocks import block_from_body
    from collector.sources.prometheus.pivot import pivot_window

    blocks = [block_from_body(f[0], b) for f, b in zip(_FAMILIES, bodies, strict=True)]
    rows = pivot_window(blocks, cluster="bench", start_ms=0, end_ms=2**62)
    pq.write_table(rows.samples, out / "ours.parquet", compression="zstd")
    pq.write_table(rows.events, out / "ours_events.parquet", compression="zstd")
    pq.write_table(rows.job_gpus, out / "ours_job_gpus.parquet", compression="zstd")
    return int(rows.samples.num_rows)


def _client_dataframe(bodies: list[bytes], out: Path) -> int:
    import pandas as pd
    from prometheus_api_client import MetricRangeDataFrame

    with warnings.catch_warnings():  # the client's own pandas deprecations are not ours to fix
        warnings.simplefilter("ignore")
        frames = [MetricRangeDataFrame(json.loads(b)["data"]["result"]) for b in bodies]
        frame = pd.concat(frames)
        frame.to_parquet(out / "client.parquet", compression="zstd")
    return len(frame)


def run_prometheus_bench(
    *, gpus: int = 64, points: int = 2880, repeat: int = 2, workdir: Path | None = None
) -> dict[str, Any]:
    """Time both paths on the same bodies (best of `repeat`); return sizes, times and speedup.

    `speedup` is the client path's time over ours. Without pandas (the client's `dataframe`
    extra) only our path is timed and `skipped` says why.
    """
    bodies = make_bodies(gpus=gpus, points=points)
    base = Path(tempfile.mkdtemp(prefix="gpuledger-bench-prom-", dir=workdir))
    result: dict[str, Any] = {
        "gpus": gpus,
        "points_per_series": points,
        "families": len(bodies),
        "samples": gpus * points * len(bodies),
        "body_mb": round(sum(len(b) for b in bodies) / 1e6, 1),
    }
    try:
        # both paths once on a tiny body first: imports and first-call set-up are not timed
        warm = make_bodies(gpus=1, points=4)
        _ours(warm, base)
        ours = []
        for _ in range(repeat):
            start = time.perf_counter()
            rows = _ours(bodies, base)
            ours.append(time.perf_counter() - start)
        result |= {"ours_s": round(min(ours), 3), "wide_rows": rows}
        result["ours_samples_per_s"] = round(result["samples"] / min(ours))
        try:
            import pandas  # noqa: F401  (the baseline needs the client's dataframe extra)
        except ImportError:
            result["skipped"] = "pandas is not installed (prometheus-api-client[dataframe])"
            return result
        _client_dataframe(warm, base)
        client = []
        for _ in range(repeat):
            start = time.perf_counter()
            long_rows = _client_dataframe(bodies, base)
            client.append(time.perf_counter() - start)
        result |= {"client_dataframe_s": round(min(client), 3), "client_rows": long_rows}
        result["speedup"] = round(min(client) / min(ours), 1)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return result
