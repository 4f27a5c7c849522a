"""`xbot demo` plays its conversation against the stand-ins and exits 0."""

from __future__ import annotations

import io

from xbot.demo import run_demo


async def test_the_demo_conversation() -> None:
    out = io.StringIO()
    assert await run_demo(out=out) == 0
    text = out.getvalue()
    assert text.count("   Ann │") == 6
    assert "4 inline results: photo, photo, photo, photo" in text
    assert "[video, 256 KB] Cats of X (@catsofx)" in text
    assert text.count("[photo") == 6  # one, four in an album, one from the cache
    assert "answered from the link cache: 0 downloads, one Bot API call" in text
    assert "This post was deleted or does not exist." in text
    assert "Traceback" not in text
