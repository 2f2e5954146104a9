"""Planted-PII documents for ``bench/cleaning_quality.py``: international formats and decoys.

Every document is one English sentence of our own with one value in it, followed by the kind
of punctuation real text puts after values (full stop, comma, bracket, port, zone id). Values:

- ``phone``: numbers of 30 countries, made valid by libphonenumber's own example number with
  random last digits, written the ways people write them (international with spaces, dashes or
  dots, ``00`` prefix, ``+44 (0)20`` style, national, bare digits), plus the six numbers the
  issue lists;
- ``email``, ``ipv4`` (global addresses), ``ipv6`` (compressed, full, zone ids, IPv4-mapped),
  ``credit_card`` (Luhn-valid, 4 brands, spaced / dashed / bare), ``iban`` (12 countries,
  mod-97-valid, grouped or compact);
- decoys: the same cards and IBANs with a wrong check digit (must stay unmasked).

Deterministic for a given seed.
"""

from __future__ import annotations

import random

import phonenumbers

PHONE_REGIONS = (
    "US", "GB", "DE", "FR", "ES", "IT", "NL", "BE", "CH", "AT", "SE", "PL", "PT", "BR", "MX",
    "AR", "IN", "CN", "JP", "KR", "RU", "TR", "AU", "CA", "ZA", "NG", "EG", "ID", "PK", "IE",
)  # fmt: skip
ISSUE_PHONES = (
    "+49 30 45522651", "07700 900069", "+91 98146 86162", "06 28 93 98 19", "13942877557",
    "+55 11 98037-0163",
)  # fmt: skip
IBAN_LAYOUTS = {  # country: length of the BBAN (digits only here)
    "DE": 18, "FR": 23, "ES": 20, "IT": 23, "NL": 14, "BE": 12, "AT": 16, "CH": 17, "PL": 24,
    "PT": 21, "SE": 20, "IE": 18,
}  # fmt: skip
TEMPLATES = (
    "Please contact our office at {v}{p} We answer within two days.",
    "The new address for all questions is {v}{p} Thanks for reading.",
    "For the invoice, use {v}{p} the team will confirm by mail.",
    "She wrote that the details were {v}{p} and nothing else.",
    "Records show {v}{p} as the last entry of the day.",
)
PUNCTUATION = (".", ",", ";", ")", "!", ":")


def _luhn_digit(body: str) -> str:
    total = 0
    for i, char in enumerate(reversed(body)):
        d = int(char)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def _card(rng: random.Random, valid: bool) -> str:
    prefix, length = rng.choice([("4", 16), ("51", 16), ("37", 15), ("6011", 16)])
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    check = _luhn_digit(body)
    if not valid:
        check = str((int(check) + rng.randint(1, 9)) % 10)
    digits = body + check
    style = rng.choice(("space", "dash", "bare"))
    if style == "bare":
        return digits
    groups = [digits[i : i + 4] for i in range(0, len(digits), 4)]
    return (" " if style == "space" else "-").join(groups)


def _iban(rng: random.Random, valid: bool) -> str:
    country = rng.choice(sorted(IBAN_LAYOUTS))
    bban = "".join(rng.choice("0123456789") for _ in range(IBAN_LAYOUTS[country]))
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(numeric) % 97
    if not valid:
        check = (check + rng.randint(1, 50)) % 97 + 2
        if check == 98 - int(numeric) % 97:
            check = 2 if check != 2 else 3
    compact = f"{country}{check:02d}{bban}"
    if rng.random() < 0.3:
        return compact
    return " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))


def _phone(rng: random.Random) -> str:
    region = rng.choice(PHONE_REGIONS)
    kind = rng.choice(
        (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE)
    )
    example = phonenumbers.example_number_for_type(region, kind)
    national = str(example.national_number)
    for _ in range(50):
        tail = "".join(rng.choice("0123456789") for _ in range(4))
        number = phonenumbers.parse(f"+{example.country_code}{national[:-4]}{tail}")
        if phonenumbers.is_valid_number(number):
            break
    else:
        number = example
    fmt = phonenumbers.PhoneNumberFormat
    style = rng.choice(("intl", "intl_dash", "intl_dot", "00", "national", "e164"))
    intl = phonenumbers.format_number(number, fmt.INTERNATIONAL)
    if style == "intl":
        return intl
    if style == "intl_dash":
        return intl.replace(" ", "-", intl.count(" ") - 1).replace("-", " ", 1)
    if style == "intl_dot":
        return intl.split(" ", 1)[0] + " " + intl.split(" ", 1)[1].replace(" ", ".")
    if style == "00":
        return "00" + intl[1:]
    if style == "e164":
        return phonenumbers.format_number(number, fmt.E164)
    return phonenumbers.format_number(number, fmt.NATIONAL)


def _email(rng: random.Random) -> str:
    user = rng.choice(("ann.lee", "j_smith", "maria+news", "k.o.nakamura", "p.dupont42"))
    domain = rng.choice(("example.org", "mail.example.co.uk", "uni-example.de", "example.com.br"))
    return f"{user}@{domain}"


def _ipv4(rng: random.Random) -> str:
    while True:
        octets = [
            rng.randint(1, 223),
            rng.randint(0, 255),
            rng.randint(0, 255),
            rng.randint(1, 254),
        ]
        if octets[0] not in (10, 127, 169, 172, 192):
            break
    address = ".".join(map(str, octets))
    return rng.choice((address, address, f"[{address}]", f"{address}:{rng.randint(1, 65535)}"))


def _ipv6(rng: random.Random) -> str:
    groups = [f"{rng.randint(0x2001, 0x2C0F):x}"] + [
        f"{rng.randint(0, 0xFFFF):x}" for _ in range(7)
    ]
    style = rng.choice(("full", "compressed", "bracket_port", "zone", "mapped"))
    if style == "full":
        return ":".join(groups)
    if style == "compressed":
        return ":".join(groups[:4]) + "::" + groups[7]
    if style == "bracket_port":
        return "[" + ":".join(groups[:3]) + "::" + groups[7] + f"]:{rng.randint(1, 65535)}"
    if style == "zone":
        return "fe80::" + ":".join(groups[4:]) + rng.choice(("%eth0", "%en1", "%wlan0"))
    return f"::ffff:{rng.randint(11, 99)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


GENERATORS = {
    "email": _email,
    "phone": _phone,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "credit_card": lambda rng: _card(rng, True),
    "iban": lambda rng: _iban(rng, True),
}
DECOYS = {"card_decoy": lambda rng: _card(rng, False), "iban_decoy": lambda rng: _iban(rng, False)}


def planted_documents(per_type: int = 300, seed: int = 13) -> list[dict]:
    """Documents ``{kind, value, text, decoy}``; the issue's phone numbers are always included."""
    rng = random.Random(seed)
    docs = []

    def plant(kind: str, value: str, decoy: bool) -> None:
        template = rng.choice(TEMPLATES)
        text = template.format(v=value, p=rng.choice(PUNCTUATION))
        docs.append(
            {"kind": kind, "value": value, "text": text, "decoy": decoy, "template": template}
        )

    for value in ISSUE_PHONES:
        plant("phone", value, False)
    for kind, make in GENERATORS.items():
        for _ in range(per_type):
            plant(kind, make(rng), False)
    for kind, make in DECOYS.items():
        for _ in range(per_type):
            plant(kind, make(rng), True)
    return docs
