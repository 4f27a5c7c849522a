"""The breaker's arithmetic (pure), the chain's rules over fake sources, the outage backoff."""

from __future__ import annotations

import asyncio
import logging

import attrs
import pytest

from xbot.errors import AllSourcesDown, FetchError, PostUnavailable, TransientFetch
from xbot.links import Link
from xbot.media.models import Post
from xbot.sources.x import (
    DELETED,
    PRIVATE,
    BreakerPolicy,
    BreakerState,
    SourceChain,
    SourceHealth,
    Verdict,
    admit,
    failed,
    snowflake_time,
    succeeded,
)
from xbot.tasks.backoff import compute_outage_delay

POLICY = BreakerPolicy(threshold=3, window=60.0, cool_down=30.0, max_cool_down=120.0)


# -- the breaker, as a pure function ----------------------------------------------------------


def _run(events: list[tuple[float, str]]) -> list[tuple[str, BreakerState]]:
    """Feed (time, event) through the pure functions; event: ask | ok | fail."""
    state, out = BreakerState(), []
    for now, event in events:
        if event == "ask":
            verdict, state = admit(state, POLICY, now)
            out.append((verdict.value, state))
        elif event == "ok":
            state = succeeded(state)
            out.append(("ok", state))
        else:
            state = failed(state, POLICY, now)
            out.append(("fail", state))
    return out


def test_three_failures_within_the_window_open_it() -> None:
    (*_, (_, opened)) = _run([(0, "fail"), (10, "fail"), (20, "fail")])
    assert opened == BreakerState(open_until=50.0, cool_down=30.0)


def test_failures_spread_wider_than_the_window_do_not() -> None:
    (*_, (_, state)) = _run([(0, "fail"), (40, "fail"), (70, "fail")])
    assert not state.is_open
    assert state.failures == (40.0, 70.0)


def test_a_success_clears_the_count() -> None:
    (*_, (_, state)) = _run([(0, "fail"), (1, "fail"), (2, "ok"), (3, "fail")])
    assert state == BreakerState(failures=(3.0,))


@pytest.mark.parametrize(
    ("events", "verdicts"),
    [
        ([(25, "ask")], ["skip"]),  # cooling down
        ([(50, "ask")], ["probe"]),  # cool-down over: one probe
        ([(50, "ask"), (51, "ask")], ["probe", "skip"]),  # one probe at a time
        ([(50, "ask"), (111, "ask")], ["probe", "probe"]),  # a probe lost past probe_timeout
        ([(50, "ask"), (52, "ok"), (53, "ask")], ["probe", "ok", "ask"]),  # probe answered
    ],
    ids=["cooling", "probe", "one-probe", "lost-probe", "closed-again"],
)
def test_open_then_half_open(events: list[tuple[float, str]], verdicts: list[str]) -> None:
    opened = [(0.0, "fail"), (1.0, "fail"), (2.0, "fail")]  # open from 2 until 32
    results = _run([*opened, *[(t + 2.0, e) for t, e in events]])[3:]
    assert [v for v, _ in results] == verdicts


def test_a_failed_probe_doubles_the_cool_down_up_to_the_cap() -> None:
    state = BreakerState(open_until=30.0, cool_down=30.0)
    lengths = []
    now = 30.0
    for _ in range(4):
        verdict, state = admit(state, POLICY, now)
        assert verdict is Verdict.PROBE
        state = failed(state, POLICY, now)
        lengths.append(state.cool_down)
        now = state.open_until or now
    assert lengths == [60.0, 120.0, 120.0, 120.0]


def test_a_late_failure_of_a_request_sent_before_it_opened_changes_nothing() -> None:
    state = BreakerState(open_until=30.0, cool_down=30.0)
    assert failed(state, POLICY, 10.0) == state


def test_health_logs_one_line_per_change_and_counts_the_hour(
    caplog: pytest.LogCaptureFixture,
) -> None:
    changes: list[str] = []
    health = SourceHealth("fx", POLICY, on_change=lambda _n, what, _h: changes.append(what))
    for t in range(6):
        health.failed(float(t), "down")
    assert health.admit(10.0) is Verdict.SKIP
    assert health.skipped_until(10.0) == 32.0
    assert health.admit(40.0) is Verdict.PROBE
    health.succeeded(41.0)
    assert changes == ["opened", "closed"]
    assert health.counts(41.0) == (1, 6)
    assert health.counts(41.0 + 3600) == (0, 0)


# -- the chain over fake sources ---------------------------------------------------------------


