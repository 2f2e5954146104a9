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
