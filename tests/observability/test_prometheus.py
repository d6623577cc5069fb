"""The real thing: a real Prometheus scrapes a real mini-fleet with the project's own scrape
config, and every dashboard expression and alert rule works against what it collected.

Mini-fleet: a real redis-server on a random loopback port, the API (uvicorn, real HTTP) and
the scheduler, two `goalfleet worker` processes (prefork, sim iOS and Android) each serving
/metrics from its main process. Prometheus gets `deploy/prometheus/` as shipped — only the
targets files (file_sd) point at this fleet, the token file holds this API's token, and the
intervals are shortened to 1 s so the test takes seconds, not minutes.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fleetkit import quick_settings

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis, free_port
from workers.core.model import RunStatus
from workers.processes import spawn
from workers.telemetry import logs

pytestmark = [
    pytest.mark.observability,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="apt-get install prometheus"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server missing"),
]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "prom-test-token"
SECRET = "Pr0m-secret-never-logged"
RUNS = 6
REQUEST_ID = "req-obs-1"
# Grafana's variables, as the dashboard is opened: all platforms, a window over the whole test
GRAFANA_VARS = {"$platform": ".*", "$__rate_interval": "3m", "$__range": "5m"}


@dataclass
class Stack:
    prom: str
    fleet: LocalFleet
    worker_ports: dict[str, int]
    log_dir: Path


def prometheus_config(dest: Path, fleet: LocalFleet, worker_ports: dict[str, int]) -> Path:
    """deploy/prometheus and deploy/secrets copied side by side (the relative paths hold),
    targets pointed at this fleet, intervals shortened."""
    shutil.copytree(ROOT / "deploy" / "prometheus", dest / "prometheus")
    (dest / "secrets").mkdir()
    (dest / "secrets" / "api-token").write_text(TOKEN)
    targets = dest / "prometheus" / "targets"
    for f in (*targets.glob("*/*.json"), *targets.glob("*/*.example")):
        f.unlink()
    platforms = {"ios-1": "ios", "android-1": "android"}
    (targets / "workers" / "test.json").write_text(
        json.dumps(
            [
                {
                    "targets": [f"127.0.0.1:{port}"],
                    "labels": {"farm": "test", "host": "localhost", "platform": platforms[d]},
                }
                for d, port in worker_ports.items()
            ]
        )
    )
    api = fleet.api_url.removeprefix("http://")
    (targets / "api" / "test.json").write_text(
        json.dumps([{"targets": [api], "labels": {"farm": "test"}}])
    )
    path = dest / "prometheus" / "prometheus.yml"
    config = yaml.safe_load(path.read_text())
    config["global"]["scrape_interval"] = "1s"
    config["global"]["evaluation_interval"] = "1s"
    for job in config["scrape_configs"]:
        job["scrape_interval"] = "1s"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("prom")
    logs.install_celery_hooks()  # as the API's composition root does: request id → task
    ports = {"ios-1": free_port(), "android-1": free_port()}
    workers = [
        SimWorker("ios-1", "ios", "17.5", latency_scale=0.05, metrics_port=ports["ios-1"],
                  loglevel="INFO"),
        SimWorker("android-1", "android", "14", latency_scale=0.05,
                  metrics_port=ports["android-1"], loglevel="INFO"),
    ]  # fmt: skip
    env = {"GOALFLEET_SECRET_PASSWORD": SECRET}
    with LocalRedis() as redis_server:
        settings = quick_settings(
            redis_server.url, key_prefix="gfprom", token=TOKEN, log_format="json"
        )
        with LocalFleet(settings, log_dir=tmp, extra_env=env) as fleet:
            fleet.start_all(workers)
            config = prometheus_config(tmp, fleet, ports)
            prom_port = free_port()
            prom = spawn(
                [
                    "prometheus",
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                    "--log.level=warn",
                ],
                env=os.environ,
                log=tmp / "prometheus.log",
            )
            try:
                url = f"http://127.0.0.1:{prom_port}"
                wait_for(lambda: httpx.get(f"{url}/-/ready", timeout=2).status_code == 200, 30)

                def all_scraped() -> bool:  # a first sample of everything before the batch
                    found = query(url, 'count(up{job=~"goalfleet-.*"} == 1)')
                    return bool(found) and found[0]["value"][1] == "3"

                wait_for(all_scraped, 30)
                yield Stack(prom=url, fleet=fleet, worker_ports=ports, log_dir=tmp)
            finally:
                prom.stop(grace_s=10)


def wait_for(check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting")
        time.sleep(0.25)


def query(prom: str, expr: str) -> list[dict[str, Any]]:
    resp = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10)
    body = resp.json()
    assert body["status"] == "success", f"{expr}: {body.get('error')}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def grafana_expr(expr: str) -> str:
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"an unhandled dashboard variable in {expr}"
    return expr


def dashboard_targets() -> list[tuple[str, str]]:
    """Every Prometheus query of the dashboard (its PostgreSQL panels, the run history's,
    carry `rawSql` instead: not Prometheus's to answer)."""
    dash = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "goalfleet.json").read_text())
    return [
        (f"{p['title']} / {t['refId']}", t["expr"])
        for p in dash["panels"]
        for t in p.get("targets", [])
        if "rawSql" not in t
    ]


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


