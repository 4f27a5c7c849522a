"""The metrics' pieces: settings, names and labels, the per-bot registry, the counting
request, and the listener's answers (over real sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from telegram.error import NetworkError
from telegram.request import BaseRequest, RequestData

from xbot.config import check_settings, load_settings
from xbot.metrics import BOT_API_RESULTS, Metrics, Readings, api_method
from xbot.ops.listener import Listener
from xbot.ops.telemetry import Telemetry, routes
from xbot.sending.api_request import CountingRequest, result_of
from xbot.storage.db import open_store
from xbot.storage.link_cache import LinkCache
from xbot.storage.queue import TaskQueue
from xbot.tasks.vitals import Vitals

# -- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "addr"),
    [
        ({}, None),
        ({"XBOT_METRICS_ADDR": ""}, None),
        ({"XBOT_METRICS_ADDR": "127.0.0.1:9464"}, ("127.0.0.1", 9464)),
        ({"XBOT_METRICS_ADDR": "localhost:9464"}, ("localhost", 9464)),
        ({"XBOT_METRICS_ADDR": "[::1]:9464"}, ("::1", 9464)),
        ({"XBOT_METRICS_ADDR": "127.0.0.2:0"}, ("127.0.0.2", 0)),
        (
            {"XBOT_METRICS_ADDR": "0.0.0.0:9464", "XBOT_METRICS_PUBLIC": "1"},
            ("0.0.0.0", 9464),
        ),
        (
            {"XBOT_METRICS_ADDR": "[2001:db8::1]:9464", "XBOT_METRICS_PUBLIC": "yes"},
            ("2001:db8::1", 9464),
        ),
    ],
    ids=["unset", "empty", "loopback", "localhost", "ipv6-loopback", "port-0", "public", "v6"],
)
def test_metrics_addr(env: dict[str, str], addr: tuple[str, int] | None) -> None:
    assert load_settings(env).metrics_addr == addr


@pytest.mark.parametrize(
    ("env", "setting", "words"),
    [
        ({"XBOT_METRICS_ADDR": "0.0.0.0:9464"}, "XBOT_METRICS_ADDR", "XBOT_METRICS_PUBLIC=1"),
        ({"XBOT_METRICS_ADDR": "[::]:9464"}, "XBOT_METRICS_ADDR", "not a loopback"),
        ({"XBOT_METRICS_ADDR": "metrics.example:9464"}, "XBOT_METRICS_ADDR", "not a loopback"),
        ({"XBOT_METRICS_ADDR": "9464"}, "XBOT_METRICS_ADDR", "host:port"),
        ({"XBOT_METRICS_ADDR": "127.0.0.1:http"}, "XBOT_METRICS_ADDR", "whole number"),
        ({"XBOT_METRICS_ADDR": "127.0.0.1:70000"}, "XBOT_METRICS_ADDR", "out of range"),
        ({"XBOT_METRICS_PUBLIC": "maybe"}, "XBOT_METRICS_PUBLIC", "yes/no"),
        ({"XBOT_ALERT_AFTER_S": "0"}, "XBOT_ALERT_AFTER_S", "out of range"),
    ],
    ids=[
        "public-refused",
        "v6-any",
        "a-name",
        "no-host",
        "port-word",
        "port-range",
        "public-word",
        "alert-zero",
    ],
)
def test_each_bad_value_is_one_line_naming_the_setting(
    env: dict[str, str], setting: str, words: str
) -> None:
    settings, problems = check_settings(env)
    assert settings is None
    assert len(problems) == 1
    assert problems[0].startswith(f"{setting}: ")
    assert words in problems[0]


def test_defaults_are_off() -> None:
    assert load_settings({}).metrics_addr is None
    assert load_settings({}).alert_after == 300.0
    assert load_settings({"XBOT_ALERT_AFTER_S": "60"}).alert_after == 60.0


# -- names and labels ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "method"),
    [
        ("https://api.telegram.org/bot123:abc/sendPhoto", "sendPhoto"),
        ("http://127.0.0.1:8081/bot123:abc/getUpdates", "getUpdates"),
        ("https://api.telegram.org/file/bot123:abc/photos/file_1.jpg", "file"),
        ("https://api.telegram.org/file/bot123:abc/videos/file", "file"),
        ("https://api.telegram.org/bot123:abc/", "file"),
        ("https://api.telegram.org/bot123:abc/send_Photo2", "file"),
    ],
    ids=["send", "local", "download", "download-no-suffix", "no-method", "not-a-method"],
)
def test_api_method_is_a_method_name_or_file(url: str, method: str) -> None:
    assert api_method(url) == method


@pytest.mark.parametrize(
    ("status", "result"),
    [(200, "ok"), (204, "ok"), (400, "4xx"), (403, "4xx"), (429, "429"), (500, "5xx"),
     (502, "5xx")],
    ids=["200", "204", "400", "403", "429", "500", "502"],
)  # fmt: skip
def test_result_of(status: int, result: str) -> None:
    assert result_of(status) == result
    assert result in BOT_API_RESULTS


def test_each_bot_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()  # the same names twice: no DuplicateTimeseries
    first.bot_api("sendPhoto", "ok")
    assert (
        first.registry.get_sample_value(
            "xbot_bot_api_requests_total", {"method": "sendPhoto", "result": "ok"}
        )
        == 1
    )
    assert second.registry.get_sample_value(
        "xbot_bot_api_requests_total", {"method": "sendPhoto", "result": "ok"}
    ) is None  # fmt: skip


def test_names_follow_prometheus_rules() -> None:
    m = Metrics()
    m.task_finished("deliver", "done", site="x", latency=1.5)
    m.readings = Readings(ytdlp_age_seconds=86400.0, breaker_open={"fxtwitter": True})
    for family in m.registry.collect():
        assert family.name.startswith("xbot_")
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)
        for unit in ("seconds", "bytes"):
            if unit in family.name:
                assert family.name.endswith(unit), family.name


@pytest.mark.parametrize(
    ("outcome", "site", "delivered", "dead"),
    [("done", "x", 1, 0), ("done", None, 0, 0), ("retry", "x", 0, 0), ("dead", None, 0, 1),
     ("chat_unavailable", None, 0, 1)],
    ids=["delivered", "answered-in-words", "retry", "dead", "chat-gone"],
)  # fmt: skip
def test_task_finished(outcome: str, site: str | None, delivered: int, dead: int) -> None:
    m = Metrics()
    m.task_finished("deliver", outcome, site=site, latency=2.0)
    get = m.registry.get_sample_value
    assert (get("xbot_deliveries_total", {"site": "x"}) or 0) == delivered
    assert (get("xbot_dead_letters_total", {"kind": "deliver"}) or 0) == dead
    assert (get("xbot_delivery_latency_seconds_count", {"site": "x"}) or 0) == delivered


# -- the counting request -----------------------------------------------------------------


class ScriptedRequest(BaseRequest):
    """A real `BaseRequest` answering from a script: (status, body) or an exception."""

    def __init__(self, *answers: tuple[int, bytes] | Exception) -> None:
        self.answers = list(answers)

    @property
    def read_timeout(self) -> float | None:
        return 5.0

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    async def do_request(
        self, url: str, method: str, *args: Any, **kwargs: Any
    ) -> tuple[int, bytes]:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_counting_request_reports_each_result_and_changes_nothing() -> None:
    seen: list[tuple[str, str, float]] = []
    inner = ScriptedRequest(
        (200, b'{"ok":true,"result":[]}'),
        (429, b'{"ok":false,"error_code":429,"parameters":{"retry_after":7}}'),
        (502, b"<html>Bad Gateway</html>"),
        NetworkError("connection refused"),
    )
    request = CountingRequest(inner, api_method, lambda *r: seen.append(r))
    url = "http://127.0.0.1:1/bot1:a/getUpdates"
    assert await request.do_request(url, "POST", RequestData()) == (200, b'{"ok":true,"result":[]}')
    assert (await request.do_request(url, "POST"))[0] == 429
    assert (await request.do_request(url, "POST"))[0] == 502
    with pytest.raises(NetworkError):
        await request.do_request(url, "POST")
    assert seen == [
        ("getUpdates", "ok", 0.0),
        ("getUpdates", "429", 7.0),
        ("getUpdates", "5xx", 0.0),
        ("getUpdates", "network", 0.0),
    ]
    assert request.read_timeout == 5.0


# -- the listener -------------------------------------------------------------------------


class State:
    """What the listener's answers depend on: updates coming in, Telegram answering."""

    def __init__(self) -> None:
        self.running = True
        self.reachable = True

    @property
    def down_since(self) -> float | None:
        return None if self.reachable else 0.0


