"""The checksums and structures that tell a real identifier from a look-alike digit run.

Used by :mod:`.pii`'s detectors::

    from pretrain.filters.pii_checks import iban_valid, luhn_valid
    iban_valid("GB82 WEST 1234 5698 7654 32")  # True: GB's length (22) and mod 97 == 1
    luhn_valid("4111111111111111")  # True

- cards: the Luhn digit;
- IBANs: the country's registered length (ISO 13616 registry, :data:`IBAN_LENGTHS`) and the
  mod-97 remainder;
- Chinese resident IDs (GB 11643-1999): a province code, a real birth date and the ISO 7064
  MOD 11-2 check character. :func:`cn_resident_id_shaped` asks for the first two only: an
  18-character number with a province code and a birth date where a resident ID puts them is
  an ID with a mistyped or mis-scanned check character far more often than anything else
  (about 1 random 17-digit run in 4,000 has both), so the detector masks it as an ID;
- US SSNs: the SSA's structural rules (no 000/666/9xx area, no 00 group, no 0000 serial).
"""

from __future__ import annotations

import datetime
import re

# Total IBAN length per country (ISO 13616 registry, release 101).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28,
    "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
    "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
    "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip
# First two digits of a resident ID: the province (GB/T 2260), Taiwan, Hong Kong, Macau.
CN_PROVINCES = frozenset(
    "11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 50 51 52 53 54 61 62 63 "
    "64 65 71 81 82 83".split()
)
_CN_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


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
    """The country's IBAN length, then ISO 13616: first four characters to the end, letters →
    numbers, mod 97 == 1. Spaces (also no-break) and dashes between groups are ignored; case is not checked."""
    compact = re.sub(r"[ \u00a0-]", "", iban).upper()
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def cn_resident_id_shaped(value: str) -> bool:
    """17 digits (+ any check character) with a province code and a birth date in 1900–2099."""
    if value[:2] not in CN_PROVINCES or not value[:17].isdigit():
        return False
    year = int(value[6:10])
    if not 1900 <= year <= 2099:
        return False
    try:
        datetime.date(year, int(value[10:12]), int(value[12:14]))
    except ValueError:
        return False
    return True


def cn_resident_id_valid(value: str) -> bool:
    """GB 11643-1999: :func:`cn_resident_id_shaped` and the ISO 7064 MOD 11-2 check character."""
    if not cn_resident_id_shaped(value):
        return False
    total = sum(int(d) * w for d, w in zip(value[:17], _CN_WEIGHTS, strict=True))
    return "10X98765432"[total % 11] == value[17].upper()


def us_ssn_valid(value: str) -> bool:
    area, group, serial = value[:3], value[4:6], value[7:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"
