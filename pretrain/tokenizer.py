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

Writes ``tokenizer.json``, ``stats.json``, and ``tokenizer_config.json`` +
``special_tokens_map.json`` so that Hugging Face loads it with BOS/EOS/PAD set::

    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast.from_pretrained("art/tokenizer")      # or tokenizer_file=...

The first three ``special_tokens`` are, in order, BOS, EOS and PAD; they get ids 0, 1, 2.

The training sample keeps each source's share of characters; with ``cjk_share`` set, exactly
that share of the sample's characters comes from CJK documents (at least 30 % Han, kana or
Hangul characters), the rest from the others, each part still split by source share.
Fertility (tokens per word and per character, bytes per token) is reported on held-out text
per source and per language (the ``language`` column, else the script: ``cjk``/``other``).

Determinism: the BPE trainer is multi-threaded (rayon), but its counts are reduced exactly and
merge ties are broken by pair order, so the saved ``tokenizer.json`` is byte-identical across
runs, processes and ``RAYON_NUM_THREADS`` settings (checked with tokenizers 0.23.3).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from pretrain import storage
from pretrain.errors import ConfigError, DataError
from pretrain.hashset import hash_score
from pretrain.settings import check_types

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
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
    cjk_share: float | None = None  # None: CJK text keeps its natural share of the sample

    def __post_init__(self) -> None:
        check_types(self)
        if self.cjk_share is not None and not 0.0 <= self.cjk_share < 1.0:
            raise ConfigError(
                f"TokenizerConfig.cjk_share={self.cjk_share} must be in [0, 1) or None, e.g. 0.1"
            )
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
    languages: dict[str, Fertility]
    sample_cjk_share: float

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
            "sample_cjk_share": self.sample_cjk_share,
            "sources": {name: asdict(f) for name, f in self.sources.items()},
            "languages": {name: asdict(f) for name, f in self.languages.items()},
            "fertility_md": self.fertility_md(),
        }

    def fertility_md(self) -> str:
        """Fertility per source and per language as a Markdown table."""
        lines = [
            "| group | docs | tokens/word | tokens/char | bytes/token |",
            "|---|---:|---:|---:|---:|",
        ]
        for kind, groups in (("source", self.sources), ("language", self.languages)):
            for name, f in groups.items():
                lines.append(
                    f"| {kind}: {name} | {f.docs} | {f.tokens_per_word} | {f.tokens_per_char} "
                    f"| {f.bytes_per_token} |"
                )
        return "\n".join(lines)


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


