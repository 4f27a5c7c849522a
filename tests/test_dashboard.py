"""docs/grafana-dashboard.json: it loads as a Grafana dashboard, its panels do not overlap,
and every metric its queries use is one the bot's registry serves."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from xbot.metrics import Metrics, Readings

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
METRIC = re.compile(r"\bxbot_[a-z0-9_]+\b")


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def served_names() -> set[str]:
    """Every sample name a bot with every instrument moved once serves."""
    m = Metrics()
    m.task_finished("deliver", "dead", site="x", latency=1.0)
    m.task_finished("deliver", "done", site="x", latency=1.0)
    m.sent(["url"])
    m.bot_api("sendPhoto", "429", 3.0)
    m.alerts.labels("x_down", "raised").inc()
    m.canary_checks.labels("fxtwitter", "ok").inc()
    m.readings = Readings(
        tasks={("deliver", "pending"): 1},
        ytdlp_age_seconds=1.0,
        breaker_open={"fxtwitter": False},
        source_failures={"fxtwitter": 1},
        source_successes={"fxtwitter": 1},
        source_answers={"fxtwitter": 1},
        canary_broken={"fxtwitter": False},
    )
    return {s.name for family in m.registry.collect() for s in family.samples}


def exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def test_it_is_an_importable_dashboard(dashboard: dict[str, Any]) -> None:
    assert dashboard["title"]
    assert dashboard["uid"]
    assert isinstance(dashboard["schemaVersion"], int)
    # Imported through Grafana's "Import dashboard": the data source is asked for once.
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["title"]
        assert panel["type"] in {"timeseries", "stat"}
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids))


def test_panels_fit_the_grid_without_overlapping(dashboard: dict[str, Any]) -> None:
    taken: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        assert g["x"] >= 0, panel["title"]
        assert g["w"] > 0, panel["title"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        cells = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


def test_every_metric_a_query_uses_is_served(dashboard: dict[str, Any]) -> None:
    served = served_names()
    used = {name for expr in exprs(dashboard) for name in METRIC.findall(expr)}
    assert used, "the dashboard queries no xbot metric"
    assert used - served == set()
    for expr in exprs(dashboard):
        assert expr.count("(") == expr.count(")"), expr
        assert expr.count("{") == expr.count("}"), expr


@pytest.mark.parametrize(
    "needed",
    ["Deliveries per minute", "latency", "Queue backlog", "Oldest runnable", "429s",
     "X sources", "Telegram reachable"],
)  # fmt: skip
def test_the_panels_an_operator_opens_first_are_there(
    dashboard: dict[str, Any], needed: str
) -> None:
    assert any(needed.lower() in p["title"].lower() for p in dashboard["panels"])


def test_deployment_shows_a_scrape_config_for_the_listener() -> None:
    text = (ROOT / "docs" / "deployment.md").read_text()
    assert "scrape_configs:" in text
    assert "metrics_path: /metrics" in text
    assert "grafana-dashboard.json" in text
    assert "XBOT_METRICS_ADDR" in text
