"""`gpuledger collect kubernetes`, end to end against a local server that answers like a cluster."""

from __future__ import annotations

import os

from click.testing import CliRunner, Result

from app.cli import cli
from warehouse.connection import connect


def invoke(*args: str) -> Result:
    runner = CliRunner(env={k: None for k in os.environ if k.startswith(("GPULEDGER_", "KUBE"))})
    return runner.invoke(cli, ["collect", "kubernetes", *args])


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    [line] = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    return line


def test_a_collection_prints_what_it_landed_and_a_second_lands_nothing(tmp_path, kubeconfig):
    lake = tmp_path / "lake"
    args = ("--cluster", "k8s-demo", "--kubeconfig", str(kubeconfig), "--lake", str(lake))

    first = invoke(*args)
    second = invoke(*args)

    assert first.exit_code == 0, first.output
    assert "(kueue v1beta1, volcano): 12 pod(s) seen, 10 with GPUs; jobs landed: 10 (10 new" in (
        first.output
    )
    assert "queues landed: 12 (+0 deleted); whole-node GPU rows: 1 opened" in first.output
    assert second.exit_code == 0, second.output
    assert "jobs landed: 0 (0 new, 0 updated, 0 gone); queues landed: 0" in second.output
    with connect(lake) as con:
        assert con.sql("SELECT count(*) FROM jobs_latest").fetchall() == [(10,)]


def test_namespaces_and_attribution_keys(tmp_path, kubeconfig, api_server):
    lake = tmp_path / "lake"
    result = invoke(
        "--cluster",
        "k8s-demo",
        "--kubeconfig",
        str(kubeconfig),
        "--lake",
        str(lake),
        "--namespace",
        "team-b",
        "--account-label",
        "app",
        "--user-label",
        "notebook-name",
    )

    assert result.exit_code == 0, result.output
    assert "2 with GPUs" in result.output
    assert ("/api/v1/namespaces/team-b/pods", "Bearer test-token") in api_server.requests
    with connect(lake) as con:
        assert con.sql("SELECT job_id, user, account FROM jobs ORDER BY job_id").fetchall() == [
            ("team-b/bob-0", "bob", "bob"),
            ("team-b/infer-7f9c8d6b5-x2x9z", "system:serviceaccount:team-b:infer", "infer"),
        ]


def test_refused_credentials_are_one_line_and_exit_1(tmp_path, kubeconfig, api_server):
    api_server.status = (401, "Unauthorized", "Unauthorized")

    result = invoke(
        "--cluster", "c", "--kubeconfig", str(kubeconfig), "--lake", str(tmp_path / "lake")
    )

    assert one_error_line(result, 1) == (
        f"Error: the Kubernetes API at {api_server.url} answered 401 to the list of pods: "
        "Unauthorized; the credentials were refused (expired token or certificate?)"
    )
    assert not (tmp_path / "lake").exists()


def test_an_unreachable_api_is_one_line_and_exit_1(tmp_path, kubeconfig):
    result = invoke(
        "--cluster",
        "c",
        "--kubeconfig",
        str(kubeconfig),
        "--context",
        "closed",
        "--lake",
        str(tmp_path),
    )

    line = one_error_line(result, 1)
    assert line.startswith("Error: could not reach the Kubernetes API at http://127.0.0.1:")
    assert line.endswith("Connection refused")


def test_a_missing_kubeconfig_or_context_is_one_line_and_exit_1(tmp_path, kubeconfig):
    missing = invoke(
        "--cluster", "c", "--kubeconfig", str(tmp_path / "nope"), "--lake", str(tmp_path)
    )
    unknown = invoke(
        "--cluster",
        "c",
        "--kubeconfig",
        str(kubeconfig),
        "--context",
        "prod",
        "--lake",
        str(tmp_path),
    )

    assert "does not exist or is not a file" in one_error_line(missing, 1)
    assert "prod" in one_error_line(unknown, 1)


def test_usage_errors_exit_2():
    assert invoke().exit_code == 2  # --cluster is required
    assert invoke("--cluster", "c", "--timeout", "0").exit_code == 2


def test_help_says_what_it_collects_and_where_state_lives():
    result = invoke("--help")

    assert result.exit_code == 0
    for words in (
        "--kubeconfig",
        "--context",
        "--namespace NS",
        "--user-label KEY",
        "--account-label KEY",
        "--lake",
        "nvidia.com/gpu",
        "ClusterQueue",
        "whole-node",
        "_state/kubernetes.sqlite",
    ):
        assert words in result.output, words


def test_a_namespace_account_pins_the_account_of_its_pods(tmp_path, kubeconfig):
    lake = tmp_path / "lake"
    args = ("--cluster", "k8s-demo", "--kubeconfig", str(kubeconfig), "--lake", str(lake))
    result = invoke(*args, "--namespace-account", "team-a=physics")
    assert result.exit_code == 0, result.output
    with connect(lake) as con:
        accounts = con.sql(
            "SELECT DISTINCT account FROM jobs_latest WHERE job_id LIKE 'team-a/%'"
        ).fetchall()
    assert accounts == [("physics",)]


def test_a_bad_namespace_account_is_one_error_line(tmp_path, kubeconfig):
    line = one_error_line(
        invoke("--cluster", "c", "--kubeconfig", str(kubeconfig), "--namespace-account", "a=b c"),
        2,
    )
    assert "--namespace-account" in line and "NS=ACCOUNT" in line
