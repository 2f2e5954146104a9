"""Phone numbers for PII masking, validated with libphonenumber (the ``phonenumbers`` package).

A loose pattern finds digit runs that could be phone numbers (digits with spaces, dots,
dashes, slashes or brackets between them, ending on a digit so a full stop after a number is
never swallowed). Each candidate is then parsed by libphonenumber:

- written internationally (``+49 30 45522651``, ``0049 30 45522651``): any region's numbering
  plan applies, 8–15 digits;
- written nationally (``07700 900069``, ``06 28 93 98 19``, ``13942877557``): parsed with each
  candidate region — the regions of the document's language first, then the configured list —
  9–13 digits (10+ when written without separators, so bare 9-digit counts and ids pass).

Leniency (``PiiConfig.phone_leniency``): ``"valid"`` (default) asks
``is_valid_number`` — the number fits a region's numbering plan (area codes, mobile ranges,
lengths) — in at least one candidate region; ``"possible"`` asks only that its length fits,
which masks more random numbers. Longer runs (card and IBAN look-alikes, 16+ digits),
thousands-grouped amounts (``1.234.567.890``), decimals next to other separators
(``118.25/118.75``) and dates are never phone numbers. Known false positives: columns of
numbers in tables (``12664 11895`` is a valid Indian mobile number as written)::

    from pretrain.filters.phones import find_phones
    find_phones("Ruf an: 030 45522651.", regions=("DE",))  # -> [(8, 20)]
"""

from __future__ import annotations

import re

import phonenumbers

LENIENCIES = ("valid", "possible")
# Regions tried for every document (national formats); the language's regions come first.
DEFAULT_PHONE_REGIONS = (
    "US", "GB", "DE", "FR", "ES", "IT", "NL", "BE", "CH", "AT", "PT", "BR", "MX", "AR", "CO",
    "IN", "PK", "CN", "HK", "TW", "JP", "KR", "RU", "UA", "PL", "TR", "ID", "NG", "ZA", "EG",
    "AU", "CA",
)  # fmt: skip
LANGUAGE_REGIONS: dict[str, tuple[str, ...]] = {
    "en": ("US", "GB", "IN", "AU", "CA", "IE", "NZ", "ZA", "NG", "PH", "SG"),
    "de": ("DE", "AT", "CH"), "fr": ("FR", "BE", "CH", "CA", "MA", "SN"),
    "es": ("ES", "MX", "AR", "CO", "CL", "PE", "VE"), "pt": ("BR", "PT", "AO", "MZ"),
    "it": ("IT", "CH"), "nl": ("NL", "BE"), "zh": ("CN", "TW", "HK", "SG"), "ja": ("JP",),
    "ko": ("KR",), "ru": ("RU", "BY", "KZ"), "uk": ("UA",), "pl": ("PL",), "cs": ("CZ",),
    "sk": ("SK",), "hu": ("HU",), "ro": ("RO", "MD"), "bg": ("BG",), "el": ("GR", "CY"),
    "tr": ("TR",), "ar": ("EG", "SA", "AE", "MA", "DZ", "IQ"), "fa": ("IR",), "he": ("IL",),
    "hi": ("IN",), "bn": ("BD", "IN"), "ur": ("PK",), "id": ("ID",), "ms": ("MY",),
    "vi": ("VN",), "th": ("TH",), "tl": ("PH",), "sv": ("SE", "FI"), "da": ("DK",),
    "no": ("NO",), "nb": ("NO",), "fi": ("FI",), "et": ("EE",), "lv": ("LV",), "lt": ("LT",),
    "sr": ("RS",), "hr": ("HR",), "sl": ("SI",), "sw": ("KE", "TZ"),
}  # fmt: skip