def _post(post_id: str, by: str) -> Post:
    return Post(key=f"x:{post_id}", url=f"https://x.com/a/status/{post_id}", author_name=by,
                author_handle="a", text="")  # fmt: skip


@attrs.define
class Fake:
    """A source that answers from a script: a Post, an exception, or "hang"."""

    name: str
    answer: object = None
    calls: int = 0

    async def fetch(self, link: Link) -> Post:
        self.calls += 1
        if self.answer == "hang":
            await asyncio.sleep(3600)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return _post(link.post_id or "", self.name)


@attrs.define
class Clock:
    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _link(post_id: str = "100") -> Link:
    return Link(f"https://x.com/a/status/{post_id}", f"x:{post_id}", "x", post_id, "a")


def _chain(*sources: Fake, clock: Clock | None = None, deadline: float = 5.0) -> SourceChain:
    return SourceChain(list(sources), POLICY, clock=clock or Clock(), deadline=deadline)


async def test_the_first_healthy_source_answers() -> None:
    fx, vx = Fake("fx"), Fake("vx")
    post = await _chain(fx, vx).fetch(_link())
    assert (post.author_name, fx.calls, vx.calls) == ("fx", 1, 0)


@pytest.mark.parametrize(
    "failure",
    [TransientFetch("503"), FetchError("not json"), "hang"],
    ids=["transient", "junk", "hang"],
)
async def test_a_failing_source_hands_over_at_once(failure: object) -> None:
    fx, vx = Fake("fx", failure), Fake("vx")
    post = await _chain(fx, vx, deadline=0.05).fetch(_link())
    assert post.author_name == "vx"


async def test_after_the_breaker_opens_the_dead_source_is_not_asked() -> None:
    fx, vx = Fake("fx", TransientFetch("down")), Fake("vx")
    chain = _chain(fx, vx)
    for _ in range(10):
        assert (await chain.fetch(_link())).author_name == "vx"
    assert fx.calls == POLICY.threshold
    assert chain.answered["vx"] == 10


async def test_a_definite_answer_stops_the_chain() -> None:
    fx, vx = Fake("fx", PostUnavailable(PRIVATE)), Fake("vx")
    with pytest.raises(PostUnavailable) as raised:
        await _chain(fx, vx).fetch(_link())
    assert raised.value.reason == PRIVATE
    assert vx.calls == 0


def _snowflake(at: float) -> str:
    return str((int(at * 1000) - 1288834974657) << 22)


async def test_not_found_for_an_old_post_is_the_answer() -> None:
    clock = Clock()
    fx, vx = Fake("fx", PostUnavailable(DELETED)), Fake("vx")
    with pytest.raises(PostUnavailable):
        await _chain(fx, vx, clock=clock).fetch(_link(_snowflake(clock.now - 3600)))
    assert vx.calls == 0


async def test_not_found_for_a_minute_old_post_asks_the_next_source() -> None:
    clock = Clock()
    fx, vx = Fake("fx", PostUnavailable(DELETED)), Fake("vx")
    post = await _chain(fx, vx, clock=clock).fetch(_link(_snowflake(clock.now - 60)))
    assert post.author_name == "vx"


async def test_not_found_stands_when_the_next_source_is_down() -> None:
    clock = Clock()
    fx, vx = Fake("fx", PostUnavailable(DELETED)), Fake("vx", TransientFetch("down"))
    with pytest.raises(PostUnavailable) as raised:
        await _chain(fx, vx, clock=clock).fetch(_link(_snowflake(clock.now - 60)))
    assert raised.value.reason == DELETED


async def test_all_down_says_when_the_next_probe_may_go() -> None:
    clock = Clock()
    fx, vx = Fake("fx", TransientFetch("down")), Fake("vx", TransientFetch("down"))
    chain = _chain(fx, vx, clock=clock)
    with pytest.raises(AllSourcesDown) as first:
        await chain.fetch(_link())
    assert (first.value.retry_in, first.value.all_open) == (None, False)
    for _ in range(2):
        with pytest.raises(AllSourcesDown):
            await chain.fetch(_link())
    clock.now += 10
    with pytest.raises(AllSourcesDown) as later:
        await chain.fetch(_link())
    assert later.value.all_open is True
    assert later.value.retry_in == pytest.approx(POLICY.cool_down - 10)
    assert (fx.calls, vx.calls) == (3, 3)  # skipped: no request once open


async def test_junk_alone_is_junk_not_an_outage() -> None:
    fx = Fake("fx", FetchError("JSON that is no status"))
    with pytest.raises(FetchError) as raised:
        await _chain(fx).fetch(_link())
    assert type(raised.value) is FetchError


