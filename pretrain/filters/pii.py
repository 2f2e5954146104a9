"""PII masking (mask, never drop): typed placeholders and counts per type.

Each detector is a pattern plus, where the format has one, a check (:mod:`.pii_checks`), so
random digit runs are left alone: credit cards need a valid Luhn digit, IBANs their country's
length and a valid ISO 13616 mod-97 remainder, Chinese resident IDs a province code and a real
birth date where the ID has them, US SSNs the SSA's structural rules. Phone numbers are
validated by libphonenumber for every region (:mod:`.phones`: international formats anywhere,
national formats with the document language's regions and ``phone_regions``). IP addresses
are parsed by :mod:`ipaddress` with token boundaries that allow a sentence's full stop, brackets,
ports (``[2001:db8::1]:443``, ``93.29.251.207:8080``) and IPv6 zone ids (``fe80::1%eth0``).
Private-network addresses (``10.0.0.0/8``, ``172.16.0.0/12``, ``192.168.0.0/16``, link-local)
are masked too: with a log line or a config file they map a person's or a company's network;
only loopback and ``0.0.0.0/8`` addresses (``127.0.0.1``, every machine's own) stay::

    from pretrain.filters.pii import PiiConfig, mask_pii
    text, counts = mask_pii("Mail ann@example.org or call +49 30 45522651.", PiiConfig())
    # text == "Mail <EMAIL> or call <PHONE>."; counts == {"email": 1, "phone": 1}

Types: ``email``, ``phone``, ``ip_address``, ``credit_card``, ``iban``, ``us_ssn``,
``cn_resident_id``. Precedence: detectors always run most-specific first, in the order of
:data:`PII_TYPES` whatever the order of ``PiiConfig.types``, and a span one detector has
decided is never re-read by a later one. A valid IBAN is an IBAN, never a phone or card number
(also written in lower case or with dashes); an IBAN-shaped run whose check digits are wrong,
and a loopback address, are *claimed*: left as they are and hidden from the card and phone
detectors. An 18-character number with a resident ID's province code and birth date is masked
as ``cn_resident_id`` whether or not its check character is right (a mistyped ID is still the
person's ID; see :func:`.pii_checks.cn_resident_id_shaped`), never as a card. The filter stage
masks kept *and* rejected rows, text and every other column (:mod:`.pii_fields`);
``bench/cleaning_quality.py`` measures recall per type and the share of decoys masked.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

from pretrain.errors import ConfigError
from pretrain.filters.phones import DEFAULT_PHONE_REGIONS, LENIENCIES, find_phones
from pretrain.filters.pii_checks import (
    IBAN_LENGTHS,
    cn_resident_id_shaped,
    cn_resident_id_valid,
    iban_valid,
    luhn_valid,
    us_ssn_valid,
)
from pretrain.settings import check_types

__all__ = [
    "PII_TYPES", "PiiConfig", "cn_resident_id_shaped", "cn_resident_id_valid", "digit_windows",
    "iban_valid", "luhn_valid", "mask_pii", "us_ssn_valid",
]  # fmt: skip
PII_TYPES = ("email", "cn_resident_id", "iban", "credit_card", "us_ssn", "ip_address", "phone")


@dataclass(frozen=True, kw_only=True)
class PiiConfig:
    types: tuple[str, ...] = PII_TYPES  # which detectors run (always in PII_TYPES order)
    placeholder: str = "<{TYPE}>"  # "{TYPE}" becomes EMAIL, PHONE, ...
    phone_regions: tuple[str, ...] = DEFAULT_PHONE_REGIONS  # national formats of these (ISO)
    phone_leniency: str = "valid"  # "valid": fits a numbering plan; "possible": length only
    drop_metadata_keys: tuple[str, ...] = ()  # metadata keys removed at any depth (JSON)

    def __post_init__(self) -> None:
        check_types(self)
        import phonenumbers

        if isinstance(self.phone_regions, str):
            raise ConfigError(f"phone_regions={self.phone_regions!r}: use a tuple ('GB', 'FR')")
        unknown_regions = set(self.phone_regions) - phonenumbers.SUPPORTED_REGIONS
        if unknown_regions:
            raise ConfigError(
                f"phone_regions: unknown regions {sorted(unknown_regions)}: use ISO 3166 "
                "alpha-2 codes in upper case, such as 'GB' or 'BR'"
            )
        if self.phone_leniency not in LENIENCIES:
            raise ConfigError(f"phone_leniency={self.phone_leniency!r}: choose from {LENIENCIES}")
        unknown = set(self.types) - set(PII_TYPES)
        if unknown:
            raise ConfigError(f"unknown PII types {sorted(unknown)}: choose from {PII_TYPES}")
        if isinstance(self.drop_metadata_keys, str) or not all(
            isinstance(k, str) and k for k in self.drop_metadata_keys
        ):
            raise ConfigError(
                f"drop_metadata_keys={self.drop_metadata_keys!r}: use a tuple of key names, "
                "such as ('author_email', 'phone')"
            )
        if "{TYPE}" not in self.placeholder:
            raise ConfigError(f"placeholder={self.placeholder!r} must contain '{{TYPE}}'")


# A detector's verdict on one match: mask it, leave it to the next detectors, or claim it
# (leave it as it is and hide it from the next detectors).
MASK, PASS, CLAIM = "mask", "pass", "claim"
_NOT_PERSONAL_IPV4 = tuple(ipaddress.ip_network(n) for n in ("0.0.0.0/8", "127.0.0.0/8"))


def _ip_verdict(value: str) -> str:
    """Any parseable address is masked but a machine's own (loopback, ``0.0.0.0``): claimed."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return PASS
    if address.version == 4:
        return CLAIM if any(address in n for n in _NOT_PERSONAL_IPV4) else MASK
    return CLAIM if address.is_loopback or address.is_unspecified else MASK


