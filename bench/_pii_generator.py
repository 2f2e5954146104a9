"""Planted-PII documents for ``bench/cleaning_quality.py``: international formats and decoys.

Every document is one English sentence of our own with one value in it, followed by the kind
of punctuation real text puts after values (full stop, comma, bracket, port, zone id). Values:

- ``phone``: numbers of 30 countries, made valid by libphonenumber's own example number with
  random last digits, written the ways people write them (international with spaces, dashes or
  dots, ``00`` prefix, ``+44 (0)20`` style, national, bare digits), plus the six numbers the
  issue lists;
- ``email``, ``ipv4`` (global addresses), ``ipv4_private`` (10/8, 172.16/12, 192.168/16),
  ``ipv6`` (compressed, full, zone ids, IPv4-mapped), ``credit_card`` (Luhn-valid, 4 brands,
  spaced / dashed / bare), ``iban`` (12 countries, mod-97-valid, grouped, compact, dashed or
  lower case), ``us_ssn``, ``cn_resident_id`` (real province codes and birth dates, right
  check character) and ``cn_id_wrong_check`` (the same with a wrong one: masked as an ID);
- ``url_*`` / ``metadata_*``: the same values in a document's ``url`` (query values, paths,
  percent-encoded) or ``metadata`` JSON (nested, numbers under a ``phone`` key), text clean;
- decoys (must stay unmasked): the same cards and IBANs with a wrong check digit, 18-digit
  numbers shaped like resident IDs with an impossible birth date, and URLs and metadata full
  of what real ones hold: 10-13 digit ids and timestamps, DOIs, ISO times, UUIDs, offsets.

Deterministic for a given seed.
"""

from __future__ import annotations

import json
import random
from urllib.parse import quote

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
    style = rng.choice(("grouped", "grouped", "compact", "dashed", "lower"))
    if style == "compact":
        return compact
    grouped = " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))
    return {"grouped": grouped, "dashed": grouped.replace(" ", "-"), "lower": grouped.lower()}[
        style
    ]


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


def _ipv4_private(rng: random.Random) -> str:
    address = rng.choice(
        (
            f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
            f"172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
            f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        )
    )
    return rng.choice((address, address, f"[{address}]", f"{address}:{rng.randint(1, 65535)}"))


def _ssn(rng: random.Random) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


CN_PROVINCES = (11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45,
                46, 50, 51, 52, 53, 54, 61, 62, 63, 64, 65)  # fmt: skip


def _cn_check(body: str) -> str:
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return "10X98765432"[sum(int(d) * w for d, w in zip(body, weights, strict=True)) % 11]


def _cn_id(rng: random.Random, check: str = "right") -> str:
    """``check``: "right", "wrong" (a real ID's shape, wrong check character) or "decoy" (no
    real birth date: month 13-19, and not Luhn-valid, so it is no card either)."""
    while True:
        region = f"{rng.choice(CN_PROVINCES)}{rng.randint(1, 9999):04d}"
        month = rng.randint(13, 19) if check == "decoy" else rng.randint(1, 12)
        born = f"{rng.randint(1940, 2005)}{month:02d}{rng.randint(1, 28):02d}"
        body = region + born + f"{rng.randint(0, 999):03d}"
        right = _cn_check(body)
        last = right if check == "right" else rng.choice([c for c in "0123456789X" if c != right])
        value = body + last
        if check != "decoy" or last == "X" or _luhn_digit(value[:-1]) != value[-1]:
            return value


def _plus_phone(rng: random.Random) -> str:
    """A phone number in international format (what a URL path or unhinted value can hold)."""
    while not (value := _phone(rng)).startswith("+"):
        pass
    return value


GENERATORS = {
    "email": _email,
    "phone": _phone,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "credit_card": lambda rng: _card(rng, True),
    "iban": lambda rng: _iban(rng, True),
    "ipv4_private": _ipv4_private,
    "us_ssn": _ssn,
    "cn_resident_id": _cn_id,
    "cn_id_wrong_check": lambda rng: _cn_id(rng, "wrong"),
}
DECOYS = {
    "card_decoy": lambda rng: _card(rng, False),
    "iban_decoy": lambda rng: _iban(rng, False),
    "cn_id_decoy": lambda rng: _cn_id(rng, "decoy"),
}
# kind -> the placeholder type it must be masked as
EXPECTED = {
    "email": "email", "phone": "phone", "ipv4": "ip_address", "ipv6": "ip_address",
    "ipv4_private": "ip_address", "credit_card": "credit_card", "iban": "iban",
    "us_ssn": "us_ssn", "cn_resident_id": "cn_resident_id", "cn_id_wrong_check": "cn_resident_id",
}  # fmt: skip
URL_TEMPLATES = {  # kind of value -> URLs that carry it ({v}: as written, {q}: percent-encoded)
    "email": ("https://news.example/unsubscribe?email={q}&list=7", "https://shop.example/u/{v}/orders",
              "https://forum.example/profile?user={v}#posts", "mailto-gw.example/send?to={q}"),
    "phone": ("https://cars.example/ad/1524225179?tel={q}", "https://shop.example/call?phone={q}",
              "https://dir.example/p/{plus}/details"),
    "ipv4": ("https://wiki.example/w/index.php?title=User:{v}&action=edit",
             "https://logs.example/host/{v}/status"),
    "ipv4_private": ("http://cams.example/view?src={v}", "https://wiki.example/wiki/Special:Contributions/{v}"),
    "iban": ("https://pay.example/transfer?to={q}&amount=10", "https://pay.example/iban/{compact}"),
}  # fmt: skip
URL_DECOYS = (
    "https://news.example/{y}/{m:02d}/{id10}.html", "https://blog.example/{y}/{m:02d}/post.html?showComment={ms}",
    "https://photos.example/photos/7281432@N05/{id11}", "https://wiki.example/doku.php?id=recept&rev={ts}",
    "https://journal.example/articles/10.1186/{issn}-{id2}-{id2}", "https://shop.example/item/{id10}?ref={id13}",
    "https://video.example/watch/{id19}#t={id2}", "https://maps.example/@{lat},{lon},15z",
)  # fmt: skip


