"""Charset detection, mojibake repair and binary-content detection.

Readers decode bytes with :func:`decode_bytes` (declared charset → UTF-8 → detected charset,
via charset-normalizer); the filter stage repairs UTF-8 text that was once decoded as
cp1252/latin-1 (``CafÃ©`` → ``Café``) with :func:`fix_mojibake` and quarantines documents
that are mostly control characters or U+FFFD (:func:`binary_fraction`)::

    from pretrain.data.encoding import binary_fraction, decode_bytes, fix_mojibake
    decode_bytes("caf\\xe9 cr\\xe8me br\\xfbl\\xe9e".encode("cp1252") * 20, None)  # ('café ...', 'cp1252')
    fix_mojibake("CafÃ© dÃ©jÃ  vu â€” ok")  # 'Café déjà vu — ok'
    binary_fraction("\\x00\\x01abc")  # 0.4

Mojibake repair works on runs of characters from the cp1252/latin-1 upper half and keeps a
run only when its bytes form valid UTF-8, so correct accented text ("Größe") never changes.
"""

from __future__ import annotations

import re

_CP1252_SPECIALS = "€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ"
_MOJIBAKE_RUN = re.compile(f"[\u0080-\u00ff{_CP1252_SPECIALS}]{{2,}}")
_MOJIBAKE_HINT = re.compile(f"[ÂÃâÅÆÐÑØÙ][\u0080-\u00bf{_CP1252_SPECIALS}]")
# Legacy web charsets worth detecting; restricting detection keeps short inputs from being
# "decoded" as exotic code pages.
DETECTABLE_CHARSETS = (
    "cp1252", "cp1250", "cp1251", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257",
    "koi8_r", "shift_jis", "euc_jp", "gb18030", "big5", "euc_kr", "cp874", "iso8859_15",
)  # fmt: skip
_BINARY = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


def decode_bytes(data: bytes, declared: str | None = None) -> tuple[str, str] | None:
    """``(text, encoding)`` for ``data``, or ``None`` when no charset decodes it plausibly."""
    for encoding in dict.fromkeys([declared or "utf-8", "utf-8"]):
        try:
            return data.decode(encoding), encoding
        except (UnicodeDecodeError, LookupError):
            continue
    from charset_normalizer import from_bytes  # lazy: only non-UTF-8 input pays for it

    matches = from_bytes(data, cp_isolation=list(DETECTABLE_CHARSETS))
    best = matches.best()
    if best is None or best.chaos > 0.3:
        return None
    # Short Western text fits several Latin code pages equally well; prefer the commonest.
    western = [m for m in matches if m.encoding == "cp1252" and m.chaos <= best.chaos + 0.01]
    best = western[0] if western and best.encoding in ("cp1250", "cp1257", "iso8859_15") else best
    return str(best), best.encoding


def _byte_for(char: str) -> int | None:
    if char in _CP1252_SPECIALS:
        return char.encode("cp1252")[0]
    code = ord(char)
    return code if code <= 0xFF else None


def _repair_run(match: re.Match[str]) -> str:
    run = match.group(0)
    raw = bytes(b for b in (_byte_for(c) for c in run) if b is not None)
    try:
        fixed = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _repair_prefixes(run)
    return fixed if len(raw) == len(run) else run


def _repair_prefixes(run: str) -> str:
    """A run may end in a real accented letter ("Ã©é"): repair the longest valid prefix."""
    for end in range(len(run) - 1, 1, -1):
        try:
            head = bytes(_byte_for(c) or 0 for c in run[:end]).decode("utf-8")
        except UnicodeDecodeError:
            continue
        return head + run[end:]
    return run


def fix_mojibake(text: str) -> str:
    """Undo UTF-8 → cp1252/latin-1 → UTF-8 double encoding; other text is returned unchanged."""
    if not _MOJIBAKE_HINT.search(text):
        return text
    return _MOJIBAKE_RUN.sub(_repair_run, text)


def binary_fraction(text: str) -> float:
    """Share of characters that are control characters (not tab/newline/CR) or U+FFFD."""
    if not text:
        return 0.0
    return len(_BINARY.findall(text)) / len(text)
