"""The tokenizer side of evaluation: load it checked against the data, and bytes per token.

    from pretrain.eval.tokens import load_checked_tokenizer, token_byte_lengths
    tok = load_checked_tokenizer("art/tokenizer", expected_sha256=index.tokenizer_sha256)
    nbytes = token_byte_lengths(tok)         # np.ndarray[int64] of shape (vocab,)
    bits_per_byte = loss_sum_nats / math.log(2) / nbytes[targets].sum()

Bits per byte is the tokenizer-independent form of the loss: two models with different
vocabularies compare on it, bits per token do not. For a byte-level BPE tokenizer each token is
a fixed byte string, so the UTF-8 bytes of the text a sequence covers are exactly the sum of its
tokens' byte lengths; special tokens (BOS, EOS, PAD) cover no text and count 0 bytes, while
their loss still counts (predicting the end of a document is part of modelling the text; the
harness's ``bits_per_byte`` on WikiText does the same with its end-of-text token).
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from pretrain import storage
from pretrain.errors import DataError

if TYPE_CHECKING:
    from tokenizers import Tokenizer


@cache
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: the printable stand-in char of each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def load_checked_tokenizer(uri: str, *, expected_sha256: str | None) -> Tokenizer:
    """``tokenizer.json`` at ``uri`` (file or directory), refused unless its sha256 is the one
    the packed data and checkpoint were made with."""
    from tokenizers import Tokenizer

    from pretrain.tokenizer import tokenizer_file

    blob = storage.read_bytes(tokenizer_file(uri))
    actual = hashlib.sha256(blob).hexdigest()
    if expected_sha256 and actual != expected_sha256:
        raise DataError(
            f"tokenizer {uri} has sha256 {actual[:12]}…, the packed data was made with "
            f"{expected_sha256[:12]}…; pass the tokenizer the checkpoint was trained with"
        )
    return Tokenizer.from_str(blob.decode("utf-8"))


def token_byte_lengths(tok: Tokenizer) -> np.ndarray:
    """UTF-8 bytes covered by each token id (0 for special tokens) of a byte-level tokenizer."""
    decoder = _byte_decoder()
    special = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    lengths = np.zeros(tok.get_vocab_size(), dtype=np.int64)
    for token, idx in tok.get_vocab().items():
        if idx in special:
            continue
        if any(ch not in decoder for ch in token):
            raise DataError(
                f"token {token!r} (id {idx}) is not byte-level BPE; bits per byte needs a "
                "ByteLevel tokenizer (pretrain.tokenizer trains one)"
            )
        lengths[idx] = len(token)
    return lengths
