"""PII masking (mask, never drop): typed placeholders and counts per type.

Each detector is a pattern plus, where the format has one, a checksum, so random digit runs are
left alone: credit cards need a valid Luhn digit, IBANs a valid ISO 13616 mod-97 remainder,
Chinese resident IDs the ISO 7064 MOD 11-2 check character and a real birth date, US SSNs the
SSA's structural rules (no 000/666/9xx area, no 00 group, no 0000 serial). Phone numbers are
validated by libphonenumber for every region (:mod:`.phones`: international formats anywhere,
national formats with the document language's regions and ``phone_regions``). IP addresses
are parsed by :mod:`ipaddress` with token boundaries that allow a sentence's full stop, brackets,
ports (``[2001:db8::1]:443``, ``93.29.251.207:8080``) and IPv6 zone ids (``fe80::1%eth0``);
private, loopback and link-local IPv4 addresses are not personal and stay::

    from pretrain.filters.pii import PiiConfig, mask_pii
    text, counts = mask_pii("Mail ann@example.org or call +49 30 45522651.", PiiConfig())
    # text == "Mail <EMAIL> or call <PHONE>."; counts == {"email": 1, "phone": 1}

Types: ``email``, ``phone``, ``ip_address``, ``credit_card``, ``iban``, ``us_ssn``,
``cn_resident_id``. Detectors run most-specific first so a card number is never half-masked
as a phone number. The filter stage masks kept *and* rejected text (the rejects table never
holds what these detectors find); ``bench/cleaning_quality.py`` measures recall per type and
the share of checksum decoys masked.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

from pretrain.errors import ConfigError
from pretrain.filters.phones import DEFAULT_PHONE_REGIONS, LENIENCIES, find_phones
from pretrain.settings import check_types

PII_TYPES = ("email", "cn_resident_id", "iban", "credit_card", "us_ssn", "ip_address", "phone")


@dataclass(frozen=True, kw_only=True)
class PiiConfig:
    types: tuple[str, ...] = PII_TYPES  # which detectors run, in this order
    placeholder: str = "<{TYPE}>"  # "{TYPE}" becomes EMAIL, PHONE, ...
    phone_regions: tuple[str, ...] = DEFAULT_PHONE_REGIONS  # national formats of these (ISO)
    phone_leniency: str = "valid"  # "valid": fits a numbering plan; "possible": length only

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
        if "{TYPE}" not in self.placeholder:
            raise ConfigError(f"placeholder={self.placeholder!r} must contain '{{TYPE}}'")


def luhn_valid(digits: str) -> bool:
    """The Luhn check used by payment card numbers."""
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = int(char)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters → numbers, mod 97 == 1."""
    compact = iban.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def cn_resident_id_valid(value: str) -> bool:
    """GB 11643-1999: 17 digits (with a valid birth date) + ISO 7064 MOD 11-2 check character."""
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    try:
        datetime.date(int(value[6:10]), int(value[10:12]), int(value[12:14]))
    except ValueError:
        return False
    total = sum(int(d) * w for d, w in zip(value[:17], weights, strict=True))
    return "10X98765432"[total % 11] == value[17].upper()


