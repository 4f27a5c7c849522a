"""`xbot demo` plays its conversation against the stand-ins and exits 0."""

from __future__ import annotations

import io

from xbot.demo import run_demo


async def test_the_demo_conversation() -> None:
    out = io.StringIO()
    assert await run_demo(out=out) == 0
    text = out.getvalue()
    assert text.count("   Ann │") == 12
    assert "4 inline results: photo, photo, photo, photo" in text
    assert "[video, 256 KB] Cats of X (@catsofx)" in text
    # one, four in an album, one from the cache, one quoted, one via vx,
    # two from Bluesky, one from pixiv, three from Mastodon (through gallery-dl)
    assert text.count("[photo") == 14
    assert "Town Gardens (@gardens)" in text
    assert "↪ quoting Bird Watch (@birdwatch):" in text
    assert "limit; sent 1280x720 (~13 MB): Telegram fetches it by URL" in text
    assert "answered by vxtwitter, in the same attempt" in text
    assert "Sky Watcher (@sky.example.com)" in text
    assert "Mika (@mika_draws)" in text
    assert "answered from the link cache: 0 downloads, one Bot API call" in text
    assert "This post was deleted or does not exist." in text
    assert "  Lena │ /start" in text  # a second user, whose Telegram is in German
    assert "  xbot │ Schick mir einen Link zu einem Beitrag auf X" in text
    assert "Traceback" not in text