async def test_a_source_comes_back_after_its_cool_down() -> None:
    clock = Clock()
    fx, vx = Fake("fx", TransientFetch("down")), Fake("vx")
    chain = _chain(fx, vx, clock=clock)
    for _ in range(3):
        await chain.fetch(_link())
    fx.answer = None
    clock.now += POLICY.cool_down
    assert (await chain.fetch(_link())).author_name == "fx"  # the probe
    assert chain.report()[0].line().startswith("fx: healthy, 1 ok / 3 failed in the last hour")


async def test_the_breaker_logs_once_when_it_opens(caplog: pytest.LogCaptureFixture) -> None:
    fx, vx = Fake("fx", TransientFetch("down")), Fake("vx")
    chain = _chain(fx, vx)
    with caplog.at_level(logging.INFO, logger="xbot.sources.x"):
        for _ in range(8):
            await chain.fetch(_link())
    lines = [r.getMessage() for r in caplog.records]
    assert len([line for line in lines if "breaker opened" in line]) == 1
    assert "skipped until" in chain.report()[0].line()


def test_snowflake_time() -> None:
    assert snowflake_time("20") is None
    assert snowflake_time("1790001234567890123") == pytest.approx(1715604525.0, abs=1)


# -- the outage backoff: counted by the task's age ------------------------------------------


@pytest.mark.parametrize(
    ("age", "jitter", "at_least", "want"),
    [
        (0.0, 0.0, None, 2.5),  # the floor, jittered down to half
        (0.0, 0.999, None, 4.9975),
        (100.0, 0.0, None, 12.5),  # a quarter of the wait so far, halved
        (3000.0, 0.0, None, 60.0),  # capped at 120 s, halved
        (10.0, 0.0, 25.0, 25.0),  # not before the next probe
        (10.0, 0.0, 9000.0, 120.0),  # a far probe is capped too
    ],
    ids=["fresh", "fresh-jitter", "minutes", "capped", "probe-floor", "probe-capped"],
)
def test_outage_delay(age: float, jitter: float, at_least: float | None, want: float) -> None:
    assert compute_outage_delay(age, jitter=jitter, at_least=at_least) == pytest.approx(want)


def test_an_hour_of_outage_costs_a_task_about_sixty_looks() -> None:
    age, looks = 0.0, 0
    while age < 3600:
        age += compute_outage_delay(age, jitter=0.5)
        looks += 1
    assert 40 <= looks <= 80


# -- hedging: a slow source gets company ---------------------------------------------------


async def _until(condition: object, within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def test_a_slow_source_is_hedged_and_counted_as_failing_at_once() -> None:
    fx, vx = Fake("fx", "hang"), Fake("vx")
    chain = SourceChain([fx, vx], POLICY, clock=Clock(), deadline=0.5, hedge_after=0.01)
    for _ in range(POLICY.threshold):
        assert (await chain.fetch(_link())).author_name == "vx"
    # Too slow to wait for is a failure when the hedge goes out, not at the deadline.
    assert chain.health["fx"].state.is_open
    assert chain.health["fx"].last_error == "no answer within 0.01s"
    assert (await chain.fetch(_link())).author_name == "vx"
    assert fx.calls == POLICY.threshold  # open: not asked any more
    # The hung requests run on in the background to their deadline, counted once.
    await _until(lambda: not chain._background)
    assert chain.health["fx"].counts(chain.clock()) == (0, POLICY.threshold)


async def test_a_slow_answer_that_comes_is_still_a_success() -> None:
    @attrs.define
    class Slow(Fake):
        async def fetch(self, link: Link) -> Post:
            await asyncio.sleep(0.05)
            return await super().fetch(link)

    fx, vx = Slow("fx"), Fake("vx", TransientFetch("down"))
    chain = SourceChain([fx, vx], POLICY, clock=Clock(), deadline=5.0, hedge_after=0.01)
    assert (await chain.fetch(_link())).author_name == "fx"
    assert chain.health["fx"].counts(chain.clock()) == (1, 1)
    assert chain.health["fx"].state == BreakerState()


async def test_a_failure_while_the_hedge_is_running_waits_for_the_hedge() -> None:
    fx, vx, syn = Fake("fx", "hang"), Fake("vx"), Fake("syn")
    chain = SourceChain([fx, vx, syn], POLICY, clock=Clock(), deadline=5.0, hedge_after=0.01)
    assert (await chain.fetch(_link())).author_name == "vx"
    assert syn.calls == 0