@pytest.fixture(scope="module")
def batch_done(stack: Stack) -> dict[str, Any]:
    """A batch of sign-ins through the API (plus one 404), then wait until both workers'
    runs are in Prometheus."""
    auth = {"Authorization": f"Bearer {TOKEN}", "X-Request-ID": REQUEST_ID}
    body = {
        "goal": "Sign in",
        "inputs": {"email": "ada@example.com"},
        "secrets": {"password": {"ref": "env:PASSWORD"}},
        "count": RUNS,
    }
    resp = httpx.post(f"{stack.fleet.api_url}/v1/batches", json=body, headers=auth, timeout=10)
    assert resp.status_code == 201, resp.text
    batch_id = resp.json()["id"]
    assert httpx.get(f"{stack.fleet.api_url}/v1/runs/nope", headers=auth).status_code == 404
    with stack.fleet.client() as client:
        batch = client.wait_batch(batch_id, timeout_s=60)
        assert batch.finished == RUNS
        # one run the rules decider is not sure enough for: parked for a person, who answers
        # (the escalation, question and answer series then have data)
        one = {k: v for k, v in body.items() if k != "count"}
        # a goal of its own, so no remembered (confident) answer from the batch applies
        unsure = client.submit_run({**one, "goal": "Sign in, unsure", "min_confidence": 0.99})
        deadline = time.monotonic() + 60
        while client.run(unsure.id).status is not RunStatus.AWAITING_ANSWER:
            assert time.monotonic() < deadline, client.run(unsure.id).status
            time.sleep(0.2)
        assert client.answer(unsure.id, {"blocked": True}).status is RunStatus.BLOCKED

    def scraped() -> bool:
        found = query(stack.prom, "sum(goalfleet_runs_total)")
        asked = query(stack.prom, "sum(goalfleet_questions_total)")
        return bool(found and asked) and float(found[0]["value"][1]) >= RUNS

    wait_for(scraped, 30)
    # one more scrape of everything after the last run, so rates have two points
    time.sleep(2.5)
    return {"batch": batch}


def test_targets_are_up_with_their_labels(stack: Stack, batch_done: dict[str, Any]) -> None:
    """Both workers (file_sd, farm/host/platform labels) and the API (bearer token) are up."""
    up = query(stack.prom, 'up{job=~"goalfleet-.*"}')
    jobs = sorted((r["metric"]["job"], r["metric"].get("platform", "")) for r in up)
    assert jobs == [
        ("goalfleet-api", ""),
        ("goalfleet-workers", "android"),
        ("goalfleet-workers", "ios"),
    ]
    assert all(r["value"][1] == "1" for r in up), up
    workers = [r for r in up if r["metric"]["job"] == "goalfleet-workers"]
    assert all(r["metric"]["farm"] == "test" and r["metric"]["host"] for r in workers)


