"""The filter stage: raw shard in → cleaned, language-tagged, filtered, PII-masked shard out.

Per document, in order (the first rule that fires decides the reason):

1. null text → ``empty``; more than ``heuristics.max_chars`` → ``too_long`` (before any work);
   mostly control characters / U+FFFD → ``binary_content``
2. mojibake repair, NFKC + whitespace normalization; blank → ``empty``; ``too_short``
3. URL blocklist / adult-spam URL patterns / URL dedup (``url_*``, ``duplicate_url``)
4. fastText LID-176 (batched): ``low_language_score``, ``wrong_language``
5. code (``code_sources``): the code rules of :mod:`.heuristics` only; prose: Gopher
   repetition → Gopher quality → C4 (removes bad lines) → FineWeb → toxicity (sentence model +
   word lists, :mod:`.toxicity`; ``toxicity_score`` is set on every row with text, rejects too)
6. ``quality_score`` from the quality classifier (or the heuristic score without one);
   ``low_quality_score`` under ``min_quality_score`` / outside ``keep_top_fraction``
7. PII masking (never drops) of the kept text, and of the rejected text before it is written:
   ``rejects.parquet`` never holds the PII that :mod:`.pii` detects

Batches of ``batch_size`` documents stream through, read one input row group at a time, and
each batch's kept documents and rejects are written as they come, so peak memory is bounded by
the batch, not the shard (apart from the URL-dedup digests, ~100 bytes per document;
``bench/filter_memory.py`` measures it). Every dropped document lands in ``rejects.parquet``
with its reason and detail; ``documents in = kept + Σ dropped`` (documents and raw
characters) is enforced before ``stats.json`` is written. An unexpected error names the input
and the row offset::

    from pretrain.filters.pipeline import FilterConfig, filter_shard
    from pretrain.filters.langid import LangIdConfig
    stats = filter_shard(
        ".pretrain/artifacts/raw_shards/embedded-0000/documents.parquet",
        ".pretrain/artifacts/filtered_shards/embedded-0000",
        FilterConfig(langid=LangIdConfig(languages=("en",))),
    )
    stats.as_metadata()  # {"documents_in": 285, "kept": 240, "dropped_too_short": 12, ...}
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import pyarrow as pa

from pretrain import storage
from pretrain.data.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA
from pretrain.errors import ConfigError, DataError
from pretrain.filters.base import Filter, Rejection, is_code
from pretrain.filters.c4_fineweb import C4Config, C4Filter, FineWebConfig, FineWebFilter
from pretrain.filters.encoding import binary_fraction, fix_mojibake
from pretrain.filters.funnel import FilterStats
from pretrain.filters.gopher import (
    GopherQuality,
    GopherQualityConfig,
    GopherRepetition,
    GopherRepetitionConfig,
)
from pretrain.filters.heuristics import HeuristicConfig, HeuristicFilter, quality_score
from pretrain.filters.langid import LangIdConfig, LanguageFilter
from pretrain.filters.normalize import NormalizeConfig, normalize_text
from pretrain.filters.pii import PiiConfig, mask_pii
from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
from pretrain.filters.urls import UrlConfig, UrlFilter

STAGE = "filter"
__all__ = ["FilterConfig", "FilterStats", "filter_shard"]
_PRE_REASONS = ("empty", "too_long", "binary_content", "too_short")


@dataclass(frozen=True, kw_only=True)
class FilterConfig:
    """Every block's config; a block set to ``None`` is switched off."""

    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    langid: LangIdConfig = field(default_factory=LangIdConfig)
    heuristics: HeuristicConfig = field(default_factory=HeuristicConfig)  # length + code rules
    urls: UrlConfig | None = field(default_factory=UrlConfig)
    gopher_repetition: GopherRepetitionConfig | None = field(default_factory=GopherRepetitionConfig)
    gopher_quality: GopherQualityConfig | None = field(default_factory=GopherQualityConfig)
    c4: C4Config | None = field(default_factory=C4Config)
    fineweb: FineWebConfig | None = field(default_factory=FineWebConfig)
    toxicity: ToxicityConfig | None = field(default_factory=ToxicityConfig)
    pii: PiiConfig | None = field(default_factory=PiiConfig)
    quality_model_uri: str | None = None  # a quality_classifier folder; None: heuristic score
    min_quality_score: float | None = None  # drop prose under this classifier score
    keep_top_fraction: float | None = None  # or: keep this top share of the web pool
    repair_mojibake: bool = True
    max_binary_fraction: float = 0.1  # control chars + U+FFFD over chars
    code_sources: tuple[str, ...] = ("code",)
    batch_size: int = 2048

    def __post_init__(self) -> None:
        for part in (self.normalize, self.langid, self.heuristics):
            if part.code_sources != self.code_sources:
                raise ConfigError(
                    f"{type(part).__name__}.code_sources={part.code_sources} differs from "
                    f"FilterConfig.code_sources={self.code_sources}: set them to the same tuple"
                )
        if self.batch_size < 1:
            raise ConfigError(f"batch_size={self.batch_size}: use a positive number")
        if not 0.0 < self.max_binary_fraction <= 1.0:
            raise ConfigError(f"max_binary_fraction={self.max_binary_fraction}: use (0, 1]")
        if self.min_quality_score is not None and self.keep_top_fraction is not None:
            raise ConfigError("set min_quality_score or keep_top_fraction, not both")
        if (
            self.min_quality_score is not None or self.keep_top_fraction is not None
        ) and self.quality_model_uri is None:
            raise ConfigError(
                "a quality threshold needs quality_model_uri (the quality_classifier folder)"
            )

    @classmethod
    def for_code_sources(cls, code_sources: tuple[str, ...], **kwargs: object) -> FilterConfig:
        """Default components, all treating ``code_sources`` as code."""
        return cls(
            normalize=NormalizeConfig(code_sources=code_sources),
            langid=LangIdConfig(code_sources=code_sources),
            heuristics=HeuristicConfig(code_sources=code_sources),
            code_sources=code_sources,
            **kwargs,  # type: ignore[arg-type]
        )

    def as_dict(self) -> dict:
        return asdict(self)


