"""HTML → main text: resiliparse main-content extraction with a plain tag-stripper fallback.

Chosen by measurement (``bench/extraction_choice.py`` on 1,032 real pages, see
``bench/RESULTS.md``): resiliparse extracts about 10× faster than trafilatura with most of its
boilerplate removal, and the filter stage's C4 line rules remove much of the rest::

    from pretrain.filters.extract import extract_main_text, html_to_text
    extract_main_text("<html><body><nav>Home</nav><article><p>Story text.</p></article></body></html>")
    html_to_text("<p>a</p><script>x</script><p>b</p>")  # -> "a\nb"

``html_to_text`` is deterministic and dependency-free: it drops script/style/head and puts
one line per block element.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

from pretrain.errors import ConfigError

EXTRACTORS = ("resiliparse", "trafilatura", "tag_stripper")


@dataclass(frozen=True, kw_only=True)
class ExtractConfig:
    extractor: str = "resiliparse"
    comments: bool = False  # user comments are not main content
    alt_texts: bool = False
    list_bullets: bool = False

    def __post_init__(self) -> None:
        if self.extractor not in EXTRACTORS:
            raise ConfigError(f"extractor={self.extractor!r}: use one of {EXTRACTORS}")


def extract_main_text(html: str, config: ExtractConfig | None = None) -> str:
    """Main content of a page; the whole visible text when the extractor finds none."""
    config = config or ExtractConfig()
    if config.extractor == "tag_stripper":
        return html_to_text(html)
    if config.extractor == "trafilatura":
        import trafilatura

        text = trafilatura.extract(html, include_comments=config.comments) or ""
        return text if text.strip() else html_to_text(html)
    from resiliparse.extract.html2text import extract_plain_text

    text = extract_plain_text(
        html,
        main_content=True,
        comments=config.comments,
        alt_texts=config.alt_texts,
        list_bullets=config.list_bullets,
    )
    return text if text.strip() else html_to_text(html)


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