def test_runs_counted_once_across_workers(stack: Stack, batch_done: dict[str, Any]) -> None:
    """The pool children's runs reach Prometheus through each worker's one endpoint: the
    fleet-wide total equals the batch, split over both platforms."""
    by_platform = {
        r["metric"]["platform"]: float(r["value"][1])
        for r in query(stack.prom, "sum by (platform) (goalfleet_runs_total)")
    }
    assert sum(by_platform.values()) == RUNS
    counts = batch_done["batch"].counts
    done = query(stack.prom, 'sum(goalfleet_runs_total{status="done"})')
    assert float(done[0]["value"][1]) == counts.get("done", 0)
    info = query(stack.prom, "goalfleet_worker_info")
    assert sorted(r["metric"]["device"] for r in info) == ["android-1", "ios-1"]
    devices = query(stack.prom, "max by (device) (goalfleet_device_up)")
    assert {r["metric"]["device"]: r["value"][1] for r in devices} == {
        "ios-1": "1",
        "android-1": "1",
    }


@pytest.mark.parametrize(("panel", "expr"), dashboard_targets(), ids=lambda v: str(v)[:60])
def test_dashboard_expression_returns_data(
    stack: Stack, batch_done: dict[str, Any], panel: str, expr: str
) -> None:
    """Every expression in the dashboard parses and returns at least one finite value."""
    result = query(stack.prom, grafana_expr(expr))
    assert result, f"{panel}: no data for {expr}"
    values = [float(r["value"][1]) for r in result]
    assert any(math.isfinite(v) for v in values), f"{panel}: only NaN for {expr}"


def test_alert_rules_parse_and_evaluate(stack: Stack, batch_done: dict[str, Any]) -> None:
    """Prometheus loaded every rule of alerts.yml, evaluated each without error, and each
    expression also runs as a plain query. None of them fires on a healthy fleet."""
    for rule in alert_rules():
        query(stack.prom, rule["expr"])

    def evaluated() -> bool:
        groups = httpx.get(f"{stack.prom}/api/v1/rules", timeout=5).json()["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return len(rules) == len(alert_rules()) and all(r["health"] == "ok" for r in rules)

    wait_for(evaluated, 15)
    groups = httpx.get(f"{stack.prom}/api/v1/rules", timeout=5).json()["data"]["groups"]
    rules = {r["name"]: r for g in groups for r in g["rules"]}
    assert set(rules) == {r["alert"] for r in alert_rules()}
    for name, rule in rules.items():
        assert rule.get("lastError", "") == "", name
        assert rule["state"] == "inactive", f"{name} is {rule['state']} on a healthy fleet"


def test_worker_logs_are_json_with_run_context_and_no_secret(
    stack: Stack, batch_done: dict[str, Any]
) -> None:
    """The workers wrote JSON lines; each run has its step and run lines with its ids; the
    request id of the submit reached the worker; the password appears nowhere."""
    lines = []
    for f in sorted(stack.log_dir.glob("worker-*.log")):
        text = f.read_text()
        assert SECRET not in text, f.name
        lines += [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    finished = [line for line in lines if line.get("event") == "run.finished"]
    assert len(finished) == RUNS
    assert {line["device_id"] for line in finished} == {"ios-1", "android-1"}
    steps = [line for line in lines if line.get("event") == "step.finished"]
    assert steps
    assert all(line.get("run_id") and "step" in line for line in steps)
    assert any(line.get("value") == logs.MASK for line in steps)
    assert any(line.get("request_id") == REQUEST_ID for line in finished)
    assert not [line for line in lines if re.search(SECRET, json.dumps(line))]
