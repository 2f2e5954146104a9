"""PII in a document's other columns: ``url``, ``metadata``, ``source_id``, a reject's ``detail``.

The text is masked by :func:`.pii.mask_pii`; the filter stage runs :func:`mask_columns` on every
kept and rejected row so that no output column holds what the detectors find::

    from pretrain.filters.pii import PiiConfig
    from pretrain.filters.pii_fields import mask_columns, mask_url
    mask_url("https://x.org/unsubscribe?email=ann%40example.org&id=1524225179", PiiConfig())
    # ("https://x.org/unsubscribe?email=<EMAIL>&id=1524225179", {"email": 1})
    row = {"url": "https://x.org/a", "metadata": '{"author_email": "ann@example.org"}'}
    mask_columns(row, PiiConfig())  # {"metadata.email": 1}; row["metadata"] is masked

Two strengths, because ids are not phone numbers:

- *full* (the text's detectors): metadata strings (free text: authors, titles, comments),
  query values and metadata fields whose key names a phone, card or account (``phone=``,
  ``tel=``, ``cardNumber``), a URL's user name, a reject's ``detail``;
- *identifier*: the formats that delimit themselves — e-mail, IBAN, resident ID, SSN, IP
  address and international phone numbers (``+49 30 …``) — but no bare digit run. Used in URL
  paths, other query values and fragments, metadata keys, scheme-less URLs in metadata and
  ``source_id``. Real URLs are full of 10–13 digit ids and timestamps (``/news/1524225179/``,
  ``?showComment=1402201640051``, ``?rev=1561627232``) that libphonenumber accepts as phone
  numbers and that pass Luhn one time in ten: masked, pages that differ only in them would
  share one URL and be dropped as URL duplicates, and ``source_id`` would no longer join back
  to the input.

URLs keep their scheme, host and port (the server the page came from: URL dedup, domain
statistics and blocklists rely on it) and are masked piece by piece, percent-decoded first
(``ann%40example.org``); a piece that changed is percent-encoded again except its
placeholders. Metadata is a JSON object: every string in it, at any depth, is masked
(``scheme://`` strings as URLs); numbers only under a hinting key (``"phone": 4930455226``;
offsets and timestamps stay); keys named in ``PiiConfig.drop_metadata_keys`` are removed
wherever they occur (counted as ``dropped_keys``). Metadata that is not JSON is masked as text.
A value with nothing masked keeps its bytes. All of a row's values are masked in two
:func:`mask_pii` calls, one per strength.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from pretrain.filters.phones import find_phones
from pretrain.filters.pii import PII_TYPES, PiiConfig, mask_pii

FULL, IDENTIFIER = "full", "identifier"
COLUMNS = ("url", "metadata", "source_id", "detail")  # besides the text
# No detector's pattern crosses a NUL, so a row's values are masked in one call per strength.
_JOIN = "\n\x00\n"
_HINT = re.compile(
    r"(?i)phone|mobile|msisdn|whatsapp|fax|ssn|iban|card|"
    r"(?<![a-z])(?:tel|cell|cc|pan|acct|account)(?![a-z])"
)
_SCHEME = re.compile(r"(?i)^[a-z][a-z0-9+.-]*://")
_URL_KEY = re.compile(r"(?i)url|uri|link|href")
_PCHAR = "<>!$&'()*+,;=:@-._~"  # left as they are when a masked piece is encoded again


@lru_cache(maxsize=32)
def _identifier_config(config: PiiConfig) -> PiiConfig:
    return replace(
        config, types=tuple(t for t in config.types if t not in ("phone", "credit_card"))
    )


def mask_values(
    values: list[str], config: PiiConfig, mode: str, *, language: str | None = None
) -> tuple[list[str], dict[str, int]]:
    """Each of ``values`` masked at strength ``mode`` (FULL or IDENTIFIER), in one call."""
    if not values:
        return values, {}
    joined = _JOIN.join(values)
    if mode == FULL:
        masked, counts = mask_pii(joined, config, language=language)
    else:
        masked, counts = mask_pii(joined, _identifier_config(config))
        if "phone" in config.types and "+" in masked:
            masked, phones = _mask_international_phones(masked, config)
            if phones:
                counts["phone"] = phones
    return masked.split(_JOIN), counts


def _mask_international_phones(text: str, config: PiiConfig) -> tuple[str, int]:
    spans = find_phones(text, regions=config.phone_regions, leniency=config.phone_leniency)
    spans = [(start, end) for start, end in spans if text[start] == "+"]
    placeholder = config.placeholder.replace("{TYPE}", "PHONE")
    for start, end in reversed(spans):
        text = text[:start] + placeholder + text[end:]
    return text, len(spans)


class _Row:
    """The values of one row to mask, by strength, with where each masked value goes."""

    def __init__(self) -> None:
        self.values: dict[str, list[tuple[str, str, Callable[[str], None]]]] = {
            FULL: [], IDENTIFIER: []
        }  # fmt: skip
        self.counts: Counter[str] = Counter()

    def add(self, column: str, value: str, mode: str, put: Callable[[str], None]) -> None:
        if value:
            self.values[mode].append((column, value, put))

    def mask(self, config: PiiConfig, language: str | None) -> None:
        """Mask every value; a changed one is handed to its ``put`` and counted by column."""
        placeholders = {t: config.placeholder.replace("{TYPE}", t.upper()) for t in PII_TYPES}
        for mode, entries in self.values.items():
            masked, counts = mask_values(
                [v for _, v, _ in entries], config, mode, language=language
            )
            if not counts:
                continue
            for (column, value, put), new in zip(entries, masked, strict=True):
                if new == value:
                    continue
                put(new)
                for kind, placeholder in placeholders.items():
                    n = new.count(placeholder) - value.count(placeholder)
                    if n > 0:
                        self.counts[f"{column}.{kind}"] += n


def mask_columns(row: dict, config: PiiConfig, *, language: str | None = None) -> Counter[str]:
    """Mask ``row``'s url, metadata, source_id and detail in place (those it has); counts as
    ``"<column>.<type>"`` and ``"metadata.dropped_keys"``."""
    work = _Row()
    finish: list[Callable[[], None]] = []
    if row.get("url"):
        finish.append(_add_url(work, "url", row["url"], lambda v: row.__setitem__("url", v)))
    if row.get("metadata"):
        finish.append(_add_metadata(work, row, config))
    if row.get("source_id"):
        work.add(
            "source_id", row["source_id"], IDENTIFIER, lambda v: row.__setitem__("source_id", v)
        )
    detail = row.get("detail")
    if detail:
        if _SCHEME.match(detail):
            finish.append(_add_url(work, "detail", detail, lambda v: row.__setitem__("detail", v)))
        else:
            work.add("detail", detail, FULL, lambda v: row.__setitem__("detail", v))
    work.mask(config, language)
    for done in finish:
        done()
    return work.counts


def mask_url(
    url: str, config: PiiConfig, *, language: str | None = None
) -> tuple[str, dict[str, int]]:
    """``url`` with PII masked in its user name, path, query and fragment; scheme, host and
    port kept. A string that is no ``scheme://`` URL is masked at identifier strength."""
    out = [url]
    work = _Row()
    done = _add_url(work, "url", url, lambda v: out.__setitem__(0, v))
    work.mask(config, language)
    done()
    return out[0], {k.split(".", 1)[1]: n for k, n in work.counts.items()}


