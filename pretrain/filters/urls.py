"""URL rules: a domain/URL blocklist, adult/spam URL patterns, and URL dedup within a shard.

The blocklist is a tuple of domains (a domain blocks its subdomains) and URL substrings,
optionally extended from a file (one entry per line, ``#`` comments). Adult/spam patterns
are matched against the tokens of the host and path. Dedup keeps the first document of each
normalized http(s) URL (scheme and host lower-cased, fragment and trailing slash dropped);
cross-shard duplicates are the dedup stage's job::

    from pretrain.filters.urls import UrlConfig, UrlFilter
    rule = UrlFilter(UrlConfig(blocklist=("spam.example",)))
    rule({"url": "https://www.spam.example/page"})    # -> "url_blocklist"
    rule({"url": "http://casino-bonus.example/"})     # -> "url_adult_spam"
    rule({"url": "https://a.example/x"}), rule({"url": "https://A.example/x#top"})
    # -> (None, "duplicate_url")

Reasons: ``url_blocklist``, ``url_adult_spam``, ``duplicate_url``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.filters.base import Document, Filter, Rejection
from pretrain.hashset import HashSet64, key64
from pretrain.settings import check_types

# Our own short default list of URL tokens that mark adult or spam sites; extend via config.
DEFAULT_ADULT_SPAM_TOKENS = (
    "porn", "porno", "xxx", "sex", "sexy", "nude", "nudes", "escort", "escorts", "hentai",
    "camgirl", "camgirls", "casino", "viagra", "cialis", "payday", "replica", "bet365",
)  # fmt: skip
_TOKENS = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, kw_only=True)
class UrlConfig:
    blocklist: tuple[str, ...] = ()  # domains ("spam.example") or URL substrings ("/ads/")
    blocklist_uri: str | None = None  # a file of more entries, one per line
    adult_spam_tokens: tuple[str, ...] = DEFAULT_ADULT_SPAM_TOKENS
    dedup_urls: bool = True

    def __post_init__(self) -> None:
        check_types(self)
        if isinstance(self.blocklist, str) or isinstance(self.adult_spam_tokens, str):
            raise ConfigError("blocklist and adult_spam_tokens are tuples, e.g. ('spam.example',)")


def normalize_url(url: str) -> str:
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/") or "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}{query}"


class UrlFilter(Filter):
    """Stateful within one shard (it remembers URLs seen); build one per shard."""

    name = "url"

    def __init__(self, config: UrlConfig | None = None) -> None:
        self.config = config or UrlConfig()
        entries = list(self.config.blocklist)
        if self.config.blocklist_uri:
            lines = storage.read_bytes(self.config.blocklist_uri).decode().splitlines()
            entries += [s.strip() for s in lines if s.strip() and not s.startswith("#")]
        self._domains = frozenset(e.lower() for e in entries if "/" not in e)
        self._substrings = tuple(e.lower() for e in entries if "/" in e)
        self._adult = frozenset(self.config.adult_spam_tokens)
        self._seen = HashSet64()  # 8 bytes per URL, not the URL text (pretrain.hashset)

    def check(self, doc: Document) -> Rejection | None:
        url = doc.get("url") or ""
        if not url.startswith(("http://", "https://")):
            return None  # files and package names are not web URLs
        lower = url.lower()
        host = (urlsplit(lower).hostname or "").removeprefix("www.")
        labels = host.split(".")
        if any(".".join(labels[i:]) in self._domains for i in range(len(labels))):
            return "url_blocklist", host
        if any(s in lower for s in self._substrings):
            return "url_blocklist", url[:200]
        tokens = _TOKENS.findall(host + " " + urlsplit(lower).path)
        flagged = [t for t in tokens if t in self._adult]
        if flagged:
            return "url_adult_spam", ",".join(flagged[:3])
        if self.config.dedup_urls:
            digest = hashlib.blake2b(normalize_url(url).encode(), digest_size=8).digest()
            if not self._seen.add(key64(digest)):
                return "duplicate_url", normalize_url(url)[:200]
        return None