class _Rules:
    """The configured blocks for one shard (URL dedup state lives here)."""

    def __init__(self, config: FilterConfig) -> None:
        self.config = config
        self.url = UrlFilter(config.urls) if config.urls else None
        self.lid = LanguageFilter(config.langid)
        self.code = HeuristicFilter(config.heuristics)
        optional: list[tuple[object, type]] = [
            (config.gopher_repetition, GopherRepetition),
            (config.gopher_quality, GopherQuality),
            (config.c4, C4Filter),
            (config.fineweb, FineWebFilter),
        ]
        self.prose: list[Filter] = [cls(c) for c, cls in optional if c is not None]
        self.toxicity = ToxicityFilter(config.toxicity) if config.toxicity else None
        self.model = None
        self.threshold = config.min_quality_score
        if config.quality_model_uri:
            from pretrain.quality.classifier import QualityModel

            self.model = QualityModel.load(config.quality_model_uri)
            if config.keep_top_fraction is not None:
                self.threshold = self.model.threshold_for_top_fraction(config.keep_top_fraction)


def filter_shard(input_uri: str, output_dir_uri: str, config: FilterConfig) -> FilterStats:
    """Filter one documents.parquet into ``output_dir_uri`` (documents, rejects, stats.json)."""
    rules = _Rules(config)
    dropped: Counter[str] = Counter()
    dropped_chars: Counter[str] = Counter()
    order: dict[str, None] = dict.fromkeys(_PRE_REASONS)
    kept_sources: Counter[str] = Counter()
    kept_languages: Counter[str] = Counter()
    pii: Counter[str] = Counter()
    totals = Counter()
    offset = 0
    docs_uri = storage.join(output_dir_uri, "documents.parquet")
    rejects_uri = storage.join(output_dir_uri, "rejects.parquet")
    with (
        storage.StreamingTableWriter(docs_uri, DOCUMENT_SCHEMA) as kept_out,
        storage.StreamingTableWriter(rejects_uri, REJECT_SCHEMA) as rejects_out,
    ):
        for batch in storage.iter_table_batches(input_uri, batch_size=config.batch_size):
            missing = {"id", "text", "source"} - set(batch.schema.names)
            if missing:
                raise DataError(
                    f"{input_uri} lacks columns {sorted(missing)}: not a documents table"
                )
            docs = batch.to_pylist()
            del batch  # the rows live on as Python objects: hand Arrow's pages back now
            pa.default_memory_pool().release_unused()  # else mimalloc keeps freed pages
            try:
                decisions = _filter_batch(docs, rules, totals)
            except Exception as exc:
                raise DataError(
                    f"filtering {input_uri} failed in the batch at row offset {offset} "
                    f"({len(docs)} rows): {type(exc).__name__}: {exc}"
                ) from exc
            kept, rejects = [], []
            for doc, decision in zip(docs, decisions, strict=True):
                raw_chars = doc.pop("_raw_chars")
                doc.pop("_words", None)
                doc.pop("_toxicity", None)
                if decision is None:
                    kept.append(doc)
                    kept_sources[doc["source"]] += 1
                    kept_languages[doc["language"]] += 1
                    pii.update(doc.pop("_pii", {}))
                    totals["chars_kept"] += raw_chars
                    totals["chars_out"] += doc["num_chars"]
                else:
                    doc.pop("_pii", None)
                    if config.pii is not None and doc["text"] is not None:
                        doc["text"], _ = mask_pii(  # rejects are masked too
                            doc["text"], config.pii, language=doc.get("language")
                        )
                    order.setdefault(decision[0])
                    dropped[decision[0]] += 1
                    dropped_chars[decision[0]] += raw_chars
                    rejects.append(
                        {**doc, "stage": STAGE, "reason": decision[0], "detail": decision[1]}
                    )
            kept_out.write_rows(kept)
            rejects_out.write_rows(rejects)
            kept_out.flush()  # row groups of at most one batch: nothing outlives its batch
            rejects_out.flush()
            pa.default_memory_pool().release_unused()
            offset += len(docs)
        stats = FilterStats(
            documents_in=offset,
            kept=kept_out.rows,
            dropped=dict(sorted(dropped.items())),
            chars_in=totals["chars_in"],
            chars_kept=totals["chars_kept"],
            dropped_chars=dict(sorted(dropped_chars.items())),
            chars_out=totals["chars_out"],
            kept_by_source=dict(sorted(kept_sources.items())),
            kept_by_language=dict(sorted(kept_languages.items())),
            pii_masked=dict(sorted(pii.items())),
            mojibake_repaired=totals["mojibake_repaired"],
            reason_order=tuple(r for r in order if r in dropped),
        )
    storage.write_json(
        {**asdict(stats), "config": config.as_dict(), "input": input_uri},
        storage.join(output_dir_uri, "stats.json"),
    )
    return stats


