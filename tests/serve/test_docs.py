"""The Prometheus and Grafana page lists each metric of `gpuledger serve` with its labels."""

from __future__ import annotations

import re
from pathlib import Path

from app.serve.exposition import METRICS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "prometheus-grafana.md"
ROW = re.compile(r"^\| `(gpuledger_[a-z_]+)` \| (.+?) \| (.+) \|$", re.M)


def test_every_metric_is_documented_with_its_labels_and_help():
    rows = {m.group(1): (m.group(2), m.group(3)) for m in ROW.finditer(PAGE.read_text())}

    assert set(rows) == set(METRICS)
    for name, metric in METRICS.items():
        labels, meaning = rows[name]
        assert labels == (", ".join(f"`{label}`" for label in metric.labels) or "—"), name
        assert meaning == metric.help, name
