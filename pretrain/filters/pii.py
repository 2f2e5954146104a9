"""PII masking (mask, never drop): typed placeholders and counts per type.

Each detector is a regex plus, where the format has one, a checksum, so random digit runs are
left alone: credit cards need a valid Luhn digit, IBANs a valid ISO 13616 mod-97 remainder,
Chinese resident IDs the ISO 7064 MOD 11-2 check character and a real birth date, US SSNs the
SSA's structural rules (no 000/666/9xx area, no 00 group, no 0000 serial); IP addresses
are validated with :mod:`ipaddress`::

    from pretrain.filters.pii import PiiConfig, mask_pii
    text, counts = mask_pii("Mail ann@example.org or call +1 415 555 0100.", PiiConfig())
    # text == "Mail <EMAIL> or call <PHONE>."; counts == {"email": 1, "phone": 1}

Types: ``email``, ``phone``, ``ip_address``, ``credit_card``, ``iban``, ``us_ssn``,
``cn_resident_id``. Detectors run most-specific first so a card number is never half-masked
as a phone number.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

from pretrain.errors import ConfigError

PII_TYPES = ("email", "cn_resident_id", "iban", "credit_card", "us_ssn", "ip_address", "phone")


@dataclass(frozen=True, kw_only=True)
class PiiConfig:
    types: tuple[str, ...] = PII_TYPES  # which detectors run, in this order
    placeholder: str = "<{TYPE}>"  # "{TYPE}" becomes EMAIL, PHONE, ...

    def __post_init__(self) -> None:
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


def _ip_valid(value: str) -> bool:
    """A valid public address: private, loopback and documentation ranges are not personal."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    return address.is_global


_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_CN_ID = re.compile(r"(?<![0-9A-Za-z])\d{17}[\dXx](?![0-9A-Za-z])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")
_IPV4 = r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])"
_IPV6 = r"(?<![:\w])(?=[0-9A-Fa-f:]*::?[0-9A-Fa-f]*:)[0-9A-Fa-f:]{6,39}(?![:\w])"
_IP = re.compile(f"{_IPV4}|{_IPV6}")
# International (+CC ...) or North-American style; at least 9 digits in total.
_PHONE = re.compile(
    r"(?<![\w+])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])"
    r"\d{3,4}[ .-]\d{3,4}(?![ .-]?\d)(?!\w)"
)

_DETECTORS: dict[str, tuple[re.Pattern[str], Callable[[str], bool]]] = {
    "email": (_EMAIL, lambda m: True),
    "cn_resident_id": (_CN_ID, cn_resident_id_valid),
    "iban": (_IBAN, iban_valid),
    "credit_card": (_CARD, lambda m: luhn_valid(re.sub(r"\D", "", m))),
    "us_ssn": (_SSN, us_ssn_valid),
    "ip_address": (_IP, _ip_valid),
    "phone": (_PHONE, lambda m: sum(c.isdigit() for c in m) >= 9),
}


def mask_pii(text: str, config: PiiConfig) -> tuple[str, dict[str, int]]:
    """``text`` with every detected PII span replaced by its placeholder, and counts per type."""
    counts: dict[str, int] = {}
    for kind in config.types:
        pattern, valid = _DETECTORS[kind]
        if kind == "email" and "@" not in text:
            continue
        placeholder = config.placeholder.replace("{TYPE}", kind.upper())

        def replace(
            match: re.Match[str], kind: str = kind, placeholder: str = placeholder, valid=valid
        ) -> str:
            if not valid(match.group(0)):
                return match.group(0)
            counts[kind] = counts.get(kind, 0) + 1
            return placeholder

        text = pattern.sub(replace, text)
    return text, counts