@pytest.fixture
async def telemetry(tmp_path: Path) -> Any:
    pool = await open_store(tmp_path / "x.sqlite3")
    state = State()
    vitals = Vitals(chains=[], telegram=state, ytdlp_version="2025.01.15", data_dir=tmp_path)
    t = Telemetry(
        metrics=Metrics(), queue=TaskQueue(pool), pool=pool, cache=LinkCache(pool),
        db_path=tmp_path / "x.sqlite3", vitals=vitals, receiver=state,
    )  # fmt: skip
    listener = Listener("127.0.0.1", 0, routes(t))
    await listener.start()
    try:
        yield t, listener, state, pool
    finally:
        await listener.stop()
        await pool.close()


async def test_readiness_names_what_is_missing(telemetry: Any) -> None:
    _t, listener, state, pool = telemetry
    url = f"http://127.0.0.1:{listener.port}"
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        assert (await client.get(url + "/readyz")).status_code == 200
        state.running = False
        answer = await client.get(url + "/readyz")
        assert (answer.status_code, answer.text) == (
            503, "not ready: polling (or the webhook server) is not running\n")  # fmt: skip
        state.running = True
        state.reachable = False
        answer = await client.get(url + "/readyz")
        assert answer.status_code == 503
        assert answer.text == "not ready: Telegram's Bot API is not answering since 00:00:00 UTC\n"
        state.reachable = True
        await pool.close()  # no database to write to
        answer = await client.get(url + "/readyz")
        assert answer.status_code == 503
        assert "database" in answer.text
        # The counters are still served, from the last readings.
        assert (await client.get(url + "/metrics")).status_code == 200


async def test_metrics_parse_and_show_the_queue(telemetry: Any) -> None:
    _t, listener, _, pool = telemetry
    await TaskQueue(pool).enqueue("deliver", "{}", 5, now=0.0)
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        text = (await client.get(f"http://127.0.0.1:{listener.port}/metrics")).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert samples[("xbot_tasks", (("kind", "deliver"), ("state", "pending")))] == 1
    assert samples[("xbot_queue_oldest_runnable_age_seconds", ())] > 1_000_000
    assert samples[("xbot_ytdlp_age_seconds", ())] > 0


@pytest.mark.parametrize(
    "request_bytes",
    [b"garbage\r\n\r\n", b"GET /livez\r\n\r\n", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n"],
    ids=["junk", "no-version", "too-long"],
)
async def test_a_bad_request_gets_an_answer_or_a_close_never_a_hang(
    telemetry: Any, request_bytes: bytes
) -> None:
    _, listener, _, _ = telemetry
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(request_bytes)
    await writer.drain()
    async with asyncio.timeout(5):
        answer = await reader.read()
    writer.close()
    await writer.wait_closed()
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400")