def _url(kind: str, value: str, rng: random.Random) -> str:
    core = value.strip("[]").split("]")[0]
    core = core.split(":")[0] if kind.startswith("ipv4") else core
    compact = value.replace(" ", "").replace("-", "")
    plus = value if value.startswith("+") else _plus_phone(rng)
    template = rng.choice(URL_TEMPLATES[kind])
    return template.format(v=core, q=quote(value, safe=""), compact=compact, plus=quote(plus))


def _url_decoy(rng: random.Random) -> str:
    digits = lambda n: str(rng.randint(10 ** (n - 1), 10**n - 1))  # noqa: E731
    return rng.choice(URL_DECOYS).format(
        y=rng.randint(2005, 2024), m=rng.randint(1, 12), id10=digits(10), id11=digits(11),
        id13=digits(13), id19=digits(19), id2=digits(2), ms=rng.randint(1_100_000_000_000,
        1_700_000_000_000), ts=rng.randint(1_100_000_000, 1_700_000_000), issn=digits(4),
        lat=f"{rng.uniform(-60, 60):.7f}", lon=f"{rng.uniform(-170, 170):.7f}",
    )  # fmt: skip


def _metadata(kind: str, value: str, rng: random.Random) -> str:
    core = value.strip("[]").split("]")[0] if kind.startswith("ipv4") else value
    where = rng.choice(("flat", "nested", "list", "sentence"))
    if kind == "phone" and rng.random() < 0.3:
        number = phonenumbers.parse(value if value.startswith("+") else _plus_phone(rng))
        e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
        meta: dict = {"contact": {"phone": int(e164[1:])}}  # a number under a phone key
    elif where == "flat":
        meta = {f"author_{kind}": core}
    elif where == "nested":
        meta = {"author": {"name": "A. Lee", "contact": {kind: core}}}
    elif where == "list":
        meta = {"values": ["first", core, "last"]}
    else:
        meta = {"comment": f"Reach the editor at {value}. Thanks."}
    return json.dumps({"source": "forum", **meta, "offset": rng.randint(10**6, 10**10)})


def _metadata_decoy(rng: random.Random) -> str:
    return json.dumps({
        "warc_date": f"{rng.randint(2010, 2024)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T12:15:59.000Z",
        "warc_record_id": f"<urn:uuid:{rng.getrandbits(32):08x}-b568-4b1b-8a7b-a4b2753a07d6>",
        "id": str(rng.randint(10**9, 10**10 - 1)), "post_id": rng.randint(10**9, 10**13),
        "uncompressed_offset": rng.randint(10**6, 10**10), "length": rng.randint(100, 10**6),
        "attributes": {"score": [[rng.randint(0, 50000), rng.randint(50000, 99999), 1.0]]},
        "url": _url_decoy(rng).split("://", 1)[1],
    })  # fmt: skip


def planted_documents(per_type: int = 300, seed: int = 13) -> list[dict]:
    """Documents ``{kind, value, text, url, metadata, decoy, template}``; the issue's phone
    numbers are always included. ``url_<kind>`` / ``metadata_<kind>`` documents hold their value
    in that column only (``column`` says which)."""
    rng = random.Random(seed)
    docs = []

    def plant(kind: str, value: str, decoy: bool, column: str = "text") -> None:
        template = rng.choice(TEMPLATES)
        text = template.format(v=value, p=rng.choice(PUNCTUATION))
        doc = {"kind": kind, "value": value, "text": text, "decoy": decoy, "template": template,
               "column": column, "url": None, "metadata": None}  # fmt: skip
        if column != "text":
            doc["text"] = template.format(v="the form", p=".")
            base = kind.split("_", 1)[1] if not decoy else ""
            if column == "url":
                doc["url"] = _url_decoy(rng) if decoy else _url(base, value, rng)
            else:
                doc["metadata"] = _metadata_decoy(rng) if decoy else _metadata(base, value, rng)
        docs.append(doc)

    for value in ISSUE_PHONES:
        plant("phone", value, False)
    for kind, make in GENERATORS.items():
        for _ in range(per_type):
            plant(kind, make(rng), False)
    for kind, make in DECOYS.items():
        for _ in range(per_type):
            plant(kind, make(rng), True)
    for column, kinds in (("url", URL_TEMPLATES), ("metadata", URL_TEMPLATES)):
        for kind in kinds:
            for _ in range(per_type // 3):
                plant(f"{column}_{kind}", GENERATORS[kind](rng), False, column)
        for _ in range(per_type):
            plant(f"{column}_decoy", "", True, column)
    return docs
