"""PII masking: typed placeholders, checksums that separate real numbers from look-alikes."""

from __future__ import annotations

import pytest

from pretrain.errors import ConfigError
from pretrain.filters.pii import (
    PiiConfig,
    cn_resident_id_valid,
    iban_valid,
    luhn_valid,
    mask_pii,
)


def _mask(text: str, **kwargs: object) -> tuple[str, dict[str, int]]:
    return mask_pii(text, PiiConfig(**kwargs))  # type: ignore[arg-type]


def test_checksums() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("GB82 WEST 1234 5698 7654 32") and not iban_valid(
        "GB82 WEST 1234 5698 7654 33"
    )
    assert cn_resident_id_valid("11010519491231002X")
    assert not cn_resident_id_valid("110105194912310021")  # wrong check character
    assert not cn_resident_id_valid("11010519491331002X")  # month 13


@pytest.mark.parametrize(
    ("text", "masked", "counts"),
    [
        ("Mail ann.lee@example.org today", "Mail <EMAIL> today", {"email": 1}),
        ("card 4111 1111 1111 1111 ok", "card <CREDIT_CARD> ok", {"credit_card": 1}),
        ("card 4111 1111 1111 1112 ok", "card 4111 1111 1111 1112 ok", {}),  # Luhn-invalid
        ("pay GB82 WEST 1234 5698 7654 32.", "pay <IBAN>.", {"iban": 1}),
        ("pay GB82 WEST 1234 5698 7654 33.", "pay GB82 WEST 1234 5698 7654 33.", {}),
        ("SSN 123-45-6789, not 000-12-3456", "SSN <US_SSN>, not 000-12-3456", {"us_ssn": 1}),
        ("身份证 11010519491231002X 号", "身份证 <CN_RESIDENT_ID> 号", {"cn_resident_id": 1}),
        ("身份证 110105194912310021 号", "身份证 110105194912310021 号", {}),
        (
            "from 81.2.69.142 and 2a00:1450:4009:81f::200e",
            "from <IP_ADDRESS> and <IP_ADDRESS>",
            {"ip_address": 2},
        ),  # fmt: skip
        (
            "local 127.0.0.1, 10.0.0.8, bad 999.1.2.3",
            "local 127.0.0.1, 10.0.0.8, bad 999.1.2.3",
            {},
        ),
        ("call +1 415 555 0100 or (415) 555-0100", "call <PHONE> or <PHONE>", {"phone": 2}),
        ("in 1999-2005, pi=3.14159, on 2019-07-17, std::vector", None, {}),
    ],
)
def test_positives_and_negatives(text: str, masked: str | None, counts: dict[str, int]) -> None:
    out, found = _mask(text)
    assert out == (masked if masked is not None else text)
    assert found == counts


def test_config_selects_types_and_placeholder() -> None:
    out, counts = _mask(
        "ann@example.org 4111 1111 1111 1111", types=("email",), placeholder="[{TYPE}]"
    )
    assert out == "[EMAIL] 4111 1111 1111 1111" and counts == {"email": 1}
    with pytest.raises(ConfigError, match="unknown PII types"):
        PiiConfig(types=("passport",))
    with pytest.raises(ConfigError, match="TYPE"):
        PiiConfig(placeholder="<PII>")


@pytest.mark.parametrize(
    "phone",
    [
        "+49 30 45522651",
        "07700 900069",
        "+91 98146 86162",
        "06 28 93 98 19",
        "13942877557",
        "+55 11 98037-0163",
        "+44 (0)20 7946 0958",
        "0049 30 45522651",
        "+7 (495) 123-45-67",
        "06.28.93.98.19",
        "030/45522651",
    ],
)
def test_phone_numbers_of_many_regions(phone: str) -> None:
    out, counts = _mask(f"Reach me on {phone}. Thanks")
    assert out == "Reach me on <PHONE>. Thanks" and counts == {"phone": 1}


def test_phone_regions_from_language_and_config() -> None:
    swedish = "Ring 070-123 45 67 idag"  # a Swedish mobile number, national format
    none = PiiConfig(phone_regions=())
    assert mask_pii(swedish, none, language="sv") == ("Ring <PHONE> idag", {"phone": 1})
    assert mask_pii(swedish, none, language="ja")[1] == {}  # JP's plan: no such number
    assert mask_pii(swedish, PiiConfig(phone_regions=("SE",)))[1] == {"phone": 1}
    with pytest.raises(ConfigError, match="unknown regions"):
        PiiConfig(phone_regions=("UK",))
    with pytest.raises(ConfigError, match="phone_leniency"):
        PiiConfig(phone_leniency="exact")


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112 and 4111-1111-1111-1113",  # Luhn-invalid cards
        "IBAN GB82 WEST 1234 5698 7654 33, DE89 3704 0044 0532 0130 01",  # mod-97 invalid
        "id 110105194912310021; 123456789; 1.234.567.890 EUR; 2019-07-17 10:30; 12/31/2019",
        "ISBN 978-0-306-40615-7 and order 1999-2005",
        "closed at 118.25/118.75, 2304.78 (2267.21), range 1.8150-1.8700, 04/09/87 03/09/87",
        "Avg Price  145-150  145-150   154.90",
    ],
)
def test_decoys_are_left_alone(text: str) -> None:
    assert _mask(text) == (text, {})


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("The server was 93.29.251.207.", "The server was <IP_ADDRESS>."),
        ("[93.29.251.207]:8080, 93.29.251.207:443;", "[<IP_ADDRESS>]:8080, <IP_ADDRESS>:443;"),
        ("(2a00:1450:4009:81f::200e).", "(<IP_ADDRESS>)."),
        ("http://[2a00:1450:4009:81f::200e]:443/x", "http://[<IP_ADDRESS>]:443/x"),
        ("iface fe80::1ff:fe23:4567:890a%eth2.", "iface <IP_ADDRESS>."),
        ("at 2001:0db8:85a3:0000:0000:8a2e:0370:7334: down", "at <IP_ADDRESS>: down"),
        ("mapped ::ffff:93.29.251.207!", "mapped <IP_ADDRESS>!"),
        ("v1.93.29.251.207 and ::1, 10:30:15, 00:1A:2B:3C:4D:5E", None),  # not addresses
    ],
)
def test_ip_token_boundaries(text: str, masked: str | None) -> None:
    assert _mask(text)[0] == (masked if masked is not None else text)


def test_iban_decoy_whose_digits_pass_luhn_is_no_card() -> None:
    decoy = "DE10 3704 0044 0532 0130 01"  # mod-97 invalid; its 18 digits are Luhn-valid
    assert luhn_valid("370400440532013001") and not iban_valid(decoy)
    assert _mask(f"pay {decoy} now") == (f"pay {decoy} now", {})


def test_iban_followed_by_a_capitalised_word() -> None:
    out, counts = _mask("pay DE89 3704 0044 0532 0130 00 BANK now")
    assert out == "pay <IBAN> BANK now" and counts == {"iban": 1}
