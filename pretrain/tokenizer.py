"""Byte-level BPE tokenizer training with Hugging Face ``tokenizers``.

Trains on a deterministic sample of the mixture's train split that keeps each source's share
of characters, holds out a few documents per source to measure fertility, and refuses to save
a tokenizer that does not round-trip text exactly (byte-level BPE without a normalizer must).

Usage::

    from pretrain.tokenizer import TokenizerConfig, load_tokenizer, special_ids, train_tokenizer
    stats = train_tokenizer(
        "art/data_mixture/train.parquet", "art/tokenizer", TokenizerConfig(vocab_size=4096)
    )
    tok = load_tokenizer("art/tokenizer")          # dir or .../tokenizer.json
    ids = special_ids(tok)                          # {"bos": 0, "eos": 1, "pad": 2}

Writes ``tokenizer.json`` and ``stats.json``. The first three ``special_tokens`` are, in
order, BOS, EOS and PAD; they get ids 0, 1, 2.

Determinism: the BPE trainer is multi-threaded (rayon), but its counts are reduced exactly and
merge ties are broken by pair order, so the saved ``tokenizer.json`` is byte-identical across
runs, processes and ``RAYON_NUM_THREADS`` settings (checked with tokenizers 0.23.3).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from pretrain import storage
from pretrain.errors import ConfigError, DataError
from pretrain.mixture import hash_score

DEFAULT_SPECIAL_TOKENS = ("<|begin_of_text|>", "<|end_of_text|>", "<|pad|>")
_BYTE_ALPHABET = 256


@dataclass(frozen=True, kw_only=True)
class TokenizerConfig:
    vocab_size: int = 4096
    min_frequency: int = 2
    sample_chars: int = 20_000_000
    special_tokens: tuple[str, ...] = DEFAULT_SPECIAL_TOKENS
    seed: int = 0
    heldout_docs_per_source: int = 64

    def __post_init__(self) -> None:
        if len(self.special_tokens) < 3:
            raise ConfigError(
                "TokenizerConfig.special_tokens needs at least (bos, eos, pad), e.g. "
                f"{DEFAULT_SPECIAL_TOKENS}"
            )
        if len(set(self.special_tokens)) != len(self.special_tokens) or not all(
            self.special_tokens
        ):
            raise ConfigError("TokenizerConfig.special_tokens must be distinct, non-empty strings")
        floor = _BYTE_ALPHABET + len(self.special_tokens) + 1
        if not floor <= self.vocab_size < 2**32:
            raise ConfigError(
                f"TokenizerConfig.vocab_size={self.vocab_size} must be >= {floor} (256 bytes + "
                "special tokens + 1 merge) and < 2**32; typical values are 32000-128000"
            )
        if self.min_frequency < 1:
            raise ConfigError("TokenizerConfig.min_frequency must be >= 1 (2 is typical)")
        if self.sample_chars <= 0:
            raise ConfigError("TokenizerConfig.sample_chars must be > 0, e.g. 20_000_000")
        if self.heldout_docs_per_source < 1:
            raise ConfigError("TokenizerConfig.heldout_docs_per_source must be >= 1")


@dataclass(frozen=True, kw_only=True)
class Fertility:
    """Compression of one source's held-out documents."""

    docs: int
    chars: int
    tokens: int
    tokens_per_word: float
    tokens_per_char: float
    bytes_per_token: float


@dataclass(frozen=True, kw_only=True)
class TokenizerStats:
    vocab_size: int
    sample_docs: int
    sample_chars: int
    sample_chars_by_source: dict[str, int]
    heldout_docs: int
    roundtrip_docs: int
    roundtrip_rate: float
    special_ids: dict[str, int]
    overall: Fertility
    sources: dict[str, Fertility]

    def as_metadata(self) -> dict:
        return {
            "vocab_size": self.vocab_size,
            "sample_docs": self.sample_docs,
            "sample_chars": self.sample_chars,
            "heldout_docs": self.heldout_docs,
            "roundtrip_docs": self.roundtrip_docs,
            "roundtrip_rate": self.roundtrip_rate,
            "tokens_per_word": self.overall.tokens_per_word,
            "tokens_per_char": self.overall.tokens_per_char,
            "bytes_per_token": self.overall.bytes_per_token,
            "special_ids": dict(self.special_ids),
            "sources": {name: asdict(f) for name, f in self.sources.items()},
        }