def _add_url(work: _Row, column: str, url: str, put: Callable[[str], None]) -> Callable[[], None]:
    """Add ``url``'s pieces to ``work``; returns what puts the URL back together afterwards."""
    try:
        parts = urlsplit(url) if _SCHEME.match(url) else None
    except ValueError:  # "http://[bad/": not parseable, still masked
        parts = None
    if parts is None or not parts.netloc:
        work.add(column, url, IDENTIFIER, put)
        return lambda: None
    user, at, host = parts.netloc.rpartition("@")
    pieces: list[tuple[str, str]] = [(user, FULL)] if at else []  # (raw piece, strength)
    segments = parts.path.split("/")
    pieces += [(s, IDENTIFIER) for s in segments]
    pairs = [p.partition("=") for p in parts.query.split("&")] if parts.query else []
    for key, _, value in pairs:
        pieces += [(key, IDENTIFIER), (value, FULL if _HINT.search(key) else IDENTIFIER)]
    pieces.append((parts.fragment, IDENTIFIER))
    new = [p for p, _ in pieces]
    changed = []

    def setter(i: int, raw: str) -> Callable[[str], None]:
        def set_piece(value: str) -> None:
            new[i] = quote(value, safe=_PCHAR) if "%" in raw else value
            changed.append(i)

        return set_piece

    for i, (raw, mode) in enumerate(pieces):
        work.add(column, unquote(raw) if "%" in raw else raw, mode, setter(i, raw))

    def rebuild() -> None:
        if not changed:
            return
        i = 1 if at else 0
        netloc = f"{new[0]}@{host}" if at else host
        path = "/".join(new[i : i + len(segments)])
        i += len(segments)
        query = "&".join(f"{new[i + 2 * n]}{p[1]}{new[i + 2 * n + 1]}" for n, p in enumerate(pairs))
        head = url[: url.index("//") + 2]
        query = f"?{query}" if "?" in url.partition("#")[0] else ""
        put(head + netloc + path + query + (f"#{new[-1]}" if "#" in url else ""))

    return rebuild


