"""Telegram's hold: the pure state machine over an injected `now`, and its shell, the one
owner of "Telegram answers" (moved by the sender and by every call `CountingRequest` sees)."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from xbot.errors import TelegramUnreachable
from xbot.sending.telegram_health import (
    FIRST_PROBE,
    PROBE_CAP,
    Hold,
    TelegramHealth,
    admit,
    answered,
    failed,
    hastened,
    probe_delay,
    read_record,
    released,
    wait,
)

T0 = 1000.0
UP = Hold()


@pytest.mark.parametrize(
    ("failures", "jitter", "expected"),
    [
        (1, 0.0, FIRST_PROBE / 2),
        (1, 0.999999, FIRST_PROBE),
        (2, 0.0, FIRST_PROBE),
        (3, 0.0, 2 * FIRST_PROBE),
        (5, 0.0, 8 * FIRST_PROBE),
        (5, 0.999999, 16 * FIRST_PROBE),  # 16 s: still under the 30 s cap
        (6, 0.0, PROBE_CAP / 2),  # 32 s would be over it
        (7, 0.0, PROBE_CAP / 2),
        (10_000, 0.0, PROBE_CAP / 2),  # no overflow however long the outage
        (10_000, 0.999999, PROBE_CAP),
        (0, 0.0, FIRST_PROBE / 2),
    ],
    ids=["first", "first-max", "second", "third", "fifth", "fifth-max", "sixth", "seventh", "huge",
         "huge-max", "zero"],
)  # fmt: skip
def test_probe_delay(failures: int, jitter: float, expected: float) -> None:
    assert probe_delay(failures, jitter=jitter) == pytest.approx(expected, rel=1e-5)


def test_the_cap_lets_a_recovered_telegram_wait_at_most_half_a_minute() -> None:
    worst = max(probe_delay(n, jitter=0.999999) for n in range(1, 200))
    assert worst <= PROBE_CAP <= 60.0


@pytest.mark.parametrize(
    ("first", "cap", "jitter"),
    [(0.0, 30.0, 0.5), (31.0, 30.0, 0.5), (1.0, float("inf"), 0.5), (1.0, 30.0, 1.0)],
    ids=["first-zero", "first-over-cap", "cap-inf", "jitter-one"],
)
def test_probe_delay_refuses_nonsense(first: float, cap: float, jitter: float) -> None:
    with pytest.raises(ValueError, match=r"must|need"):
        probe_delay(1, jitter=jitter, first=first, cap=cap)


def test_a_failure_starts_the_hold_and_only_the_probe_goes() -> None:
    held = failed(UP, T0, jitter=0.0)
    assert not held.reachable
    assert held == Hold(down_at=T0, failures=1, next_probe=T0 + FIRST_PROBE / 2)
    # Before the probe is due: everyone waits, nobody takes it.
    assert admit(held, T0 + 0.1) == (held, pytest.approx(FIRST_PROBE / 2 - 0.1))
    # Due: the first caller is the probe; the next waits while it is out.
    probing, left = admit(held, T0 + 1.0)
    assert left == 0.0
    assert probing.probing
    assert wait(probing, T0 + 1.0) > 0
    assert admit(probing, T0 + 99.0)[1] > 0  # one probe at a time, however late


def test_a_failed_probe_moves_the_next_one_out_and_keeps_down_at() -> None:
    hold = failed(UP, T0, jitter=0.0)
    gaps = []
    for n in range(2, 12):
        probing, _ = admit(hold, hold.next_probe)
        before = hold.next_probe
        hold = failed(probing, before, jitter=0.0)
        gaps.append(hold.next_probe - before)
        assert hold.failures == n
        assert hold.down_at == T0
        assert not hold.probing
    assert gaps == [1.0, 2.0, 4.0, 8.0] + [PROBE_CAP / 2] * 6  # it grew, then stayed at the cap


def test_any_answer_ends_the_hold() -> None:
    hold, _ = admit(failed(UP, T0, jitter=0.3), T0 + 5)
    assert answered(hold) == UP
    assert admit(UP, T0) == (UP, 0.0)
    assert wait(UP, T0) == 0.0


def test_a_cancelled_probe_frees_the_next() -> None:
    hold, _ = admit(failed(UP, T0, jitter=0.0), T0 + 5)
    assert hold.probing
    freed = released(hold)
    assert not freed.probing
    assert admit(freed, T0 + 5)[1] == 0.0


@pytest.mark.parametrize(
    ("hold", "expected"),
    [
        (UP, UP),
        (Hold(T0, 3, T0 + 20.0), Hold(T0, 3, T0 + 5.0)),  # the probe now; failures kept
        (Hold(T0, 3, T0 + 1.0), Hold(T0, 3, T0 + 1.0)),  # already due: unchanged
        (Hold(T0, 3, T0 + 20.0, probing=True), Hold(T0, 3, T0 + 20.0, probing=True)),
    ],
    ids=["reachable", "held", "already-due", "probe-out"],
)
def test_hastened_brings_only_a_waiting_probe_forward(hold: Hold, expected: Hold) -> None:
    assert hastened(hold, T0 + 5.0) == expected


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_the_shell_logs_once_per_change_and_tells_listeners(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    record = tmp_path / "telegram-health.json"
    health = TelegramHealth(clock=clock, wall=lambda: 1.7e9, record_path=record,
                            rng=random.Random(1))  # fmt: skip
    told: list[bool] = []
    health.add_listener(told.append)
    assert health.reachable
    assert health.down_since is None
    assert health.held_until is None
    assert health.admit() is False  # reachable: not a probe

    caplog.set_level(logging.DEBUG, "xbot.sending.telegram_health")
    health.failed("NetworkError: Bad Gateway (502)")
    assert not health.reachable
    assert health.down_since == 1.7e9
    assert health.held_until is not None
    with pytest.raises(TelegramUnreachable) as info:
        health.admit()
    assert info.value.held
    assert not info.value.ambiguous
    assert "Bad Gateway" in info.value.reason
    assert health.lease_wait() > 0
    rec = read_record(tmp_path)
    assert rec is not None
    assert not rec.reachable
    assert rec.down_since == 1.7e9
    assert record.stat().st_mode & 0o777 == 0o600, "private, like the rest of the data dir"

    clock.now += PROBE_CAP  # the probe is due
    assert health.lease_wait() == 0.0
    assert health.admit() is True  # this call is the probe
    with pytest.raises(TelegramUnreachable):
        health.check()  # and nobody else goes beside it
    health.failed("NetworkError: httpx.ConnectError")  # probe failed: no new state line
    clock.now += PROBE_CAP
    assert health.admit() is True
    health.answered()
    assert health.reachable
    assert health.down_since is None
    health.answered()  # already up: nothing more to say
    assert told == [False, True]
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 2
    assert lines[0].startswith("telegram unreachable")
    assert lines[1].startswith("telegram reachable again")
    rec = read_record(tmp_path)
    assert rec is not None
    assert rec.reachable
    assert rec.down_since is None
    assert health.outages == 1


def test_a_listener_that_raises_does_not_stop_the_sender() -> None:
    health = TelegramHealth(clock=Clock())

    def broken(_: bool) -> None:
        raise RuntimeError("a reader's bug")

    health.add_listener(broken)
    health.failed("TimedOut")
    assert not health.reachable


def test_no_record_reads_as_none(tmp_path: Path) -> None:
    assert read_record(tmp_path) is None
    (tmp_path / "telegram-health.json").write_text("{not json")
    assert read_record(tmp_path) is None


# -- the calls around the hold (getUpdates, the start-up's): `observed` ----------------------


@pytest.mark.parametrize(
    ("results", "reachable", "changes"),
    [
        (["ok", "ok"], True, []),
        (["5xx"], False, [False]),
        (["network", "5xx", "network"], False, [False]),
        (["network", "429"], True, [False, True]),
        (["network", "4xx", "5xx", "ok"], True, [False, True, False, True]),
    ],
    ids=["steady", "a-502", "stays-down", "a-429-is-an-answer", "flapping"],
)
def test_calls_around_the_hold_move_the_fact_not_the_hold(
    tmp_path: Path, results: list[str], reachable: bool, changes: list[bool]
) -> None:
    health = TelegramHealth(clock=Clock(), wall=lambda: 1000.0,
                            record_path=tmp_path / "telegram-health.json")  # fmt: skip
    health.write_record()  # as the app does at start
    told: list[bool] = []
    health.add_listener(told.append)
    heard: list[bool] = []
    for result in results:
        was = health.reachable
        health.observed("getUpdates", result)
        if health.reachable != was:
            heard.append(health.reachable)
        assert health.held_until is None, "no hold: nothing was sent"
        assert health.lease_wait() == 0.0
    assert health.reachable is reachable
    assert heard == changes
    assert health.down_since == (None if reachable else 1000.0)
    assert health.outages == changes.count(False)
    assert told == [], "the listeners hear of the hold, which never stood"
    rec = read_record(tmp_path)
    assert rec is not None
    assert (rec.reachable, rec.down_since) == (reachable, health.down_since)
    if not reachable:
        assert health.last_error in ("getUpdates: 5xx", "getUpdates: no answer")


def test_the_holds_own_calls_are_the_senders_to_tell() -> None:
    """`CountingRequest` sees the sender's calls too: inside `admitted` its word is not
    counted a second time (the sender's classification is the one)."""
    health = TelegramHealth(clock=Clock())
    with health.admitted() as probe:
        assert probe is False
        health.observed("sendPhoto", "5xx")
        assert health.reachable
        health.failed("NetworkError: Bad Gateway (502)")
    assert not health.reachable
    assert health.hold.failures == 1
    health.observed("sendPhoto", "5xx")  # outside: a call around the hold
    assert health.hold.failures == 1


def test_sends_failing_while_getupdates_answers_keep_the_hold() -> None:
    """The stand-in's `send` outage: each getUpdates answers, the hold stands, its
    backoff grows; an answer around the hold ends no hold (else: a storm of sends)."""
    clock = Clock()
    health = TelegramHealth(clock=clock, rng=random.Random(2))
    told: list[bool] = []
    health.add_listener(told.append)
    health.failed("NetworkError: Bad Gateway (502)")
    for n in range(2, 8):
        held = health.hold
        for _ in range(5):
            health.observed("getUpdates", "ok")
            assert health.hold == held
        clock.now = held.next_probe
        assert health.admit() is True
        health.failed("NetworkError: Bad Gateway (502)")
        assert health.hold.failures == n
    assert not health.reachable
    assert told == [False]
    assert health.outages == 1


def test_getupdates_back_after_failing_brings_the_probe_forward(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    health = TelegramHealth(clock=clock, rng=random.Random(3))
    told: list[bool] = []
    health.add_listener(told.append)
    for _ in range(6):  # a long outage of every method: the probe is far out
        health.failed("NetworkError: httpx.ConnectError")
    far = health.hold.next_probe
    assert far - clock.now >= PROBE_CAP / 2
    health.observed("getUpdates", "network")
    health.observed("getUpdates", "network")
    assert health.hold.next_probe == far
    assert health.lease_wait() > 0
    clock.now += 1.0
    caplog.set_level(logging.INFO, "xbot.sending.telegram_health")
    health.observed("getUpdates", "ok")  # Telegram answers the poller again
    assert health.hold.next_probe == clock.now
    assert health.hold.failures == 6, "a probe that fails still backs off"
    assert not health.reachable, "the probe decides, not getUpdates"
    assert health.lease_wait() == 0.0
    assert told == [False, True]  # the workers are woken for the probe
    assert caplog.records[-1].getMessage() == "telegram answers again, probing now call=getUpdates"
    health.observed("getUpdates", "ok")  # once per recovery, not per answer
    assert told == [False, True]
    assert health.admit() is True
    health.observed("getUpdates", "network")
    health.observed("getUpdates", "ok")  # a probe is out: nothing to bring forward
    assert health.hold.probing
    assert told == [False, True]
    health.answered()
    assert health.reachable
    assert told == [False, True, True]
    assert health.outages == 1


def test_an_answer_through_the_hold_clears_a_failure_around_it(tmp_path: Path) -> None:
    """A start-up call or getUpdates failed, then a send is answered: Telegram answers."""
    health = TelegramHealth(clock=Clock(), wall=lambda: 1.7e9,
                            record_path=tmp_path / "telegram-health.json")  # fmt: skip
    health.observed("getMe", "network")
    assert not health.reachable
    assert health.down_since == 1.7e9
    assert health.last_error == "getMe: no answer"
    rec = read_record(tmp_path)
    assert rec is not None
    assert not rec.reachable
    with health.admitted() as probe:
        assert probe is False, "no hold: a failure around it holds nothing"
        health.observed("sendMessage", "ok")
        assert not health.reachable, "the sender tells, not the request"
        health.answered()
    assert health.reachable
    assert health.down_since is None
    rec = read_record(tmp_path)
    assert rec is not None
    assert rec.reachable
    assert health.outages == 1


def test_a_hold_over_a_failure_around_it_is_one_outage() -> None:
    health = TelegramHealth(clock=Clock(), wall=lambda: 1.7e9)
    health.observed("getUpdates", "5xx")
    health.failed("NetworkError: Bad Gateway (502)")  # then a send: the hold starts
    assert health.held_until is not None
    assert health.outages == 1
    assert health.down_since == 1.7e9
    assert health.last_error == "NetworkError: Bad Gateway (502)"
    health.observed("getUpdates", "network")  # while held, the hold's error says more
    assert health.last_error == "NetworkError: Bad Gateway (502)"


def test_only_the_failed_methods_own_answer_brings_the_probe_forward() -> None:
    """The soak's `tgdown`: in a `send` outage the start-up's setMyCommands fails while
    getUpdates answers. getUpdates' answers say nothing of setMyCommands: no early
    probe at each retry (a storm), and the fact does not flap either."""
    clock = Clock()
    health = TelegramHealth(clock=clock, rng=random.Random(4))
    told: list[bool] = []
    health.add_listener(told.append)
    health.failed("NetworkError: Bad Gateway (502)")  # the backlog's first send
    for _ in range(4):
        health.observed("setMyCommands", "5xx")
        held = health.hold
        health.observed("getUpdates", "ok")
        assert health.hold == held
    assert told == [False]
    health.observed("setMyCommands", "ok")  # its own answer: the sends' side may be back
    assert health.lease_wait() == 0.0
    assert told == [False, True]
    health.answered()  # the probe
    assert health.reachable

    idle = TelegramHealth(clock=clock)  # nothing to send: no hold, the fact alone
    idle.observed("setMyCommands", "5xx")
    for _ in range(3):
        idle.observed("getUpdates", "ok")
        assert not idle.reachable
    idle.observed("setMyCommands", "ok")
    assert idle.reachable
    assert idle.outages == 1
