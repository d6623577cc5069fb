"""The deploy files: promtool passes, the dashboard references its provisioned datasource by
uid, and the compose file is valid, mounts only paths that exist and runs only real
`goalfleet` subcommands with options they accept. (No Docker engine here: nothing is built or
started by Docker; see test_compose_commands.py for the commands started locally.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROM = DEPLOY / "prometheus"
GRAFANA = DEPLOY / "grafana"
COMPOSE = ROOT / "docker-compose.yml"

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (apt-get install prometheus)"
)
needs_compose = pytest.mark.skipif(
    shutil.which("docker-compose") is None,
    reason="docker-compose not installed (apt-get install docker-compose)",
)


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def goalfleet_services() -> dict[str, dict[str, Any]]:
    return {
        name: svc
        for name, svc in compose()["services"].items()
        if svc.get("image") == "goalfleet:local"
    }


def dashboard() -> dict[str, Any]:
    return json.loads((GRAFANA / "dashboards" / "goalfleet.json").read_text())


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@needs_promtool
@pytest.mark.parametrize(
    "argv",
    [
        ("check", "config", "prometheus.yml"),
        ("check", "rules", "alerts.yml"),
        ("test", "rules", "alerts_test.yml"),
    ],
    ids=["check-config", "check-rules", "test-rules"],
)
def test_promtool(argv: tuple[str, ...]) -> None:
    """`promtool check config`, `check rules` and the alert unit tests pass."""
    result = subprocess.run(
        ["promtool", *argv], cwd=PROM, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_targets_carry_farm_host_platform() -> None:
    """Every worker target file lists targets labelled with farm, host and platform."""
    files = sorted((PROM / "targets" / "workers").glob("*.json"))
    files += sorted((PROM / "targets" / "workers").glob("*.json.example"))
    assert files
    for f in files:
        groups = json.loads(f.read_text())
        for group in groups:
            assert group["targets"]
            assert {"farm", "host", "platform"} <= set(group["labels"]), f.name
            assert "device" not in group["labels"], "worker_info carries the device"


def test_dashboard_uses_the_provisioned_datasource_uid() -> None:
    """The datasource uid is fixed in provisioning and every panel/target refers to it."""
    provisioned = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "goalfleet.yml").read_text()
    )
    ds, history = provisioned["datasources"]
    uid = ds["uid"]
    assert history["type"] == "grafana-postgresql-datasource"
    text = (GRAFANA / "dashboards" / "goalfleet.json").read_text()
    assert "${DS_" not in text
    assert "__inputs" not in text
    dash = dashboard()
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels:
        if p["datasource"]["uid"] == history["uid"]:  # the run history's panels: SQL
            assert p["datasource"]["type"] == history["type"], p["title"]
            assert all(t["rawSql"].strip() for t in p["targets"]), p["title"]
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": uid}, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == uid
            assert t["expr"].strip()
    for var in dash["templating"]["list"]:
        assert var["datasource"]["uid"] == uid
    providers = yaml.safe_load(
        (GRAFANA / "provisioning" / "dashboards" / "goalfleet.yml").read_text()
    )
    assert providers["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_dashboard_covers_the_issue() -> None:
    """Runs by status, phase latency p50/p95, tokens, utilisation, queue depth, devices up /
    quarantined, API errors: each has a panel querying the metric."""
    exprs = " ".join(
        t.get("expr") or t["rawSql"] for p in dashboard()["panels"] for t in p.get("targets", [])
    )
    for needle in (
        "sum by (status) (rate(goalfleet_runs_total",
        "histogram_quantile(0.5, sum by (le, phase) (rate(goalfleet_step_phase_seconds_bucket",
        "histogram_quantile(0.95, sum by (le, phase) (rate(goalfleet_step_phase_seconds_bucket",
        "goalfleet_decide_tokens_total",
        "goalfleet_device_busy",
        "goalfleet_device_queue_depth",
        "goalfleet_device_up",
        "goalfleet_device_quarantined",
        'goalfleet_api_requests_total{code=~"5.."}',
        "SUM(flipped)::float / NULLIF(SUM(follows), 0)",  # the history's flaky rate
        "WHERE cum * 100 >= 95 * steps",  # and its step p95 from the step-time counts
    ):
        assert needle in exprs, needle


def test_dockerfile_copies_what_exists() -> None:
    """Every path the Dockerfile copies exists in the repository (the build context)."""
    text = (DEPLOY / "Dockerfile").read_text()
    for src in re.findall(r"^COPY (.+) \S+$", text, flags=re.MULTILINE):
        for path in src.split():
            assert (ROOT / path).exists(), path


@needs_compose
def test_docker_compose_config_is_valid() -> None:
    """Debian's docker-compose (1.29) validates the file without a Docker engine."""
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_compose_redis_keeps_queued_runs() -> None:
    """AOF on and noeviction: a restart or full memory must not drop queued runs."""
    cmd = " ".join(compose()["services"]["redis"]["command"])
    assert "--appendonly yes" in cmd
    assert "--maxmemory-policy noeviction" in cmd


def test_compose_mounts_exist() -> None:
    """Every host path the compose file binds exists (defaults of ${VAR:-default} taken)."""
    binds = []
    for name, svc in compose()["services"].items():
        for vol in svc.get("volumes", []):
            src = vol.split(":", 1)[0] if not vol.startswith("$") else vol.split("}", 1)[0]
            m = re.fullmatch(r"\$\{[A-Z_]+:-(.+)", src)
            if m:
                src = m.group(1)
            if src.startswith((".", "/")):
                binds.append((name, src))
    assert binds
    for name, src in binds:
        assert (ROOT / src).resolve().exists(), f"{name}: {src}"
    build = compose()["x-goalfleet"]["build"]
    assert (ROOT / build["context"] / build["dockerfile"]).exists()


def test_prometheus_token_file_resolves_where_compose_mounts_it() -> None:
    """prometheus.yml's relative credentials_file lands on the path compose mounts the token."""
    config = yaml.safe_load((PROM / "prometheus.yml").read_text())
    (api_job,) = [j for j in config["scrape_configs"] if j["job_name"] == "goalfleet-api"]
    rel = api_job["authorization"]["credentials_file"]
    mounted = {
        v.rsplit(":", 2)[1] if v.count(":") >= 2 else v.split(":")[1]
        for v in compose()["services"]["prometheus"]["volumes"]
    }
    assert str((Path("/etc/prometheus") / rel).resolve()) in mounted
    assert (PROM / rel).resolve() == (DEPLOY / "secrets" / "api-token").resolve()


def _flags(argv: list[str]) -> list[str]:
    return [a for a in argv if a.startswith("--")]


@pytest.mark.parametrize("service", sorted(goalfleet_services()))
def test_compose_commands_are_real_goalfleet_subcommands(service: str) -> None:
    """`goalfleet <cmd> --help` exits 0 and lists every option the service passes."""
    argv = [str(a) for a in goalfleet_services()[service]["command"]]
    result = run(sys.executable, "-m", "scheduler", argv[0], "--help")
    assert result.returncode == 0, result.stderr
    for flag in _flags(argv):
        assert flag in result.stdout, f"{service}: {flag} is not an option of {argv[0]}"


def test_dashboard_layout_has_no_overlaps() -> None:
    """Panels fit the 24-column grid and none covers another (Grafana would shove them)."""
    taken: dict[tuple[int, int], str] = {}
    for p in dashboard()["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in taken, f"{p['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = p["title"]
