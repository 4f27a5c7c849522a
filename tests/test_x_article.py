"""An X article's Draft.js body (FxEmbed's ``article.content``) as text with formatting."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.media.models import RichText, TextSpan
from xbot.sources.x import article_body


def block(kind: str, text: str, styles: Any = (), entities: Any = ()) -> dict[str, Any]:
    return {
        "key": text[:4],
        "type": kind,
        "text": text,
        "data": {},
        "inlineStyleRanges": [{"offset": o, "length": n, "style": s} for o, n, s in styles],
        "entityRanges": [{"key": k, "offset": o, "length": n} for k, o, n in entities],
    }


def article(*blocks: dict[str, Any], entity_map: Any = ()) -> dict[str, Any]:
    return {"title": "T", "content": {"blocks": list(blocks), "entityMap": list(entity_map)}}


LINK = {"key": "0", "value": {"type": "LINK", "data": {"url": "https://example.com/a"}}}
TWEET = {"key": "1", "value": {"type": "TWEET", "data": {"tweetId": "123"}}}
MEDIA = {"key": "2", "value": {"type": "MEDIA", "data": {"mediaItems": [{"mediaId": "9"}]}}}
MARKDOWN = {"key": "3", "value": {"type": "MARKDOWN", "data": {"markdown": "```\nx = 1\n```"}}}

CASES = [
    pytest.param(
        article(block("header-two", "Head"), block("unstyled", "Body.")),
        RichText("Head\n\nBody.", (TextSpan("bold", 0, 4),)),
        id="heading-bold-paragraphs-apart",
    ),
    pytest.param(
        article(
            block("unstyled", "A bold 😀 link", styles=[(2, 4, "BOLD")], entities=[(0, 10, 4)]),
            entity_map=[LINK],
        ),
        RichText(
            "A bold 😀 link",
            (TextSpan("bold", 2, 4), TextSpan("text_link", 10, 4, "https://example.com/a")),
        ),
        id="styles-and-links-utf16-offsets",
    ),
    pytest.param(
        article(
            block("ordered-list-item", "one"),
            block("ordered-list-item", "two"),
            block("unordered-list-item", "dot"),
        ),
        RichText("1. one\n2. two\n\n• dot"),
        id="lists-numbered-and-bulleted",
    ),
    pytest.param(
        article(block("blockquote", "said"), block("code-block", "x <y>", styles=[(0, 1, "Bold")])),
        RichText("said\n\nx <y>", (TextSpan("italic", 0, 4), TextSpan("code", 6, 5))),
        id="quote-italic-code-alone",
    ),
    pytest.param(
        article(
            block("atomic", " ", entities=[(1, 0, 1)]),
            block("atomic", " ", entities=[(2, 0, 1)]),
            block("atomic", " ", entities=[(3, 0, 1)]),
            entity_map=[TWEET, MEDIA, MARKDOWN],
        ),
        RichText("https://x.com/i/status/123\n\n```\nx = 1\n```", (TextSpan("code", 28, 13),)),
        id="embedded-post-as-link-media-left-out-markdown-as-code",
    ),
    pytest.param(
        {
            "content": {
                "blocks": [block("unstyled", "Linked", entities=[(0, 0, 6)])],
                "entityMap": {"0": LINK["value"]},
            }
        },
        RichText("Linked", (TextSpan("text_link", 0, 6, "https://example.com/a"),)),
        id="draft-js-dict-entity-map",
    ),
    pytest.param(
        article(
            block(
                "unstyled", "short", styles=[(3, 9, "Bold"), (-1, 2, "Bold")], entities=[(7, 0, 2)]
            )
        ),
        RichText("short"),
        id="out-of-range-and-unknown-ranges-ignored",
    ),
    pytest.param(article(), None, id="no-blocks"),
    pytest.param({"content": {"blocks": [], "entityMap": []}}, None, id="fixture-v2-article"),
    pytest.param("junk", None, id="not-an-object"),
]


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_article_body(raw: object, expected: RichText | None) -> None:
    assert article_body(raw) == expected


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 50) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(
    st.fixed_dictionaries(
        {
            "content": st.fixed_dictionaries(
                {"blocks": st.lists(_JSON, max_size=5), "entityMap": _JSON}
            )
        }
    )
    | _JSON
)
def test_article_body_never_raises_on_junk(raw: object) -> None:
    body = article_body(raw)
    if body is not None:
        size = len(body.text.encode("utf-16-le", "surrogatepass")) // 2
        assert all(s.offset >= 0 and s.offset + s.length <= size for s in body.spans)