# 7+ digits joined by at most two separators (space . - /) or brackets; ends on a digit, so
# the full stop after a number is never part of it.
_CANDIDATE = re.compile(
    r"(?:\+(?<![\w+.\-/]\+)\s?\d|\((?<![\w+.\-/]\()\d|\d(?<![\w+.\-/]\d))"  # start: not in a token
    r"(?:[ .\-/]{0,2}\(?\d|\)[ .\-/]?\(?\d){6,}(?!\w)"
)
_GROUP = re.compile(r"[ .\-/()]+")
_THOUSANDS = re.compile(r"\d{1,3}(?:([.,])\d{3})(?:\1\d{3})+")
_DATE = re.compile(
    r"(?:19|20)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])"
    r"|(?:0?[1-9]|[12]\d|3[01])[-/.](?:0?[1-9]|1[0-2])[-/.](?:19|20)\d\d"
    r"|\d\d?/\d\d?/\d\d(?!\d)"
)
_DECIMAL = re.compile(r"\d\.\d")
_TABLE_SEPARATOR = re.compile(r"[/(]|\.\d+-")


def candidate_regions(language: str | None, regions: tuple[str, ...]) -> tuple[str, ...]:
    """The language's regions, then ``regions``, without repeats."""
    return tuple(dict.fromkeys(LANGUAGE_REGIONS.get(language or "", ()) + regions))


def _is_phone(candidate: str, regions: tuple[str, ...], leniency: str) -> bool:
    digits = sum(c.isdigit() for c in candidate)
    international = candidate.startswith(("+", "00"))
    if international:
        if not 8 <= digits - (2 if candidate.startswith("00") else 0) <= 15:
            return False
    elif not 9 <= digits <= 13 or (digits < 10 and candidate.isdigit()):
        return False
    if _THOUSANDS.fullmatch(candidate) or _DATE.search(candidate) or candidate.count("/") > 1:
        return False
    if "  " in candidate or (
        not candidate.startswith("+")  # "+55 11.2345-7791" is written so; a table never has "+"
        and _DECIMAL.search(candidate)
        and _TABLE_SEPARATOR.search(candidate)
    ):
        return False  # "118.25/118.75", "2.30-40", "145-150  145-150": prices and tables
    check = phonenumbers.is_valid_number if leniency == "valid" else phonenumbers.is_possible_number
    for region in regions if not candidate.startswith("+") else regions[:1]:
        try:
            number = phonenumbers.parse(candidate, region)
        except phonenumbers.NumberParseException:
            continue
        if check(number):
            return True
    return False


def _phone_spans(candidate: str, regions: tuple[str, ...], leniency: str) -> list[tuple[int, int]]:
    """Spans of phone numbers inside one candidate run (relative to it)."""
    if _is_phone(candidate, regions, leniency):
        return [(0, len(candidate))]
    if not candidate.startswith("+"):
        return []  # a national run that is no number as a whole is left alone (card look-alikes)
    # International numbers delimit themselves: "+49 30 45522651 24/7" -> the longest valid prefix.
    cuts = [m.start() for m in _GROUP.finditer(candidate)]
    for cut in reversed(cuts):
        if _is_phone(candidate[:cut], regions, leniency):
            return [(0, cut)]
    return []


def find_phones(
    text: str,
    *,
    regions: tuple[str, ...],
    leniency: str = "valid",
    language: str | None = None,
    within: list[tuple[int, int]] | None = None,
) -> list[tuple[int, int]]:
    """``(start, end)`` spans of phone numbers in ``text``, left to right.

    ``within``: search only these ascending ``(start, end)`` ranges, which must hold every
    candidate and the 3 characters after it (:func:`pretrain.filters.pii.digit_windows`).
    """
    tried = candidate_regions(language, regions) or ("US",)
    spans = []
    judged: dict[str, list[tuple[int, int]]] = {}  # a page repeats its numbers: judge each once
    last = 0
    for window_start, window_end in [(0, len(text))] if within is None else within:
        for match in _CANDIDATE.finditer(text, max(window_start, last), window_end):
            candidate, start = match.group(0), match.start()
            found = judged.get(candidate)
            if found is None:
                found = judged[candidate] = _phone_spans(candidate, tried, leniency)
            spans += [(start + a, start + b) for a, b in found]
            last = match.end()
    return spans