def us_ssn_valid(value: str) -> bool:
    area, group, serial = value[:3], value[4:6], value[7:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


_IPV4_LOCAL = tuple(
    ipaddress.ip_network(n)
    for n in ("0.0.0.0/8", "10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
              "192.168.0.0/16")
)  # fmt: skip


def _ip_valid(value: str) -> bool:
    """Any parseable address but this machine's and a local network's: those identify no one."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    if address.version == 4:
        return not any(address in network for network in _IPV4_LOCAL)
    return not (address.is_loopback or address.is_unspecified)


def _iban_prefix(value: str) -> int:
    """Length of the longest prefix of ``value`` (whole groups) that is a valid IBAN, or 0."""
    ends = [m.end() for m in re.finditer(r"[A-Z0-9]+", value)]
    for end in reversed(ends):
        if iban_valid(value[:end]):
            return end
    return 0


# Each pattern starts with a character class and checks what precedes it right after, so
# ``re`` skips ahead to candidate characters instead of testing a lookbehind everywhere
# (the e-mail pattern is ``\b[A-Za-z0-9._%+-]+@...`` written so).
_EMAIL = re.compile(
    r"[A-Za-z0-9._%+-](?<=\b.)[A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
_CN_ID = re.compile(r"\d(?<![0-9A-Za-z]\d)\d{16}[\dXx](?![0-9A-Za-z])")
_IBAN = re.compile(r"[A-Z](?<!\w[A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
# Not inside a word, nor after an IBAN's country and check digits ("DE89 3704 ...").
_CARD = re.compile(r"\d(?<![\w-]\d)(?<![A-Z]{2}\d\d \d)(?:[ -]?\d){12,18}(?![\d-])")
_SSN = re.compile(r"\d(?<![\d-]\d)\d\d-\d{2}-\d{4}(?![\d-])")
# An address ends where no digit (or ".digit") follows: "was 93.29.251.207." keeps its stop.
_IPV4 = r"\d(?<![\w.]\d)(?<!\w\.\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?!\d|\.\d)"
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


# kind -> (passes of (pattern, worth scanning this text? or _WINDOWED), is this match valid?)
_DETECTORS: dict[
    str,
    tuple[tuple[tuple[re.Pattern[str], Callable[[str], bool] | None], ...], Callable[[str], bool]],
] = {
    "email": (((_EMAIL, lambda t: "@" in t),), _always),
    "cn_resident_id": (((_CN_ID, _WINDOWED),), cn_resident_id_valid),
    "credit_card": (((_CARD, _WINDOWED),), lambda m: luhn_valid(re.sub(r"\D", "", m))),
    "us_ssn": (((_SSN, _WINDOWED),), us_ssn_valid),
    "ip_address": (
        (
            (re.compile(_IPV6), lambda t: _IPV6_HINT.search(t) is not None),
            (re.compile(_IPV4), _WINDOWED),  # after IPv6, which owns "::ffff:93.29.251.207"
        ),
        _ip_valid,
    ),
}


def mask_pii(
    text: str, config: PiiConfig, *, language: str | None = None
) -> tuple[str, dict[str, int]]:
    """``text`` with every detected PII span replaced by its placeholder, and counts per type.

    ``language`` (the document's, from language ID) adds its regions to the phone regions.
    """
    counts: dict[str, int] = {}
    windows_of: tuple[str, list[tuple[int, int]]] = ("", [])  # digit windows, for this text

    def windows(text: str) -> list[tuple[int, int]]:
        nonlocal windows_of
        if windows_of[0] is not text:
            windows_of = (text, digit_windows(text))
        return windows_of[1]

    for kind in config.types:
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

            def replace_iban(match: re.Match[str], placeholder: str = placeholder) -> str:
                end = _iban_prefix(match.group(0))
                if not end:
                    return match.group(0)
                counts["iban"] = counts.get("iban", 0) + 1
                return placeholder + match.group(0)[end:]

            masked = _IBAN.sub(replace_iban, text)
            text = text if masked == text else masked  # keeps the digit windows
            continue
        passes, valid = _DETECTORS[kind]

        def replace(
            match: re.Match[str], kind: str = kind, placeholder: str = placeholder, valid=valid
        ) -> str:
            if not valid(match.group(0)):
                return match.group(0)
            counts[kind] = counts.get(kind, 0) + 1
            return placeholder

        for pattern, worth_scanning in passes:
            if worth_scanning is _WINDOWED:
                text = _sub_within(pattern, replace, text, windows(text))
            elif worth_scanning(text):
                masked = pattern.sub(replace, text)
                text = text if masked == text else masked
    return text, counts
