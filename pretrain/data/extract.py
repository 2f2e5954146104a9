"""HTML → main text: resiliparse, a resiliparse/trafilatura hybrid, or trafilatura (config).

Measured against hand-made gold text (``bench/extraction_quality.py``, see
``bench/RESULTS.md``, "Extraction quality"): the default ``"hybrid"`` (tuned resiliparse, and
trafilatura on the ~13 % of pages whose extract looks wrong) scores trafilatura's token F1 at
~4× its pages/s; ``"resiliparse"`` alone is ~12× faster at lower F1::

    from pretrain.data.extract import ExtractConfig, extract_main_text, html_to_text
    extract_main_text("<html><body><nav>Home</nav><article><p>Story text.</p></article></body></html>")
    extract_main_text(html, ExtractConfig(extractor="resiliparse"))  # fastest
    html_to_text("<p>a</p><script>x</script><p>b</p>")  # -> "a\nb"

``html_to_text`` is deterministic and dependency-free: it drops script/style/head and puts
one line per block element.
"""

from __future__ import annotations

import html as html_lib
import re
from dataclasses import asdict, dataclass
from html.parser import HTMLParser

from pretrain.errors import ConfigError
from pretrain.settings import check_types

EXTRACTORS = ("resiliparse", "hybrid", "trafilatura", "tag_stripper")
_SENTENCE_END = (".", "!", "?", ":", '"', "\u201d", ")")
PROSE_WORDS = 12  # a line of this many words reads as a sentence, not a menu item
_ANCHOR = re.compile(r"<a\b[^>]*>(.*?)</a\s*>", re.S | re.I)
_TAG = re.compile(r"<[^>]*>")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}")  # 5:55, 11:04 PM, 14:30


@dataclass(frozen=True, kw_only=True)
class ExtractConfig:
    """Which extractor turns HTML into main text, and its settings (see module docstring).

    - ``"resiliparse"``: resiliparse main-content extraction without comments, alt texts and
      list bullets; lines after the last prose line (``tail_prose_words`` words or more) are
      dropped as footer/related-links boilerplate. Fastest (~200 pages/s a core).
    - ``"hybrid"``: resiliparse first; a page whose extract looks wrong goes to trafilatura:
      no line of ``PROSE_WORDS`` words, or a share of lines under 40 characters
      ``>= fallback_short_lines`` (a menu), or ``fallback_clock_lines`` short lines with a
      clock time (a feed of posts or a comment thread, not one article), or a share of its
      characters that are link text ``>= fallback_link_share`` (teaser lists, ad blocks).
      About 16 % of news/blog pages
      fall back; measured F1 at trafilatura's level at ~4x its speed (``bench/RESULTS.md``).
      The default.
    - ``"trafilatura"``: trafilatura (``fast`` skips its readability/jusText fallbacks,
      measured faster *and* better on the dev pages). Needs the ``extract`` extra.
    - ``"tag_stripper"``: every visible text line (no dependency; tests and debugging).
    """

    extractor: str = "hybrid"
    comments: bool = False  # user comments are not main content
    alt_texts: bool = False
    list_bullets: bool = False
    tail_prose_words: int = 12  # 0 keeps every line after the last prose line
    fallback_short_lines: float = 0.7  # hybrid: short-line share that sends a page on
    fallback_link_share: float = 0.25  # hybrid: link-text share that sends a page on
    fallback_clock_lines: int = 2  # hybrid: short lines with a clock time; 0 = off
    trafilatura_fast: bool = True

    def __post_init__(self) -> None:
        check_types(self)
        if self.extractor not in EXTRACTORS:
            raise ConfigError(f"extractor={self.extractor!r}: use one of {EXTRACTORS}")
        if self.fallback_clock_lines < 0:
            raise ConfigError(
                f"fallback_clock_lines={self.fallback_clock_lines}: use >= 0 (0 = off)"
            )
        if self.tail_prose_words < 0:
            raise ConfigError(f"tail_prose_words={self.tail_prose_words}: use >= 0 (0 = off)")
        for name in ("fallback_short_lines", "fallback_link_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)}: use a share in [0, 1]")

    def as_metadata(self) -> dict[str, str | int | float | bool]:
        return {f"extract_{k}": v for k, v in asdict(self).items()}


