"""PII masking: typed placeholders, checksums that separate real numbers from look-alikes."""

from __future__ import annotations

import pytest

from pretrain.errors import ConfigError
from pretrain.filters.pii import (
    PiiConfig,
    cn_resident_id_shaped,
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
        # wrong check character: still an ID (province 11, born 1949-12-31), never a card
        ("身份证 110105194912310021 号", "身份证 <CN_RESIDENT_ID> 号", {"cn_resident_id": 1}),
        ("id 991305194912310021 ok", "id 991305194912310021 ok", {}),  # no province 99
        (
            "from 81.2.69.142 and 2a00:1450:4009:81f::200e",
            "from <IP_ADDRESS> and <IP_ADDRESS>",
            {"ip_address": 2},
        ),  # fmt: skip
        (
            "local 127.0.0.1, 0.0.0.0, bad 999.1.2.3",
            "local 127.0.0.1, 0.0.0.0, bad 999.1.2.3",
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
        "id 110105194913310021; 123456789; 1.234.567.890 EUR; 2019-07-17 10:30; 12/31/2019",
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


@pytest.mark.parametrize(
    "address", ["192.168.10.42", "10.1.2.3", "172.16.5.4", "172.31.255.254", "169.254.10.20"]
)
def test_private_network_addresses_are_ip_addresses(address: str) -> None:
    out, counts = _mask(f"The router at {address} answered; ssh {address}:22.")
    assert out == "The router at <IP_ADDRESS> answered; ssh <IP_ADDRESS>:22."
    assert counts == {"ip_address": 2}


def test_loopback_is_kept_and_never_a_phone() -> None:
    text = "bind 127.100.200.250 and 127.0.0.1, call +49 30 45522651"  # 12 digits: phone-like
    assert _mask(text) == ("bind 127.100.200.250 and 127.0.0.1, call <PHONE>", {"phone": 1})


@pytest.mark.parametrize(
    "iban",
    [
        "de89 3704 0044 0532 0130 00",  # lower case: its digits were masked as a card or phone
        "ch94 0341 7684 8787 0652 4",
        "DE89-3704-0044-0532-0130-00",
        "BE68 5390 0754 7034",  # 12 digits that are a valid phone number as written
        "DE89 37040044 0532013000",
    ],
)
def test_valid_iban_is_an_iban_whatever_its_writing(iban: str) -> None:
    assert iban_valid(iban)
    assert _mask(f"IBAN {iban} (Konto)") == ("IBAN <IBAN> (Konto)", {"iban": 1})


def test_iban_shaped_run_with_wrong_check_digits_is_claimed() -> None:
    decoy = "BE30 9645 5425 2148"  # mod-97 invalid; "9645 5425 2148" is a valid phone number
    assert not iban_valid(decoy)
    assert _mask(f"pay {decoy} now", phone_regions=("BE", "US")) == (f"pay {decoy} now", {})
    # an unknown country or a run of other length is no IBAN: its phone number is masked
    assert _mask("ref XX30 and +32 2 555 12 12")[0] == "ref XX30 and <PHONE>"


def test_detector_order_does_not_depend_on_config_order() -> None:
    text = "IBAN BE68 5390 0754 7034 and 192.168.10.42"
    reversed_types = tuple(reversed(PiiConfig().types))
    assert _mask(text, types=reversed_types) == _mask(text)
    assert _mask(text)[1] == {"iban": 1, "ip_address": 1}


def test_resident_id_structure() -> None:
    assert cn_resident_id_shaped("110105194912310021")  # right shape, wrong check character
    assert not cn_resident_id_valid("110105194912310021")
    assert not cn_resident_id_shaped("110105194913310021")  # month 13
    assert not cn_resident_id_shaped("990105194912310021")  # no province 99
    assert not cn_resident_id_shaped("110105180012310021")  # born 1800


def test_drop_metadata_keys_must_be_a_tuple_of_names() -> None:
    assert PiiConfig(drop_metadata_keys=("author_email",)).drop_metadata_keys == ("author_email",)
    with pytest.raises(ConfigError, match="drop_metadata_keys"):
        PiiConfig(drop_metadata_keys="author_email")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="drop_metadata_keys"):
        PiiConfig(drop_metadata_keys=("",))


def test_phone_written_with_dots_is_no_ip_address_and_id_shape_is_no_card() -> None:
    # a Swedish mobile number: after "+46 " the dotted quad is the phone's, not an address
    assert _mask("ring +46 70.123.45.67 idag") == ("ring <PHONE> idag", {"phone": 1})
    # 17 digits (Luhn-valid) and an X, month 14: neither a resident ID nor a card
    assert luhn_valid("12812819561424405")
    assert _mask("id 12812819561424405X ok") == ("id 12812819561424405X ok", {})