def _add_metadata(work: _Row, row: dict, config: PiiConfig) -> Callable[[], None]:
    """Add the metadata's strings to ``work`` (keys named in ``drop_metadata_keys`` removed
    now); returns what writes the JSON back when anything changed."""
    text = row["metadata"]
    try:
        obj = json.loads(text)
    except ValueError:
        work.add("metadata", text, FULL, lambda v: row.__setitem__("metadata", v))
        return lambda: None
    changed: list[bool] = []
    renamed: list[tuple[dict, str, str]] = []
    dropped = _drop_keys(obj, set(config.drop_metadata_keys))
    if dropped:
        work.counts["metadata.dropped_keys"] += dropped
        changed.append(True)

    def add_leaf(container: Any, index: Any, value: Any, key: str) -> None:
        def put(new: str) -> None:
            container[index] = new
            changed.append(True)

        if isinstance(value, str):
            if _SCHEME.match(value):
                urls.append(_add_url(work, "metadata", value, put))
            else:
                mode = IDENTIFIER if _URL_KEY.search(key) and " " not in value else FULL
                work.add("metadata", value, mode, put)
        elif isinstance(value, int) and not isinstance(value, bool) and _HINT.search(key):
            work.add("metadata", str(value), FULL, put)

    def walk(node: Any, key: str) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for index, value in items:
            if isinstance(node, dict):
                work.add(
                    "metadata", index, IDENTIFIER,
                    lambda new, node=node, old=index: renamed.append((node, old, new)),
                )  # fmt: skip
            name = index if isinstance(node, dict) else key
            if isinstance(value, dict | list):
                walk(value, name)
            else:
                add_leaf(node, index, value, name)

    urls: list[Callable[[], None]] = []
    holder = [obj]  # a bare JSON string or number is a leaf too
    walk(holder, "")

    def rebuild() -> None:
        for done in urls:
            done()
        for node, old, new in renamed:
            _rename(node, old, new)
        if changed or renamed:
            row["metadata"] = json.dumps(holder[0], ensure_ascii=False)

    return rebuild


def _drop_keys(node: Any, drop: set[str]) -> int:
    """Remove the keys named in ``drop`` at any depth; how many were removed."""
    if not drop or not isinstance(node, dict | list):
        return 0
    count = 0
    if isinstance(node, dict):
        for name in [k for k in node if k in drop]:
            del node[name]
            count += 1
    for value in node.values() if isinstance(node, dict) else node:
        count += _drop_keys(value, drop)
    return count


def _rename(node: dict, old: str, new: str) -> None:
    """Rename a key in place, keeping the order (a clash gets ``~2``, ``~3``, ...)."""
    name, n = new, 1
    while name in node:
        n += 1
        name = f"{new}~{n}"
    items = [(name if k == old else k, v) for k, v in node.items()]
    node.clear()
    node.update(items)