def extract_main_text(html: str, config: ExtractConfig | None = None) -> str:
    """Main content of a page; the whole visible text when the extractor finds none."""
    config = config or ExtractConfig()
    if config.extractor == "tag_stripper":
        return html_to_text(html)
    if config.extractor == "trafilatura":
        text = _trafilatura(html, config)
    else:
        text = _resiliparse(html, config)
        if config.extractor == "hybrid" and looks_wrong(text, html, config):
            text = _trafilatura(html, config) or text
    return text if text.strip() else html_to_text(html)


def short_line_share(text: str, short_chars: int = 40) -> float:
    """Share of non-empty lines under ``short_chars`` characters (navigation looks like this)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return sum(len(line) < short_chars for line in lines) / len(lines) if lines else 1.0


def looks_wrong(text: str, html: str, config: ExtractConfig) -> bool:
    """Whether a first-pass extract should be redone (``"hybrid"``): it has no prose line,
    or it is mostly short lines, or it has several short lines with a clock time, or it is
    mostly link text; the cheap tests run first."""
    words = [len(line.split()) for line in text.splitlines()]
    if not any(n >= PROSE_WORDS for n in words):
        return True
    if short_line_share(text) >= config.fallback_short_lines:
        return True
    if config.fallback_clock_lines:
        clocks = sum(
            1
            for n, line in zip(words, text.splitlines(), strict=True)
            if n < PROSE_WORDS and _CLOCK.search(line)
        )
        if clocks >= config.fallback_clock_lines:
            return True
    return link_share(text, anchor_texts(html)) >= config.fallback_link_share


def anchor_texts(html: str) -> set[str]:
    """The whitespace-collapsed text of every ``<a>`` element (a regex scan, ~1 ms a page)."""
    anchors = set()
    for inner in _ANCHOR.findall(html):
        text = _TAG.sub(" ", inner)
        text = " ".join((html_lib.unescape(text) if "&" in text else text).split())
        if text:
            anchors.add(text)
    return anchors


def link_share(text: str, anchors: set[str], long_anchor_chars: int = 16) -> float:
    """Share of the characters of ``text``'s lines that are link text: a line equal to an
    anchor text counts whole; in a line over 60 characters (links run together into one
    line), the anchors of ``long_anchor_chars`` or more found inside it count."""
    long_anchors = [a for a in anchors if len(a) >= long_anchor_chars]
    linked = total = 0
    for raw in text.splitlines():
        line = " ".join(raw.split())
        total += len(line)
        if line in anchors:
            linked += len(line)
        elif len(line) > 60 and long_anchors:
            linked += min(len(line), sum(len(a) for a in long_anchors if a in line))
    return linked / total if total else 0.0


def _resiliparse(html: str, config: ExtractConfig) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    text = extract_plain_text(
        html,
        main_content=True,
        comments=config.comments,
        alt_texts=config.alt_texts,
        list_bullets=config.list_bullets,
    )
    return trim_tail(text, config.tail_prose_words) if config.tail_prose_words else text


def trim_tail(text: str, prose_words: int) -> str:
    """Drop the lines after the last line of ``prose_words`` words or more (footers, related
    links, share buttons); a text without such a line is returned unchanged."""
    lines = text.splitlines()
    last = max((i for i, line in enumerate(lines) if len(line.split()) >= prose_words), default=-1)
    return text if last < 0 else "\n".join(lines[: last + 1])


def _trafilatura(html: str, config: ExtractConfig) -> str:
    import trafilatura

    return (
        trafilatura.extract(html, include_comments=config.comments, fast=config.trafilatura_fast)
        or ""
    )


class _TextExtractor(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template", "svg", "head"}
    _BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section",
              "article", "header", "footer", "pre", "blockquote", "table", "ul", "ol", "title"}  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self._SKIP:
            self._skip_depth += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Crude, deterministic HTML → text: drop script/style/head, one line per block element."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)