def _filter_batch(docs: list[dict], rules: _Rules, totals: Counter) -> list[Rejection | None]:
    """Decide every document of a batch; kept documents are cleaned in place."""
    decisions: list[Rejection | None] = [_prepare(doc, rules, totals) for doc in docs]
    alive = [d for d, decision in zip(docs, decisions, strict=True) if decision is None]
    rules.lid.annotate_batch(alive)
    for i, doc in enumerate(docs):
        if decisions[i] is None:
            decisions[i] = _apply_rules(doc, rules)
    if rules.toxicity is not None:  # one model call; kept and rejected rows get a score
        rules.toxicity.score_batch([d for d in docs if d["text"] is not None])
        for i, doc in enumerate(docs):
            if decisions[i] is None and not is_code(doc, rules.config.code_sources):
                decisions[i] = rules.toxicity.check(doc)
    survivors = [
        d for d, decision in zip(docs, decisions, strict=True)
        if decision is None and not is_code(d, rules.config.code_sources)
    ]  # fmt: skip
    if rules.model is not None:
        scores = rules.model.score([d["text"] for d in survivors])
        for doc, score in zip(survivors, scores, strict=True):
            doc["quality_score"] = score
    for i, doc in enumerate(docs):
        if decisions[i] is not None:
            continue
        code = is_code(doc, rules.config.code_sources)
        if doc.get("quality_score") is None or code:
            doc["quality_score"] = quality_score(doc["text"], code=code)
        elif rules.threshold is not None and doc["quality_score"] < rules.threshold:
            decisions[i] = (
                "low_quality_score",
                f"{doc['quality_score']:.4f} < {rules.threshold:.4f}",
            )
            continue
        if rules.config.pii is not None:
            doc["text"], doc["_pii"] = mask_pii(
                doc["text"], rules.config.pii, language=doc.get("language")
            )
        doc["num_chars"] = len(doc["text"])
    return decisions


def _prepare(doc: dict, rules: _Rules, totals: Counter) -> Rejection | None:
    """Cheap checks and cleaning before language ID."""
    config, text = rules.config, doc["text"]
    doc["_raw_chars"] = len(text) if text is not None else 0
    doc["quality_score"] = None
    totals["chars_in"] += doc["_raw_chars"]
    if text is None:
        return "empty", "null text"
    if len(text) > config.heuristics.max_chars:
        return "too_long", f"{len(text)} chars"
    if len(text) >= 32 and (share := binary_fraction(text)) > config.max_binary_fraction:
        return "binary_content", f"{share:.3f} control/replacement chars"
    code = is_code(doc, config.code_sources)
    if config.repair_mojibake and not code:
        repaired = fix_mojibake(text)
        totals["mojibake_repaired"] += repaired != text
        text = repaired
    doc["text"] = normalize_text(text, code=code, config=config.normalize)
    doc["num_chars"] = len(doc["text"])
    if not doc["text"].strip():
        return "empty", f"{doc['_raw_chars']} chars before normalization"
    if doc["num_chars"] < config.heuristics.min_chars:
        return "too_short", f"{doc['num_chars']} chars"
    if rules.url is not None:
        return rules.url.check(doc)
    return None


def _apply_rules(doc: dict, rules: _Rules) -> Rejection | None:
    rejection = rules.lid.decide(doc)
    if rejection is not None:
        return rejection
    if is_code(doc, rules.config.code_sources):
        return rules.code.check(doc)
    for rule in rules.prose:
        rejection = rule.check(doc)
        if rejection is not None:
            return rejection
    return None
