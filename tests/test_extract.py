"""HTML → main text: each extractor setting on a small self-written page.

The page has the boilerplate the issue names (navigation, related links, a footer, user
comments) around a three-paragraph article; the default must keep the article and drop them.
"""

from __future__ import annotations

import importlib.util

import pytest

from pretrain.errors import ConfigError
from pretrain.filters.extract import (
    ExtractConfig,
    extract_main_text,
    short_line_share,
    trim_tail,
)

ARTICLE = [
    "The harbour commission voted on Tuesday to rebuild the old stone pier before winter, "
    "after two storms in October left cracks along its northern wall.",
    "Engineers said the repairs would take about eleven weeks and that fishing boats could "
    "keep using the southern berths while the work goes on.",
    "Residents who spoke at the meeting asked for the lantern at the end of the pier to be "
    "restored as well, and the commission agreed to look for the money.",
]
PAGE = f"""<html><head><title>Pier to be rebuilt</title><script>var x = 1;</script></head>
<body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li>
<li><a href="/sport">Sport</a></li><li><a href="/weather">Weather</a></li></ul></nav>
<article><h1>Pier to be rebuilt before winter</h1>
<p>{ARTICLE[0]}</p><p>{ARTICLE[1]}</p><p>{ARTICLE[2]}</p></article>
<aside><h3>Related stories</h3><ul><li><a href="/a">Storm damage in pictures</a></li>
<li><a href="/b">Ferry times change</a></li></ul></aside>
<section class="comments" id="comments"><h3>Comments</h3>
<div class="comment"><p>Great news, about time somebody fixed that pier, my grandfather
fished from it for forty years and it has never looked this bad.</p></div></section>
<footer><p>Contact us</p><p>Privacy</p><p>Copyright 2026 Harbour Times</p></footer>
</body></html>"""
HAS_TRAFILATURA = importlib.util.find_spec("trafilatura") is not None


def test_default_keeps_the_article_and_drops_boilerplate() -> None:
    text = extract_main_text(PAGE)
    for paragraph in ARTICLE:
        assert paragraph in text
    for boilerplate in ("Weather", "Ferry times change", "grandfather", "Copyright 2026",
                        "var x"):  # fmt: skip
        assert boilerplate not in text, boilerplate


def test_comments_setting_keeps_user_comments() -> None:
    assert "grandfather" in extract_main_text(
        PAGE, ExtractConfig(comments=True, tail_prose_words=0)
    )


def test_tag_stripper_keeps_everything_visible() -> None:
    text = extract_main_text(PAGE, ExtractConfig(extractor="tag_stripper"))
    assert "Weather" in text and "Copyright 2026" in text and ARTICLE[1] in text
    assert "var x" not in text


def test_trim_tail_and_short_line_share() -> None:
    text = "Title\n" + ARTICLE[0] + "\nShare\nTweet\nMore stories"
    assert trim_tail(text, 12) == "Title\n" + ARTICLE[0]
    assert trim_tail("a b\nc d", 12) == "a b\nc d"  # no prose line: unchanged
    assert short_line_share(text) == 0.8
    assert short_line_share("") == 1.0


def test_config_is_validated_and_recorded() -> None:
    with pytest.raises(ConfigError, match="extractor='boilerpipe'"):
        ExtractConfig(extractor="boilerpipe")
    with pytest.raises(ConfigError, match="tail_prose_words"):
        ExtractConfig(tail_prose_words=-1)
    meta = ExtractConfig(extractor="hybrid").as_metadata()
    assert meta["extract_extractor"] == "hybrid" and meta["extract_comments"] is False


@pytest.mark.skipif(not HAS_TRAFILATURA, reason="trafilatura not installed (extract extra)")
@pytest.mark.parametrize("extractor", ["trafilatura", "hybrid"])
def test_trafilatura_paths_keep_the_article(extractor: str) -> None:
    config = ExtractConfig(
        extractor=extractor, fallback_short_lines=0.0
    )  # hybrid: always falls back
    text = extract_main_text(PAGE, config)
    for paragraph in ARTICLE:
        assert paragraph in text
    assert "Ferry times change" not in text and "Weather" not in text
