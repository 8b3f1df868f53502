"""Quantities, times and effective requests: the arithmetic the scheduler does on a pod."""

from __future__ import annotations

from decimal import Decimal

import pytest

from collector.errors import MalformedSample
from collector.sources.kubernetes.resources import (
    effective_requests,
    gpu_resources,
    is_gpu_resource,
    mig_profile,
    parse_quantity,
    parse_time_ms,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8", Decimal(8)),
        ("500m", Decimal("0.5")),
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        ("64Gi", Decimal(64 * 2**30)),
        ("128Mi", Decimal(128 * 2**20)),
        ("2113464312Ki", Decimal(2113464312 * 1024)),
        ("2Ti", Decimal(2 * 2**40)),
        ("1G", Decimal(10**9)),
        ("3455006845146", Decimal(3455006845146)),
        ("1e3", Decimal(1000)),
        ("12E6", Decimal(12 * 10**6)),
        ("1E", Decimal(10**18)),  # exa, not an exponent
        ("1Ei", Decimal(2**60)),  # exbi, not an exponent (a traceback took the whole run)
        ("250u", Decimal("0.00025")),
        (".5", Decimal("0.5")),
        (4, Decimal(4)),
    ],
)
def test_quantities_parse_with_every_suffix(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "eight",
        "8 Gi",
        "8gi",
        "1.2.3",
        "Gi",
        None,
        True,
        [8],
        "1e999999",
        float("nan"),
        float("inf"),
    ],
)
def test_a_bad_quantity_is_refused_with_its_value(text):
    with pytest.raises(MalformedSample, match="invalid quantity"):
        parse_quantity(text)


def test_times_are_rfc3339_utc_in_milliseconds():
    assert parse_time_ms("1970-01-01T00:00:01Z") == 1000
    assert parse_time_ms("2026-11-30T09:12:44Z") == 1_796_029_964_000
    assert parse_time_ms("2026-11-30T10:12:44+01:00") == 1_796_029_964_000
    assert parse_time_ms(None) is None
    with pytest.raises(MalformedSample, match=r"invalid finishedAt 'yesterday'"):
        parse_time_ms("yesterday", "finishedAt")


def test_gpu_resources_are_whole_shared_and_mig_devices():
    assert is_gpu_resource("nvidia.com/gpu")
    assert is_gpu_resource("nvidia.com/gpu.shared")
    assert is_gpu_resource("nvidia.com/mig-1g.10gb")
    assert not is_gpu_resource("amd.com/gpu")
    assert not is_gpu_resource("cpu")
    assert mig_profile("nvidia.com/mig-3g.40gb") == "3g.40gb"
    assert mig_profile("nvidia.com/gpu") is None
    assert gpu_resources(
        {"cpu": Decimal(8), "nvidia.com/gpu": Decimal(2), "nvidia.com/mig-1g.10gb": Decimal(0)}
    ) == {"nvidia.com/gpu": 2}


def container(name, requests=None, limits=None, **extra):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources, **extra}


@pytest.mark.parametrize(
    ("spec", "expected_gpus"),
    [
        # containers add up
        (
            {
                "containers": [
                    container("a", {"nvidia.com/gpu": "1"}),
                    container("b", {"nvidia.com/gpu": "2"}),
                ]
            },
            3,
        ),
        # a limit alone is the request
        ({"containers": [container("a", limits={"nvidia.com/gpu": "4"})]}, 4),
        # an init container runs alone: the larger of it and the app containers
        (
            {
                "initContainers": [container("init", {"nvidia.com/gpu": "4"})],
                "containers": [container("a", {"nvidia.com/gpu": "2"})],
            },
            4,
        ),
        (
            {
                "initContainers": [container("init", {"nvidia.com/gpu": "1"})],
                "containers": [container("a", {"nvidia.com/gpu": "2"})],
            },
            2,
        ),
        # a sidecar (restartPolicy Always) runs beside later init containers and the app
        (
            {
                "initContainers": [
                    container("side", {"nvidia.com/gpu": "1"}, restartPolicy="Always"),
                    container("init", {"nvidia.com/gpu": "2"}),
                ],
                "containers": [container("a", {"nvidia.com/gpu": "1"})],
            },
            3,
        ),
        ({"containers": [container("a", {"cpu": "2"})]}, 0),
        ({"containers": []}, 0),
    ],
)
def test_effective_gpu_request_follows_the_schedulers_rule(spec, expected_gpus):
    requests = effective_requests(spec)
    assert sum(gpu_resources(requests).values()) == expected_gpus


def test_effective_cpu_and_memory_count_sidecars_once_beside_the_app():
    spec = {
        "initContainers": [
            container("log", {"cpu": "100m", "memory": "128Mi"}, restartPolicy="Always"),
            container("check", {"cpu": "1", "memory": "8Gi"}),
        ],
        "containers": [container("main", {"cpu": "8", "memory": "64Gi"})],
    }
    requests = effective_requests(spec)
    assert requests["cpu"] == Decimal("8.1")
    assert requests["memory"] == Decimal(64 * 2**30 + 128 * 2**20)


def test_a_container_whose_resources_are_not_an_object_is_malformed():
    with pytest.raises(MalformedSample, match="container 'main': resources is not an object"):
        effective_requests({"containers": [{"name": "main", "resources": "lots"}]})
