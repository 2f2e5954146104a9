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
  paths, other query values and fragments, metadata keys, metadata values whose key names a
  URL, an id, a size or a time (``url``, ``post_id``, ``offset``, ``created``) and
  ``source_id``. Real URLs are full of 10–13 digit ids and timestamps (``/news/1524225179/``,
  ``?showComment=1402201640051``, ``?rev=1561627232``) that libphonenumber accepts as phone
  numbers and that pass Luhn one time in ten: masked, pages that differ only in them would
  share one URL and be dropped as URL duplicates, and ``source_id`` would no longer join back
  to the input.

URLs keep their scheme, host and port (the server the page came from: URL dedup, domain
statistics and blocklists rely on it) and are masked piece by piece, percent-decoded first
(``ann%40example.org``); a piece that changed is percent-encoded again except its
placeholders. Metadata is a JSON object: every string in it, at any depth, is masked
(``scheme://`` strings as URLs); numbers only under a hinting key (``"phone": 4930455226``,
read as E.164 digits first; offsets and timestamps stay); keys named in
``PiiConfig.drop_metadata_keys`` are removed wherever they occur (counted as
``dropped_keys``). Metadata that is not JSON is masked as text. A value with nothing masked
keeps its bytes. Not covered: a URL's password (``user:secret@host``) is masked only where a
detector finds something in it. :class:`ColumnMasker` masks a whole batch of
rows' values in one :func:`mask_pii` call per strength (and language).
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
# No detector's pattern crosses a NUL, so a row's values are masked in one call per strength.
_JOIN = "\n\x00\n"
_HINT = re.compile(
    r"(?i)phone|mobile|msisdn|whatsapp|fax|ssn|iban|card|"
    r"(?<![a-z])(?:tel|cell|cc|pan|acct|account)(?![a-z])"
)
_SCHEME = re.compile(r"(?i)^[a-z][a-z0-9+.-]*://")
# What a URL must hold for an identifier-strength detector to match in it: "@" (e-mail, user
# name), "%" (anything encoded), "+" (a phone), a dotted quad, two colons (IPv6), two letters
# and two digits (IBAN), an SSN, 17 digits (resident ID).
_URL_MAYBE = re.compile(
    r"[@%+]|\d\.\d+\.\d+\.\d|:[0-9A-Fa-f]*:|[A-Za-z]{2}\d\d|\d{3}-\d\d-\d{4}|\d{17}"
)
_HOST_FIRST = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?::\d+)?(?:[/?#]|$)")
_URL_KEY = re.compile(r"(?i)url|uri|link|href")
# Keys that name an id, a size or a time: their values are read at identifier strength.
_ID_KEY = re.compile(
    r"(?i:(?:^|[^a-z])(?:id|ids|uid|guid|uuid|key|offset|length|size|count|timestamp|ts|time|"
    r"date|created|added|modified|version|rev|revision|hash|digest|sha1|md5|checksum)s?$)"
    r"|[a-z]I[Dd]s?$"
)
_PCHAR = "<>!$&'()*+,;=:@-._~"  # left as they are when a masked piece is encoded again
# Every detector needs a digit, an "@" (e-mail) or a ":" (IPv6 in hex): other values are skipped,
# and so are the shapes metadata is full of that hold none: ISO times, UUIDs (WARC record ids).
_MAYBE_PII = re.compile(r"[\d@:]")
_NOT_PII = re.compile(
    r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"
    r"|<?(?:urn:uuid:)?[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}>?"
)


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
    if any("\x00" in v for v in values):  # the separator could be inside: one call each
        done = [_mask(v, config, mode, language) for v in values]
        return [v for v, _ in done], dict(sum((Counter(c) for _, c in done), Counter()))
    masked, counts = _mask(_JOIN.join(values), config, mode, language)
    return masked.split(_JOIN), counts


def _mask(text: str, config: PiiConfig, mode: str, language: str | None) -> tuple[str, dict]:
    if mode == FULL:
        return mask_pii(text, config, language=language)
    masked, counts = mask_pii(text, _identifier_config(config))
    if "phone" in config.types and "+" in masked:
        masked, phones = _mask_international_phones(masked, config)
        if phones:
            counts["phone"] = phones
    return masked, counts


_PLUS = re.compile(r"\+\s?\d")


def _mask_international_phones(text: str, config: PiiConfig) -> tuple[str, int]:
    """Phone numbers that start with "+" (judged only there: no national reading of ids)."""
    windows: list[tuple[int, int]] = []
    for match in _PLUS.finditer(text):
        start, end = match.start(), min(len(text), match.start() + 40)
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    spans = find_phones(
        text, regions=config.phone_regions, leniency=config.phone_leniency, within=windows
    )
    spans = [(start, end) for start, end in spans if text[start] == "+"]
    placeholder = config.placeholder.replace("{TYPE}", "PHONE")
    for start, end in reversed(spans):
        text = text[:start] + placeholder + text[end:]
    return text, len(spans)


class ColumnMasker:
    """Rows' values to mask, collected and then masked together: one :func:`mask_pii` call per
    strength (and language, for full strength) for a whole batch of rows::

        masker = ColumnMasker()
        for row in rows:
            masker.add_row(row, config, language=row["language"], prefix="kept.")
        counts = masker.mask()  # rows changed in place; {"kept.url.email": 1, ...}
    """

    def __init__(self) -> None:
        # (id(config), strength, language) -> [(column, value, put)]
        self.groups: dict[tuple, list[tuple[str, str, Callable[[str], None]]]] = {}
        self.configs: dict[int, PiiConfig] = {}
        self.finish: list[Callable[[], None]] = []
        self.counts: Counter[str] = Counter()
        self.context: tuple[PiiConfig | None, str | None, str] = (None, None, "")

    def add_row(
        self, row: dict, config: PiiConfig, *, language: str | None = None, prefix: str = ""
    ) -> None:
        """Add ``row``'s url, metadata, source_id and detail (those it has)."""
        self.context = (config, language, prefix)
        self.configs[id(config)] = config
        if row.get("url"):
            self.finish.append(_add_url(self, "url", row["url"], _setter(row, "url")))
        if row.get("metadata"):
            self.finish.append(_add_metadata(self, row, config))
        if row.get("source_id"):
            self.add("source_id", row["source_id"], IDENTIFIER, _setter(row, "source_id"))
        detail = row.get("detail")
        if detail and _SCHEME.match(detail):
            self.finish.append(_add_url(self, "detail", detail, _setter(row, "detail")))
        elif detail:
            self.add("detail", detail, FULL, _setter(row, "detail"))

    def add(self, column: str, value: str, mode: str, put: Callable[[str], None]) -> None:
        """One value; ``put`` gets its masked form if anything in it was masked."""
        if value and _MAYBE_PII.search(value):
            config, language, prefix = self.context
            key = (id(config), mode, language if mode == FULL else None)
            self.groups.setdefault(key, []).append((prefix + column, value, put))

    def mask(self) -> Counter[str]:
        """Mask everything added; rows are changed in place. Counts by
        ``"<prefix><column>.<type>"`` (and ``"<prefix>metadata.dropped_keys"``)."""
        for (config_id, mode, language), entries in self.groups.items():
            config = self.configs[config_id]
            values = [v for _, v, _ in entries]
            masked, counts = mask_values(values, config, mode, language=language)
            if not counts:
                continue
            placeholders = [config.placeholder.replace("{TYPE}", t.upper()) for t in PII_TYPES]
            for (column, value, put), new in zip(entries, masked, strict=True):
                if new == value:
                    continue
                put(new)
                for kind, placeholder in zip(PII_TYPES, placeholders, strict=True):
                    n = new.count(placeholder) - value.count(placeholder)
                    if n > 0:
                        self.counts[f"{column}.{kind}"] += n
        for done in self.finish:
            done()
        counts, self.counts = self.counts, Counter()
        self.groups, self.finish = {}, []
        return counts


def _nothing() -> None:
    return None


def _setter(row: dict, column: str) -> Callable[[str], None]:
    return lambda value: row.__setitem__(column, value)


def mask_columns(row: dict, config: PiiConfig, *, language: str | None = None) -> Counter[str]:
    """Mask ``row``'s url, metadata, source_id and detail in place (those it has); counts as
    ``"<column>.<type>"`` and ``"metadata.dropped_keys"``."""
    masker = ColumnMasker()
    masker.add_row(row, config, language=language)
    return masker.mask()


def mask_url(
    url: str, config: PiiConfig, *, language: str | None = None
) -> tuple[str, dict[str, int]]:
    """``url`` with PII masked in its user name, path, query and fragment; scheme, host and
    port kept (also without a scheme: ``forum.example/u?mail=...``). Any other string is
    masked whole at identifier strength."""
    out = [url]
    masker = ColumnMasker()
    masker.context = (config, language, "")
    masker.configs[id(config)] = config
    masker.finish.append(_add_url(masker, "url", url, lambda v: out.__setitem__(0, v)))
    counts = masker.mask()
    return out[0], {k.split(".", 1)[1]: n for k, n in counts.items()}


def _add_url(
    work: ColumnMasker, column: str, url: str, put: Callable[[str], None]
) -> Callable[[], None]:
    """Add ``url``'s pieces to ``work``; returns what puts the URL back together afterwards."""
    query = url.partition("?")[2]
    if not _URL_MAYBE.search(url) and not (query and _HINT.search(query)):
        return _nothing  # no detector of identifier strength can match, no hinting key
    head = url[: url.index("//") + 2] if _SCHEME.match(url) else ""
    try:
        if head:
            parts = urlsplit(url)
        elif _HOST_FIRST.match(url):  # "forum.example/u?mail=..." (Dolma's metadata.url)
            parts = urlsplit("//" + url)
        else:
            parts = None
    except ValueError:  # "http://[bad/": not parseable, still masked
        parts = None
    if parts is None or not parts.netloc:
        encoded = "%" in url

        def put_whole(value: str) -> None:
            put(quote(value, safe=_PCHAR + "/?#[]") if encoded else value)

        work.add(column, unquote(url) if encoded else url, IDENTIFIER, put_whole)
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
        query = f"?{query}" if "?" in url.partition("#")[0] else ""
        put(head + netloc + path + query + (f"#{new[-1]}" if "#" in url else ""))

    return rebuild


def _add_metadata(work: ColumnMasker, row: dict, config: PiiConfig) -> Callable[[], None]:
    """Add the metadata's strings (keys too) and hinted numbers to ``work``, found by a scan of
    the JSON text (no walk over Python objects); keys named in ``drop_metadata_keys`` are
    removed now. Returns what splices the masked values back into the JSON."""
    text = row["metadata"]
    try:
        obj = json.loads(text)  # validates; non-JSON metadata is masked as text
    except ValueError:
        work.add("metadata", text, FULL, _setter(row, "metadata"))
        return lambda: None
    dropped = _drop_keys(obj, set(config.drop_metadata_keys))
    if dropped:
        work.counts[f"{work.context[2]}metadata.dropped_keys"] += dropped
        text = row["metadata"] = json.dumps(obj, ensure_ascii=False)
    if not _MAYBE_PII.search(text):
        return lambda: None
    spliced: list[tuple[int, int, str, bool]] = []  # (start, end, new JSON, is a key)
    urls: list[Callable[[], None]] = []
    hinted = _HINT.search(text) is not None
    for number in _HINTED_NUMBER.finditer(text) if hinted else ():  # under a hinting key only
        if _HINT.search(number.group(1)):
            put = _splicer(spliced, number.start(2), number.end(2), False)
            work.add("metadata", _as_phone(number.group(2), config), FULL, put)
    pos = 0
    while (match := _NEXT_STRING.match(text, pos)) is not None:
        pos = match.end()
        token, is_key = match.group(1), match.group(2) is not None
        value = json.loads(token) if "\\" in token else token[1:-1]
        if _NOT_PII.fullmatch(value):
            continue
        put = _splicer(spliced, match.start(1), match.end(1), is_key)
        if is_key:
            work.add("metadata", value, IDENTIFIER, put)
        elif _SCHEME.match(value):
            urls.append(_add_url(work, "metadata", value, put))
        else:
            key = _key_before(text, match.start(1))
            plain = (_URL_KEY.search(key) or _ID_KEY.search(key)) and not _HINT.search(key)
            work.add("metadata", value, IDENTIFIER if plain and " " not in value else FULL, put)

    def rebuild() -> None:
        for done in urls:
            done()
        if not spliced:
            return
        pieces: list[str] = []
        last = 0
        for start, end, new, _ in sorted(spliced):
            pieces += (text[last:start], new)
            last = end
        out = "".join(pieces) + text[last:]
        if any(is_key for *_, is_key in spliced):  # a masked key may now clash with another
            out = json.dumps(json.loads(out, object_pairs_hook=_unclash), ensure_ascii=False)
        row["metadata"] = out

    return rebuild


# From a position between JSON tokens, the next string that may hold PII (2: followed by a
# colon, a key). Skipped inside ``re``, possessively (a scan never restarts inside a string):
# everything between strings, strings with at most 3 digits and none of "@%:+" or an escape,
# ISO times and UUIDs (WARC dates and record ids) — no detector matches in them.
_NEXT_STRING = re.compile(
    r'(?:[^"]++|"[^"\\\d@%:+]*+(?:\d[^"\\\d@%:+]*+){0,3}"'
    r'|"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"'
    r'|"<?(?:urn:uuid:)?[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}>?")*+'
    r'("(?:[^"\\]|\\.)*+")(\s*:)?'
)
_HINTED_NUMBER = re.compile(r'"([^"\\]*)"\s*:\s*(-?\d{7,})(?![\w.])')


def _as_phone(number: str, config: PiiConfig) -> str:
    """A number stored as an integer has lost its "+" (and any leading 0): read it as E.164
    digits (``4930455226`` → ``+4930455226``) when that is a phone number, else as written."""
    international = "+" + number.lstrip("-")
    spans = find_phones(international, regions=config.phone_regions, leniency=config.phone_leniency)
    return international if spans == [(0, len(international))] else number


def _key_before(text: str, start: int) -> str:
    """The key of the value starting at ``start`` ("" inside a list)."""
    before = text[max(0, start - 200) : start].rstrip()
    if not before.endswith(":"):
        return ""
    before = before[:-1].rstrip()
    return before[before.rfind('"', 0, len(before) - 1) + 1 : -1]


def _splicer(spliced: list, start: int, end: int, is_key: bool) -> Callable[[str], None]:
    return lambda new: spliced.append((start, end, json.dumps(new, ensure_ascii=False), is_key))


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


def _unclash(pairs: list[tuple[str, Any]]) -> dict:
    """An object's pairs with repeated keys renamed ``key~2``, ``key~3`` (none is lost)."""
    out: dict = {}
    for name, value in pairs:
        unique, n = name, 1
        while unique in out:
            n += 1
            unique = f"{name}~{n}"
        out[unique] = value
    return out