def _verdict(valid: Callable[[str], bool]) -> Callable[[str], str]:
    return lambda value: MASK if valid(value) else PASS


# Each pattern starts with a character class and checks what precedes it right after, so
# ``re`` skips ahead to candidate characters instead of testing a lookbehind everywhere
# (the e-mail pattern is ``\b[A-Za-z0-9._%+-]+@...`` written so).
_EMAIL = re.compile(
    r"[A-Za-z0-9._%+-](?<=\b.)[A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
_CN_ID = re.compile(r"\d(?<![0-9A-Za-z]\d)\d{16}[\dXx](?![0-9A-Za-z])")
# From an IBAN's first check digit (two letters that start a word before it), groups of four
# with or without one space or dash between them, then a last group of 1-4: the country's
# length decides where it ends (:func:`_iban_span`). Any case: "de89 3704 ...".
_IBAN = re.compile(
    r"\d(?<=\b[A-Za-z]{2}\d)\d(?:[ \u00a0-]?[A-Za-z0-9]{4})*(?:[ \u00a0-]?[A-Za-z0-9]{1,4})?"
)
# Not inside a word or after "+" (a phone's country code), nor after an IBAN's country and
# check digits ("DE89 3704 ..."); issuer numbers never start with 0 ("0049 30 ..." is a phone),
# and a number a Latin letter follows is no card ("12812819561424405X" is ID-shaped).
_CARD = re.compile(r"[1-9](?<![\w+-][1-9])(?<![A-Z]{2}\d\d \d)(?:[ -]?\d){12,18}(?![\dA-Za-z-])")
_SSN = re.compile(r"\d(?<![\d-]\d)\d\d-\d{2}-\d{4}(?![\d-])")
# An address ends where no digit (or ".digit") follows: "was 93.29.251.207." keeps its stop;
# none follows a phone's country code ("+46 70.123.45.67" is a Swedish mobile number).
_IPV4 = (
    r"\d(?<![\w.]\d)(?<!\w\.\d)(?<!\+\d \d)(?<!\+\d\d \d)(?<!\+\d\d\d \d)"
    r"\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?!\d|\.\d)"
)
_IPV6 = (
    r"(?<![\w:.])(?=[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:)"  # two colons early: fails fast
    r"(?:[0-9A-Fa-f]{1,4}:|:){1,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4}|:)"
    r"(?:%[0-9A-Za-z_.-]*[0-9A-Za-z])?(?!\w|:[\w:]|\.\d)"
)
# Every IPv6 address has "::" or seven colons; times ("14:06:59") have two: a cheap test first
# ("::" or a hex digit, colon, hex digits, colon, hex digits, colon), written to start at a
# colon so ``re`` jumps from colon to colon.
_IPV6_HINT = re.compile(r":(?::|(?<=[0-9A-Fa-f]:)[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:)")


def _always(text: str) -> bool:
    return True


def _iban_span(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """The IBAN-shaped span around ``match`` (country + its registered length, ending between
    groups), or None: unknown country, too short, or running on into a longer token."""
    start = match.start() - 2
    length = IBAN_LENGTHS.get(text[start : start + 2].upper())
    if length is None:
        return None
    seen = 2
    for i in range(match.start(), match.end()):
        seen += text[i].isalnum()
        if seen == length:
            end = i + 1
            return (start, end) if end == len(text) or not text[end].isalnum() else None
    return None


# Resident IDs, cards, SSNs, IPv4 addresses and phone numbers (:mod:`.phones` candidates) all
# run from their first to their last digit over 7+ characters that are digits or " .-/()";
# only a phone's "+ " or "(" comes before (2 characters at most), only a resident ID's "X"
# after (1). Each such run lies inside one match of ``_DIGIT_WINDOW`` (which spans a maximal
# run of those characters from its first to its last digit), so these detectors search only
# there, with 2 characters of context before and 3 after: on web pages, a few percent of the
# text instead of five scans of all of it. Pages without a window skip them all.
_DIGIT_WINDOW = re.compile(r"\d[\d .\-/()]{5,}\d")
_WINDOWED = None  # the gate of the passes that search the digit windows only


def digit_windows(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` ranges of ``text`` holding every digit-detector match, with context."""
    return [
        (max(0, m.start() - 2), min(len(text), m.end() + 3)) for m in _DIGIT_WINDOW.finditer(text)
    ]


def _sub_within(
    pattern: re.Pattern[str],
    replace: Callable[[re.Match[str]], str],
    text: str,
    windows: list[tuple[int, int]],
) -> str:
    """``pattern.sub(replace, text)`` for a pattern that only matches inside ``windows``.

    ``finditer`` with ``pos``/``endpos`` sees the text before ``pos`` (lookbehinds) and the
    3 characters after a window cover every lookahead. Returns ``text`` itself when no match
    changed.
    """
    pieces: list[str] = []
    last, changed = 0, False
    for start, end in windows:
        for match in pattern.finditer(text, max(start, last), end):
            replacement = replace(match)
            changed = changed or replacement != match.group(0)
            pieces += (text[last : match.start()], replacement)
            last = match.end()
    if not changed:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


# kind -> (passes of (pattern, worth scanning this text? or _WINDOWED), verdict on a match)
_DETECTORS: dict[
    str,
    tuple[tuple[tuple[re.Pattern[str], Callable[[str], bool] | None], ...], Callable[[str], str]],
] = {
    "email": (((_EMAIL, lambda t: "@" in t),), _verdict(_always)),
    "cn_resident_id": (((_CN_ID, _WINDOWED),), _verdict(cn_resident_id_shaped)),
    "credit_card": (
        ((_CARD, _WINDOWED),),
        _verdict(lambda m: luhn_valid(m.replace(" ", "").replace("-", ""))),
    ),
    "us_ssn": (((_SSN, _WINDOWED),), _verdict(us_ssn_valid)),
    "ip_address": (
        (
            (re.compile(_IPV6), lambda t: _IPV6_HINT.search(t) is not None),
            (re.compile(_IPV4), _WINDOWED),  # after IPv6, which owns "::ffff:93.29.251.207"
        ),
        _ip_verdict,
    ),
}


class _Claims:
    """Spans claimed by a detector, each replaced by one private-use character that no
    pattern matches (nor counts as a word character) until :meth:`restore` puts them back."""

    def __init__(self, text: str, placeholder: str) -> None:
        self.text, self.placeholder = text, placeholder
        self.spans: list[str] = []
        self.mark = ""

    def claim(self, value: str) -> str:
        if not self.mark:
            self.mark = next(
                c for c in map(chr, range(0xE000, 0xF900))
                if c not in self.text and c not in self.placeholder
            )  # fmt: skip
        self.spans.append(value)
        return self.mark

    def restore(self, text: str) -> str:
        if not self.spans:
            return text
        values = iter(self.spans)
        return re.sub(self.mark, lambda _: next(values), text)


def mask_pii(
    text: str, config: PiiConfig, *, language: str | None = None
) -> tuple[str, dict[str, int]]:
    """``text`` with every detected PII span replaced by its placeholder, and counts per type.

    ``language`` (the document's, from language ID) adds its regions to the phone regions.
    """
    counts: dict[str, int] = {}
    claims = _Claims(text, config.placeholder)
    windows_of: tuple[str, list[tuple[int, int]]] = ("", [])  # digit windows, for this text

    def windows(text: str) -> list[tuple[int, int]]:
        nonlocal windows_of
        if windows_of[0] is not text:
            windows_of = (text, digit_windows(text))
        return windows_of[1]

    for kind in (k for k in PII_TYPES if k in config.types):
        placeholder = config.placeholder.replace("{TYPE}", kind.upper())
        if kind == "phone":
            spans = find_phones(
                text,
                regions=config.phone_regions,
                leniency=config.phone_leniency,
                language=language,
                within=windows(text),
            )
            for start, end in reversed(spans):
                text = text[:start] + placeholder + text[end:]
            if spans:
                counts[kind] = len(spans)
            continue
        if kind == "iban":
            text = _mask_ibans(text, placeholder, counts, claims)
            continue
        passes, verdict = _DETECTORS[kind]

        def replace(
            match: re.Match[str],
            kind: str = kind,
            placeholder: str = placeholder,
            verdict: Callable[[str], str] = verdict,
        ) -> str:
            decided = verdict(match.group(0))
            if decided == PASS:
                return match.group(0)
            if decided == CLAIM:
                return claims.claim(match.group(0))
            counts[kind] = counts.get(kind, 0) + 1
            return placeholder

        for pattern, worth_scanning in passes:
            if worth_scanning is _WINDOWED:
                text = _sub_within(pattern, replace, text, windows(text))
            elif worth_scanning(text):
                masked = pattern.sub(replace, text)
                text = text if masked == text else masked  # keeps the digit windows
    return claims.restore(text), counts


def _mask_ibans(text: str, placeholder: str, counts: dict[str, int], claims: _Claims) -> str:
    """Valid IBANs masked; IBAN-shaped runs with wrong check digits claimed."""
    pieces: list[str] = []
    last = 0
    for match in _IBAN.finditer(text):
        if match.start() < last:
            continue
        span = _iban_span(text, match)
        if span is None:
            continue
        start, end = span
        value = text[start:end]
        if iban_valid(value):
            counts["iban"] = counts.get("iban", 0) + 1
            pieces += (text[last:start], placeholder)
        else:
            pieces += (text[last:start], claims.claim(value))
        last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)
