"""The registry of sites (`xbot.links.SITES`): each entry whole, and every room reading it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from xbot.app import source_table
from xbot.config import Settings
from xbot.handlers.inline_results import PASTE_HINT, album_link, album_parameter, parse_query
from xbot.links import OTHER_SITE, SITES, Site, classify, shows_handles, site_named

# One post link per site, as people paste them: a new site adds its own here.
POSTS = {
    "x": "https://twitter.com/alice/status/1790000000000000001?s=20",
    "bsky": "https://fxbsky.app/profile/did:plc:abcdefghijklmnopqrstuvwx/post/3lbdpylqvrk2c",
    "pixiv": "https://www.pixiv.net/en/artworks/120000777",
}


def test_every_site_has_one_entry_and_a_post_link_here() -> None:
    names = [site.name for site in SITES]
    assert len(set(names)) == len(names)
    assert OTHER_SITE not in names
    assert set(POSTS) == set(names)


@pytest.mark.parametrize("site", SITES, ids=lambda s: s.name)
def test_a_sites_post_is_its_kind_and_its_hosts_are_its_own(site: Site) -> None:
    link = classify(POSTS[site.name])
    assert link is not None
    assert link.kind == site.name
    assert link.key.startswith(f"{site.name}:")
    assert site_named(link.kind) is site
    assert all(site.owns(host) for host in site.hosts)
    # A page of its host that is no post is no link at all, never another site's.
    assert classify(f"https://{site.hosts[0]}/") is None


@pytest.mark.parametrize("site", SITES, ids=lambda s: s.name)
def test_inline_mode_serves_a_site_as_its_entry_says(site: Site) -> None:
    link = parse_query(f"look {POSTS[site.name]}")
    assert (link is not None) == site.inline
    if link is not None:
        parameter = album_parameter(link.key)
        assert parameter is not None
        assert parameter == site.album_parameter(link.key)
        back = album_link(parameter)
        assert back is not None
        assert back.key == link.key
    if site.inline:
        assert site.label in PASTE_HINT  # the hint is a whole sentence; it names each


def test_every_site_has_its_source_in_the_one_table(tmp_path: Path) -> None:
    client = httpx.AsyncClient()
    table = source_table(Settings(data_dir=tmp_path), client, client, float, float, ffmpeg=None)
    for site in SITES:
        assert site.name in table, site.name
        assert table[site.name].name == site.name  # a post names its source as its site


@pytest.mark.parametrize(
    ("source", "shown"),
    [("x", True), ("bsky", True), ("pixiv", True), ("gallerydl", True), ("ytdlp", False),
     ("unknown", False)],
    ids=["x", "bsky", "pixiv", "gallerydl", "ytdlp", "unknown"],
)  # fmt: skip
def test_which_posts_show_an_at_handle(source: str, shown: bool) -> None:
    assert shows_handles(source) is shown
