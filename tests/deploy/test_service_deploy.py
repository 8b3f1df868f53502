"""The shipped deployment files: the example configuration, the systemd units and the Kubernetes
manifest are checked against the code they start (config loader, CLI, collector's API calls)."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import tomllib
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from app.cli import cli
from app.config import ConfigError, load_config
from collector.sources.kubernetes import collect as kubernetes_collect
from collector.sources.kubernetes.queues import KUEUE_GROUP, VOLCANO_GROUP
from tests.docs.pages import page, pages
from warehouse.lake import Lake

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_the_example_configuration_passes_config_check(tmp_path):
    secret = tmp_path / "smtp-password"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    (tmp_path / "directory.toml").write_text("")
    text = (
        (DEPLOY / "gpuledger.example.toml").read_text().replace("/etc/gpuledger/", f"{tmp_path}/")
    )
    (tmp_path / "gpuledger.toml").write_text(text)
    result = CliRunner().invoke(
        cli, ["config", "check", "--config", str(tmp_path / "gpuledger.toml")], env={}
    )
    assert result.exit_code == 0, result.output
    assert "s3cret" not in result.output
    cfg = load_config(tmp_path / "gpuledger.toml", environ={})
    assert [s.name for s in cfg.values["sources"]] == ["prometheus:della", "slurm:della"]


def units() -> list[Path]:
    return sorted((DEPLOY / "systemd").glob("*.service"))


@pytest.mark.parametrize("unit", units(), ids=lambda p: p.name)
def test_systemd_units_start_real_commands_with_private_files(unit):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(unit)
    assert {"Unit", "Service", "Install"} <= set(parser.sections())
    service = parser["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/gpuledger")
    # the arguments must parse with the real CLI (option names, values, ranges)
    ctx = cli.make_context("gpuledger", argv[1:], resilient_parsing=False)
    with ctx:
        name, sub, rest = cli.resolve_command(ctx, argv[1:])
        assert sub is not None
        if isinstance(sub, click.Group):
            name, sub, rest = sub.resolve_command(ctx, rest)
        sub.make_context(name or "", rest, parent=ctx)
    assert service["UMask"] == "0027"  # lake files not world-readable
    # the service user reads every file of the lake (0640): each unit runs in its group
    assert service["Group"] == "gpuledger"
    if unit.name != "gpuledger-node-agent.service":  # the agent needs root for /proc/<pid>
        assert service["User"] == "gpuledger"
        assert service["NoNewPrivileges"] == "yes"


def test_kubernetes_manifest_grants_what_the_collector_lists_and_carries_a_valid_config(tmp_path):
    docs = list(
        yaml.safe_load_all((DEPLOY / "kubernetes" / "gpuledger-collector.yaml").read_text())
    )
    kinds = {d["kind"]: d for d in docs}
    assert {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    } <= set(kinds)
    granted = {
        (group, resource, verb)
        for rule in kinds["ClusterRole"]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }

    class Recorder:
        def __init__(self) -> None:
            self.calls: set[tuple[str, str, str]] = set()

        def list_pods(self, namespace=None):
            self.calls.add(("", "pods", "list"))
            return []

        def list_nodes(self):
            self.calls.add(("", "nodes", "list"))
            return []

        def list_custom(self, group, version, plural, namespace=None):
            self.calls.add((group, plural, "list"))
            return [] if plural in ("clusterqueues", "queues") else None

    api = Recorder()
    kubernetes_collect.collect_kubernetes(Lake.at(tmp_path / "lake"), "k8s", api)  # type: ignore[arg-type]
    # with Kueue and Volcano installed every list is made: the role grants exactly those, no
    # get, watch or write (nothing broader than the collector needs)
    assert api.calls == granted, (api.calls - granted, granted - api.calls)
    assert {(KUEUE_GROUP, "workloads", "list"), (VOLCANO_GROUP, "podgroups", "list")} <= granted
    config = kinds["ConfigMap"]["data"]["gpuledger.toml"]
    (tmp_path / "gpuledger.toml").write_text(config)
    cfg = load_config(tmp_path / "gpuledger.toml", environ={})
    assert {s.name for s in cfg.values["sources"]} == {"kubernetes:k8s-prod", "prometheus:k8s-prod"}
    container = kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:1] == ["run"]
    assert container["ports"][0]["containerPort"] == 9746


def manifest() -> dict[str, dict]:
    docs = yaml.safe_load_all((DEPLOY / "kubernetes" / "gpuledger-collector.yaml").read_text())
    return {d["kind"]: d for d in docs}


def test_kubernetes_pod_finds_its_configuration_for_run_and_for_kubectl_exec_status(tmp_path):
    kinds = manifest()
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    # `kubectl exec deploy/gpuledger -- gpuledger status` passes no --config: the environment
    # must name the mounted ConfigMap, whose lake is the mounted volume
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    config_path = Path(env["GPULEDGER_CONFIG"])
    assert config_path.parent == Path(mounts["config"])
    assert config_path.name in kinds["ConfigMap"]["data"]
    (tmp_path / config_path.name).write_text(kinds["ConfigMap"]["data"][config_path.name])
    cfg = load_config(None, environ={"GPULEDGER_CONFIG": str(tmp_path / config_path.name)})
    assert cfg.lake.root == Path(mounts["lake"]) / "lake"
    # and SIGTERM's grace outlasts the loop's own wait for its steps
    from app.service.settings import ServiceConfig

    assert pod["terminationGracePeriodSeconds"] > cfg.section(ServiceConfig).stop_timeout_s
    # the container's arguments parse with the real CLI
    args = list(container["args"])
    with cli.make_context("gpuledger", list(args)) as ctx:
        name, sub, rest = cli.resolve_command(ctx, args)
        assert sub is not None and name == "run"
        sub.make_context(name, rest, parent=ctx)
    # no [alerts] in the ConfigMap: alerting must be off rather than mail <user>@localhost
    alerts = cfg.values["alerts"]
    assert cfg.section(ServiceConfig).alert is False or alerts.smtp_host != "localhost"


def test_kubernetes_probes_ask_healthz_and_the_endpoint_binds_the_pod_ip_only():
    container = manifest()["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    # alive: no hung step (a restart mends that); ready: nothing failing or stuck
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz?live=1"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e for e in container["env"]}
    address = env["GPULEDGER_SERVICE_METRICS_ADDRESS"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert address == "status.podIP"
    assert "0.0.0.0" not in manifest()["ConfigMap"]["data"]["gpuledger.toml"]


def test_kubernetes_service_links_are_off_because_they_would_break_the_configuration():
    # A Service named gpuledger makes the kubelet inject GPULEDGER_SERVICE_HOST/_PORT into
    # every pod of the namespace; gpuledger rejects unknown GPULEDGER_SERVICE_* keys.
    injected = {"GPULEDGER_SERVICE_HOST": "10.0.0.7", "GPULEDGER_SERVICE_PORT": "9746"}
    with pytest.raises(ConfigError, match="GPULEDGER_SERVICE_HOST"):
        load_config(None, environ=injected)
    assert manifest()["Deployment"]["spec"]["template"]["spec"]["enableServiceLinks"] is False


def test_systemd_stop_timeout_outlasts_the_loops_own_wait():
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(DEPLOY / "systemd" / "gpuledger.service")
    example = tomllib.loads((DEPLOY / "gpuledger.example.toml").read_text())
    assert float(parser["Service"]["TimeoutStopSec"]) > example["service"]["stop_timeout_s"]


def slurm_recipe() -> list[list[str]]:
    """The shell lines of the Deployment page's "On a Slurm cluster" recipe, split into words."""
    section = page("operations/deploy.md").split("## On a Slurm cluster", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def installed(recipe: list[list[str]]) -> dict[str, dict[str, str]]:
    """Every path an `install` line creates: {path: {"-m": mode, "-o": owner, "-g": group}}."""
    out: dict[str, dict[str, str]] = {}
    for words in recipe:
        if not words or words[0] != "install":
            continue
        flags: dict[str, str] = {}
        paths: list[str] = []
        rest = iter(words[1:])
        for word in rest:
            if word in ("-m", "-o", "-g"):
                flags[word] = next(rest)
            elif word == "-d":
                flags["-d"] = "yes"
            else:
                paths.append(word)
        for path in paths if "-d" in flags else paths[-1:]:
            out[path] = flags
    return out


def test_the_slurm_recipe_creates_every_file_the_example_configuration_names(tmp_path, monkeypatch):
    # Followed to the letter, the recipe must give a configuration that `config check` passes
    # when run as the service user with nothing in the environment (sudo -u gpuledger …).
    files = installed(slurm_recipe())
    example = tomllib.loads((DEPLOY / "gpuledger.example.toml").read_text())
    config = files["/etc/gpuledger/gpuledger.toml"]
    assert config["-m"] == "0640" and "gpuledger" in (config.get("-o"), config.get("-g"))
    named = {k: v for k, v in example["alerts"].items() if k.endswith("_file") or k == "directory"}
    assert named, "the example names no file: this test checks nothing"
    for key, path in named.items():
        assert path in files, f"alerts.{key} = {path!r}: the recipe does not create it"
        if key.endswith("_file"):  # a secret: readable by the service user alone
            assert files[path]["-m"] == "0600" and files[path]["-o"] == "gpuledger", key
        else:
            assert "gpuledger" in (files[path].get("-o"), files[path].get("-g")), key
    lake = Path(example["lake"])
    assert any(Path(p) in lake.parents and f.get("-o") == "gpuledger" for p, f in files.items())
    # the same files, made as the recipe makes them (empty), in a scratch /etc/gpuledger
    for var in [v for v in os.environ if v.startswith("GPULEDGER_")]:
        monkeypatch.delenv(var)
    etc = tmp_path / "etc"
    etc.mkdir()
    for path, flags in files.items():
        if path.startswith("/etc/gpuledger/") and "-d" not in flags:
            made = etc / Path(path).name
            made.write_text("")
            made.chmod(int(flags["-m"], 8))
    text = (DEPLOY / "gpuledger.example.toml").read_text().replace("/etc/gpuledger/", f"{etc}/")
    (etc / "gpuledger.toml").write_text(text)
    result = CliRunner().invoke(cli, ["config", "check", "--config", str(etc / "gpuledger.toml")])
    assert result.exit_code == 0, result.output


def test_every_extra_an_install_line_names_is_declared():
    root = DEPLOY.parent
    declared = set(
        tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    texts = [*pages(), *sorted(root.glob("deploy/**/*.*"))]
    texts += sorted(p for pkg in ("app", "collector") for p in (root / pkg).rglob("*.py"))
    named = {
        (path.name, extra)
        for path in texts
        for extra in re.findall(r"pip install '[^'\[]*\[([\w,-]+)\]'", path.read_text())
    }
    assert {extra for _, extra in named} >= {"dashboard", "k8s", "nvml"}
    for where, extras in named:
        assert set(extras.split(",")) <= declared, (where, extras)


def headings(text: str) -> set[str]:
    """A Markdown page's section titles (outside code blocks)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}


def test_deploy_files_point_at_docs_sections_that_exist():
    # `docs/operations/deploy.md, "On a Slurm cluster"`: the page, then one or more sections
    pointers = [
        (path.name, doc, name)
        for path in sorted(DEPLOY.rglob("*"))
        if path.is_file()
        for doc, ref in re.findall(
            r'(README|docs/[\w/.-]+\.md),? ((?:"[^"]+",? ?)+)', path.read_text()
        )
        for name in re.findall(r'"([^"]+)"', ref)
    ]
    assert len(pointers) >= 4
    for where, doc, name in pointers:
        assert doc != "README", f"{where}: point at the docs page, not the README"
        target = DEPLOY.parent / doc
        assert target.is_file(), f"{where}: no page {doc}"
        assert name in headings(target.read_text("utf-8")), f"{where}: {doc} has no {name!r}"


KEY_LINE = re.compile(r"^(?:# )?([a-z_]+) = ")
SECTION_LINE = re.compile(r"^(?:# )?\[{1,2}([a-z]+)\]{1,2}")


def test_every_key_of_the_example_configuration_is_explained_where_it_first_appears():
    lines = (DEPLOY / "gpuledger.example.toml").read_text().splitlines()
    section, seen, unexplained = "lake", set(), []
    for n, line in enumerate(lines):
        if match := SECTION_LINE.match(line):
            section = match.group(1)
            continue
        match = KEY_LINE.match(line)
        if match is None or (section, match.group(1)) in seen:
            continue
        seen.add((section, match.group(1)))
        above = n - 1  # the nearest line above that is not another key: a comment explains it
        while above >= 0 and KEY_LINE.match(lines[above]):
            above -= 1
        explained = "  # " in line.split(" = ", 1)[1] or (
            above >= 0 and lines[above].startswith("#") and not SECTION_LINE.match(lines[above])
        )
        if not explained:
            unexplained.append(f"{section}.{match.group(1)}")
    assert len(seen) > 25
    assert not unexplained, unexplained


def test_uncommenting_every_optional_line_of_the_example_still_passes_config_check(
    tmp_path, monkeypatch
):
    # The commented-out keys and [[sources]] are offers to the operator: each must be a real
    # key with a valid value (a typo there would only show when someone turns it on).
    for var in [v for v in os.environ if v.startswith("GPULEDGER_")]:
        monkeypatch.delenv(var)
    text = (DEPLOY / "gpuledger.example.toml").read_text()
    text = re.sub(r"(?m)^# (?=\[\[sources\]\]|[a-z_]+ = )", "", text)
    text = text.replace("/etc/gpuledger/", f"{tmp_path}/")
    example = tomllib.loads(text)
    assert example["alerts"]["test_mode"] is True  # a commented key was really turned on
    for key, value in example["alerts"].items():
        if key.endswith("_file") or key == "directory":
            Path(value).write_text("")
            Path(value).chmod(0o600)
    (tmp_path / "gpuledger.toml").write_text(text)
    result = CliRunner().invoke(
        cli, ["config", "check", "--config", str(tmp_path / "gpuledger.toml")]
    )
    assert result.exit_code == 0, result.output
    assert "test_mode = true  # file" in result.output
    cfg = load_config(tmp_path / "gpuledger.toml", environ={})
    assert {s.name for s in cfg.values["sources"]} == {
        "prometheus:della",
        "slurm:della",
        "dcgm-exporter:della",
        "kubernetes:k8s-prod",
    }


def unknown_fields(value: object, kind: str, where: str = "") -> list[str]:
    """Keys of `value` that the Kubernetes API type `kind` does not have (the official client's
    models carry the OpenAPI schema: `openapi_types`, `attribute_map`), recursively."""
    from kubernetes import client

    if kind.lower().startswith("list[") and isinstance(value, list):
        item = kind[5:-1]
        return [e for i, v in enumerate(value) for e in unknown_fields(v, item, f"{where}[{i}]")]
    scalars = ("object", "str", "int", "bool", "float", "datetime")
    if kind.lower().startswith(("dict(", "dict[")) or kind in scalars:
        return []
    model = getattr(client, kind)
    by_json = {model.attribute_map[a]: t for a, t in model.openapi_types.items()}
    if not isinstance(value, dict):
        return [f"{where}: expected an object for {kind}"]
    problems = []
    for key, item in value.items():
        if key not in by_json:
            problems.append(f"{where}.{key}: not a field of {kind}")
        else:
            problems += unknown_fields(item, by_json[key], f"{where}.{key}")
    return problems


def test_kubernetes_manifest_uses_only_fields_the_api_has():
    types = {
        "Namespace": "V1Namespace",
        "ServiceAccount": "V1ServiceAccount",
        "ClusterRole": "V1ClusterRole",
        "ClusterRoleBinding": "V1ClusterRoleBinding",
        "PersistentVolumeClaim": "V1PersistentVolumeClaim",
        "ConfigMap": "V1ConfigMap",
        "Deployment": "V1Deployment",
    }
    kinds = manifest()
    assert set(kinds) == set(types)
    for kind, doc in kinds.items():
        assert unknown_fields(doc, types[kind], kind) == []
    # the check can fail: a misspelt field is found
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    pod["enableServiceLink"] = False
    assert unknown_fields(kinds["Deployment"], "V1Deployment", "Deployment") == [
        "Deployment.spec.template.spec.enableServiceLink: not a field of V1PodSpec"
    ]


@pytest.mark.parametrize(
    "name", ["gpuledger.service", "gpuledger-dashboard.service", "gpuledger-serve.service"]
)
def test_each_unit_works_on_the_configured_lake_inside_its_writable_paths(
    name, tmp_path, monkeypatch
):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(DEPLOY / "systemd" / name)
    service = parser["Service"]
    # configparser keeps only the last of repeated keys: read Environment= from the file
    environment = dict(
        line.removeprefix("Environment=").split("=", 1)
        for line in (DEPLOY / "systemd" / name).read_text().splitlines()
        if line.startswith("Environment=")
    )
    assert environment["GPULEDGER_CONFIG"] == "/etc/gpuledger/gpuledger.toml"
    for var in [v for v in os.environ if v.startswith("GPULEDGER_")]:
        monkeypatch.delenv(var)
    for file in ("smtp-password", "directory.toml"):
        (tmp_path / file).write_text("")
        (tmp_path / file).chmod(0o600)
    text = (
        (DEPLOY / "gpuledger.example.toml").read_text().replace("/etc/gpuledger/", f"{tmp_path}/")
    )
    (tmp_path / "gpuledger.toml").write_text(text)
    for var, value in environment.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "gpuledger.toml"))
    argv = shlex.split(service["ExecStart"])[1:]
    ctx = cli.make_context("gpuledger", list(argv))
    with ctx:
        sub_name, sub, rest = cli.resolve_command(ctx, list(argv))
        assert sub is not None
        params = sub.make_context(sub_name or "", rest, parent=ctx).params
    given = params.get("lake")  # lake_option gives a Lake; `run` reads its own configuration
    lake = given.root if isinstance(given, Lake) else given or load_config().lake.root
    assert lake == Path(tomllib.loads(text)["lake"])
    writable = [Path(p) for p in service["ReadWritePaths"].split()]
    assert any(w == lake or w in lake.parents for w in writable), (lake, writable)