def is_cjk(text: str, threshold: float = 0.3) -> bool:
    """True when at least ``threshold`` of the non-space characters are Han, kana or Hangul."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return False
    cjk = sum(_CJK.match(c) is not None for c in chars)
    return cjk >= threshold * len(chars)


def _budgets(
    share_chars: dict[tuple[str, str], int], config: TokenizerConfig
) -> dict[tuple[str, str], float]:
    """Sample characters per (source, script) group."""
    total = sum(share_chars.values())
    if config.cjk_share is None or total == 0:
        return {g: config.sample_chars * n / total if total else 0 for g, n in share_chars.items()}
    out = {}
    for script, share in (("cjk", config.cjk_share), ("other", 1.0 - config.cjk_share)):
        part = sum(n for (_, sc), n in share_chars.items() if sc == script)
        for group, n in share_chars.items():
            if group[1] == script:
                out[group] = config.sample_chars * share * n / part if part else 0
    return out


def _select(
    table_rows: list[tuple[str, str, str, str | None]], config: TokenizerConfig
) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]], dict[str, int]]:
    """Split unique train docs into (training sample, held-out) as (source, language, text)."""
    groups: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    share_chars: dict[tuple[str, str], int] = {}
    script_of: dict[str, str] = {}
    for doc_id, text, source, language in table_rows:
        if doc_id not in script_of:
            script_of[doc_id] = "cjk" if is_cjk(text) else "other"
        group = (source, script_of[doc_id])
        groups.setdefault(group, {})[doc_id] = (text, language or script_of[doc_id])
        share_chars[group] = share_chars.get(group, 0) + len(text)  # repeats count
    budgets = _budgets(share_chars, config)
    sample: list[tuple[str, str, str]] = []
    heldout: list[tuple[str, str, str]] = []
    sample_by_source: dict[str, int] = {}
    for source in sorted({s for s, _ in groups}):
        ordered = sorted(
            ((doc, script) for (s, script), docs in groups.items() if s == source for doc in docs),
            key=lambda d: (hash_score(config.seed, d[0]), d[0]),
        )
        n_held = min(config.heldout_docs_per_source, len(ordered) // 10)
        n_held = max(n_held, 1) if len(ordered) >= 2 else 0
        for doc, script in ordered[:n_held]:
            text, language = groups[(source, script)][doc]
            heldout.append((source, language, text))
        taken: dict[str, int] = {"cjk": 0, "other": 0}
        for doc, script in ordered[n_held:]:
            if taken[script] >= budgets[(source, script)]:
                continue
            text, language = groups[(source, script)][doc]
            sample.append((source, language, text))
            taken[script] += len(text)
        sample_by_source[source] = sum(taken.values())
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
    table = storage.read_table(train_uri)
    if table.num_rows == 0:
        raise DataError(f"{train_uri} has no documents; the tokenizer needs training text")
    languages = (
        table.column("language").to_pylist()
        if "language" in table.column_names
        else [None] * table.num_rows
    )
    rows = list(
        zip(
            table.column("id").to_pylist(),
            table.column("text").to_pylist(),
            table.column("source").to_pylist(),
            languages,
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
    sample_texts = [text for *_, text in sample]
    tok.train_from_iterator(sample_texts, trainer, length=len(sample_texts))

    eval_texts = [text for *_, text in heldout] or sample_texts[: config.heldout_docs_per_source]
    check_texts = eval_texts + sample_texts[: config.heldout_docs_per_source]
    failures = roundtrip_failures(tok, check_texts)
    if failures:
        raise DataError(
            f"tokenizer does not round-trip {len(failures)}/{len(check_texts)} documents "
            f"(first: {check_texts[failures[0]][:80]!r}); a normalizer or lossy pre-tokenizer "
            "was configured somewhere"
        )
    sources = sorted({s for s, *_ in heldout})
    languages_held = sorted({lang for _, lang, _ in heldout})
    sample_chars = sum(len(t) for t in sample_texts)
    cjk_chars = sum(len(t) for t in sample_texts if is_cjk(t))
    stats = TokenizerStats(
        vocab_size=tok.get_vocab_size(),
        sample_docs=len(sample),
        sample_chars=sample_chars,
        sample_chars_by_source=sample_by_source,
        heldout_docs=len(heldout),
        roundtrip_docs=len(check_texts),
        roundtrip_rate=1.0 - len(failures) / len(check_texts),
        special_ids=special_ids(tok),
        overall=_fertility(tok, eval_texts),
        sources={s: _fertility(tok, [t for src, _, t in heldout if src == s]) for s in sources},
        languages={
            g: _fertility(tok, [t for _, lang, t in heldout if lang == g]) for g in languages_held
        },
        sample_cjk_share=round(cjk_chars / sample_chars, 4) if sample_chars else 0.0,
    )
    storage.write_bytes(
        tok.to_str().encode("utf-8"), storage.join(output_dir_uri, "tokenizer.json")
    )
    _write_hf_config(output_dir_uri, config)
    storage.write_json(asdict(stats), storage.join(output_dir_uri, "stats.json"))
    return stats


def _write_hf_config(output_dir_uri: str, config: TokenizerConfig) -> None:
    """``tokenizer_config.json`` + ``special_tokens_map.json`` for ``from_pretrained``."""
    bos, eos, pad = config.special_tokens[:3]
    specials = {"bos_token": bos, "eos_token": eos, "pad_token": pad}
    hf_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **specials,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1_000_000_000,
    }
    for name, payload in (
        ("tokenizer_config.json", hf_config),
        ("special_tokens_map.json", specials),
    ):
        blob = json.dumps(payload, indent=2, sort_keys=True).encode("utf-8")
        storage.write_bytes(blob, storage.join(output_dir_uri, name))