def new_tokenizer() -> Tokenizer:
    """An untrained byte-level BPE tokenizer (no normalizer: text is kept byte-exact)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def tokenizer_file(uri: str) -> str:
    """``uri`` if it names a ``.json`` file, else ``<uri>/tokenizer.json``."""
    return uri if uri.endswith(".json") else storage.join(uri, "tokenizer.json")


def load_tokenizer(uri: str) -> Tokenizer:
    """Load ``tokenizer.json`` from a file URI or from the directory that holds it."""
    return Tokenizer.from_str(storage.read_bytes(tokenizer_file(uri)).decode("utf-8"))


def special_ids(tok: Tokenizer) -> dict[str, int]:
    """BOS/EOS/PAD ids: the first three special tokens by id (see the module docstring)."""
    specials = sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special)
    if len(specials) < 3:
        raise DataError("tokenizer has fewer than 3 special tokens; expected bos, eos, pad")
    return {"bos": specials[0], "eos": specials[1], "pad": specials[2]}


def _select(
    table_rows: list[tuple[str, str, str]], config: TokenizerConfig
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], dict[str, int]]:
    """Split unique train docs into (training sample, held-out) as (source, text) lists."""
    by_source: dict[str, dict[str, str]] = {}
    for doc_id, text, source in table_rows:
        by_source.setdefault(source, {})[doc_id] = text
    share_chars = {s: 0 for s in by_source}
    for _, text, source in table_rows:  # repeats count: shares follow the realized mixture
        share_chars[source] += len(text)
    total = sum(share_chars.values())
    sample: list[tuple[str, str]] = []
    heldout: list[tuple[str, str]] = []
    sample_by_source: dict[str, int] = {}
    for source in sorted(by_source):
        docs = by_source[source]
        order = sorted(docs, key=lambda i: (hash_score(config.seed, i), i))
        n_held = min(config.heldout_docs_per_source, len(order) // 10)
        n_held = max(n_held, 1) if len(order) >= 2 else 0
        heldout += [(source, docs[i]) for i in order[:n_held]]
        budget = config.sample_chars * share_chars[source] / total if total else 0
        taken = 0
        for i in order[n_held:]:
            if taken >= budget:
                break
            sample.append((source, docs[i]))
            taken += len(docs[i])
        sample_by_source[source] = taken
    return sample, heldout, sample_by_source


def _fertility(tok: Tokenizer, texts: list[str]) -> Fertility:
    encodings = tok.encode_batch(texts, add_special_tokens=False)
    tokens = sum(len(e.ids) for e in encodings)
    chars = sum(len(t) for t in texts)
    words = sum(len(t.split()) for t in texts)
    num_bytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    return Fertility(
        docs=len(texts),
        chars=chars,
        tokens=tokens,
        tokens_per_word=round(tokens / words, 4) if words else 0.0,
        tokens_per_char=round(tokens / chars, 4) if chars else 0.0,
        bytes_per_token=round(num_bytes / tokens, 4) if tokens else 0.0,
    )


def roundtrip_failures(tok: Tokenizer, texts: list[str]) -> list[int]:
    """Indices of texts where ``decode(encode(text)) != text`` (special tokens kept)."""
    encodings = tok.encode_batch(texts, add_special_tokens=False)
    decoded = tok.decode_batch([e.ids for e in encodings], skip_special_tokens=False)
    return [i for i, (a, b) in enumerate(zip(texts, decoded, strict=True)) if a != b]


def train_tokenizer(train_uri: str, output_dir_uri: str, config: TokenizerConfig) -> TokenizerStats:
    """Train byte-level BPE on a sample of ``train_uri``; write tokenizer.json and stats.json."""
    table = storage.read_table(train_uri, columns=["id", "text", "source"])
    if table.num_rows == 0:
        raise DataError(f"{train_uri} has no documents; the tokenizer needs training text")
    rows = list(
        zip(
            table.column("id").to_pylist(),
            table.column("text").to_pylist(),
            table.column("source").to_pylist(),
            strict=True,
        )
    )
    sample, heldout, sample_by_source = _select(rows, config)
    if not sample:
        raise DataError(f"{train_uri}: no documents left for training after the held-out split")

    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        special_tokens=list(config.special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    sample_texts = [text for _, text in sample]
    tok.train_from_iterator(sample_texts, trainer, length=len(sample_texts))

    eval_texts = [text for _, text in heldout] or sample_texts[: config.heldout_docs_per_source]
    check_texts = eval_texts + sample_texts[: config.heldout_docs_per_source]
    failures = roundtrip_failures(tok, check_texts)
    if failures:
        raise DataError(
            f"tokenizer does not round-trip {len(failures)}/{len(check_texts)} documents "
            f"(first: {check_texts[failures[0]][:80]!r}); a normalizer or lossy pre-tokenizer "
            "was configured somewhere"
        )
    sources = sorted({s for s, _ in heldout})
    stats = TokenizerStats(
        vocab_size=tok.get_vocab_size(),
        sample_docs=len(sample),
        sample_chars=sum(len(t) for t in sample_texts),
        sample_chars_by_source=sample_by_source,
        heldout_docs=len(heldout),
        roundtrip_docs=len(check_texts),
        roundtrip_rate=1.0 - len(failures) / len(check_texts),
        special_ids=special_ids(tok),
        overall=_fertility(tok, eval_texts),
        sources={s: _fertility(tok, [t for src, t in heldout if src == s]) for s in sources},
    )
    storage.write_bytes(
        tok.to_str().encode("utf-8"), storage.join(output_dir_uri, "tokenizer.json")
    )
    storage.write_json(asdict(stats), storage.join(output_dir_uri, "stats.json"))
    return stats
