"""The filter stage: raw shard in → cleaned, language-tagged, filtered, PII-masked shard out.

Each source gets its profile (:mod:`.profiles`: ``FilterConfig.profiles``, resolved with
:meth:`FilterConfig.for_source`). Per document, in order (the first rule that fires decides
the reason):

1. null text → ``empty``; more than ``heuristics.max_chars`` → ``too_long`` when the
   profile's ``long_documents="reject"``; mostly control characters / U+FFFD →
   ``binary_content``
2. paragraph marks of hard-wrapped text (:mod:`.unwrap`), mojibake repair, NFKC + whitespace
   normalization; blank → ``empty``
3. fastText LID-176 (batched) on every document with text, rejected ones included, so every
   reject but an empty one has a ``language``
4. ``too_short`` (CJK characters weigh ``heuristics.cjk_char_weight``)
5. URL blocklist / adult-spam URL patterns / URL dedup (``url_*``, ``duplicate_url``)
6. ``low_language_score``, ``wrong_language``
7. code (``code_sources``): the code rules of :mod:`.heuristics` only; prose: Gopher
   repetition → Gopher quality → C4 (removes bad paragraphs) → FineWeb → toxicity (sentence
   models + word lists, :mod:`.toxicity`; ``toxicity_score`` on every row with text, rejects too,
   null where no model covers the language: ``toxicity_unscored`` counts those it passed, and
   ``toxicity_judged_by`` every document it judged by what could flag it: "models: en",
   "word lists: de" or "none: sw"; a reject's detail says it too);
   a document whose line rules removed more than ``max_removed_fraction`` of its characters →
   ``excessive_line_removal`` (never kept shrunk); ``chars_removed`` per document and per rule
8. ``quality_score`` (quality classifier, or the heuristic score without one) on every
   document with text, rejects included; ``low_quality_score`` under ``min_quality_score`` /
   outside ``keep_top_fraction``
9. PII masking (never drops) of every kept and rejected row before it is written: the text
   (:mod:`.pii`) and the ``url``, ``metadata``, ``source_id`` and ``detail`` columns
   (:mod:`.pii_fields`), so no column of ``documents.parquet`` or ``rejects.parquet`` holds
   the PII that :mod:`.pii` detects; ``pii_masked`` counts the kept text's spans by type and
   ``pii_masked_columns`` every other masked span (``kept.url.email``,
   ``rejected.text.phone``, ``kept.metadata.dropped_keys``); documents over ``max_chars``
   whose profile says ``long_documents="split"`` are cut into chunks of about
   ``chunk_chars`` at paragraph boundaries (``chunks_added`` in the stats; the chunks keep
   ``source_id``)

Batches of ``batch_size`` documents stream through, read one input row group at a time, and
each batch's kept documents and rejects are written as they come, so peak memory is bounded by
the batch, not the shard (apart from the URL-dedup digests, ~100 bytes per document;
``bench/filter_memory.py`` measures it). Every dropped document lands in ``rejects.parquet``
with its reason and detail; ``documents in = kept + Σ dropped`` (documents and raw
characters) is enforced before ``stats.json`` is written. An unexpected error names the input
and the row offset::

    from pretrain.filters.config import FilterConfig
    from pretrain.filters.pipeline import filter_shard
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
from dataclasses import asdict
from typing import TYPE_CHECKING

import pyarrow as pa

from pretrain import storage
from pretrain.data.encoding import binary_fraction, fix_mojibake
from pretrain.data.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA, doc_id
from pretrain.errors import DataError
from pretrain.filters.base import Filter, Rejection, is_code
from pretrain.filters.c4_fineweb import C4Filter, FineWebFilter
from pretrain.filters.config import FilterConfig
from pretrain.filters.funnel import FilterStats
from pretrain.filters.gopher import (
    GopherQuality,
    GopherRepetition,
)
from pretrain.filters.heuristics import HeuristicFilter, quality_score
from pretrain.filters.langid import LanguageFilter
from pretrain.filters.normalize import normalize_text
from pretrain.filters.pii import mask_pii
from pretrain.filters.pii_fields import ColumnMasker
from pretrain.filters.toxicity import ToxicityFilter
from pretrain.filters.unwrap import mark_paragraphs, split_at_paragraphs
from pretrain.filters.urls import UrlFilter
from pretrain.text import weighted_length

if TYPE_CHECKING:
    from pretrain.quality.classifier import QualityModel  # imported lazily where it is used

STAGE = "filter"
__all__ = ["FilterStats", "filter_shard"]
_PRE_REASONS = ("empty", "too_long", "binary_content", "too_short")
EXCESSIVE_LINE_REMOVAL = "excessive_line_removal"


class _SourceRules:
    """The configured blocks for one source's profile."""

    def __init__(
        self, config: FilterConfig, url: UrlFilter | None, model: QualityModel | None
    ) -> None:
        self.config = config
        self.url = url if config.urls is not None else None
        self.lid = LanguageFilter(config.langid)
        self.code = HeuristicFilter(config.heuristics)
        self.prose: list[Filter] = [
            rule
            for rule in (
                config.gopher_repetition and GopherRepetition(config.gopher_repetition),
                config.gopher_quality and GopherQuality(config.gopher_quality),
                config.c4 and C4Filter(config.c4, config.unwrap),
                config.fineweb and FineWebFilter(config.fineweb),
            )
            if rule
        ]
        self.toxicity = ToxicityFilter(config.toxicity) if config.toxicity else None
        self.model = model if config.quality_model_uri and model is not None else None
        self.threshold = config.min_quality_score
        if self.model is not None and config.keep_top_fraction is not None:
            self.threshold = self.model.threshold_for_top_fraction(config.keep_top_fraction)


class _Rules:
    """The blocks for one shard, per source (URL dedup state is shared by every source)."""

    def __init__(self, config: FilterConfig) -> None:
        self.config = config
        self.url = UrlFilter(config.urls) if config.urls else None
        self.model: QualityModel | None = None
        self.quality_skipped: str | None = None
        if config.quality_model_uri:
            from pretrain.quality.classifier import QualityModel, skipped_reason

            self.quality_skipped = skipped_reason(config.quality_model_uri)
            if self.quality_skipped is None:
                self.model = QualityModel.load(config.quality_model_uri)
            elif config.min_quality_score is not None or config.keep_top_fraction is not None:
                raise DataError(
                    f"a quality threshold is set but {self.quality_skipped}: add reference "
                    "text to the quality classifier or remove the threshold"
                )
        self._by_source: dict[str, _SourceRules] = {}
        self.toxicity_unscored: Counter[str] = Counter()  # language -> documents passed unscored
        self.toxicity_judged_by: Counter[str] = Counter()  # "word lists: de" -> documents judged

    def of(self, doc: dict) -> _SourceRules:
        source = doc.get("source") or ""
        rules = self._by_source.get(source)
        if rules is None:
            rules = _SourceRules(self.config.for_source(source), self.url, self.model)
            self._by_source[source] = rules
        return rules


class _Tally:
    """What one shard's filtering counted: documents in = kept + rejected (by reason), and the
    characters removed inside kept documents."""

    def __init__(self) -> None:
        self.dropped: Counter[str] = Counter()
        self.dropped_chars: Counter[str] = Counter()
        self.order: dict[str, None] = dict.fromkeys(_PRE_REASONS)
        self.kept_sources: Counter[str] = Counter()
        self.kept_languages: Counter[str] = Counter()
        self.pii: Counter[str] = Counter()
        self.pii_columns: Counter[str] = Counter()  # "kept.url.email", "rejected.text.phone", ...
        self.chars_removed: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()

    def keep(self, doc: dict, chunks: list[dict], removed: dict[str, int], raw_chars: int) -> None:
        self.totals["chunks_added"] += len(chunks) - 1
        self.kept_sources[doc["source"]] += len(chunks)
        self.kept_languages[doc["language"]] += len(chunks)
        self.pii.update(doc.pop("_pii", {}))
        self.chars_removed.update(removed)
        self.totals["chars_kept"] += raw_chars
        self.totals["chars_out"] += sum(c["num_chars"] for c in chunks)

    def reject(self, reason: str, raw_chars: int) -> None:
        self.order.setdefault(reason)
        self.dropped[reason] += 1
        self.dropped_chars[reason] += raw_chars

    def stats(self, documents_in: int, kept: int, rules: _Rules) -> FilterStats:
        def ordered(counts: Counter[str]) -> dict[str, int]:
            return dict(sorted(counts.items()))

        totals = self.totals
        return FilterStats(
            documents_in=documents_in,
            kept=kept,
            dropped=ordered(self.dropped),
            chars_in=totals["chars_in"],
            chars_kept=totals["chars_kept"],
            dropped_chars=ordered(self.dropped_chars),
            chars_out=totals["chars_out"],
            chars_removed=ordered(self.chars_removed),
            chunks_added=totals["chunks_added"],
            kept_by_source=ordered(self.kept_sources),
            kept_by_language=ordered(self.kept_languages),
            pii_masked=ordered(self.pii),
            pii_masked_columns=ordered(self.pii_columns),
            mojibake_repaired=totals["mojibake_repaired"],
            toxicity_unscored=ordered(rules.toxicity_unscored),
            toxicity_judged_by=ordered(rules.toxicity_judged_by),
            reason_order=tuple(r for r in self.order if r in self.dropped),
        )


def _reject_row(
    doc: dict, decision: Rejection, rules: _Rules, tally: _Tally, masker: ColumnMasker
) -> dict:
    """The rejects row of ``doc``: its reason and detail, its text and (through ``masker``) its
    other columns PII-masked like a kept document's."""
    doc.pop("_pii", None)
    reject = {**doc, "stage": STAGE, "reason": decision[0], "detail": decision[1]}
    pii_config = rules.of(doc).config.pii
    if pii_config is not None:  # rejects are masked too, every column
        language = doc.get("language")
        if reject["text"] is not None:
            reject["text"], found = mask_pii(reject["text"], pii_config, language=language)
            tally.pii_columns.update({f"rejected.text.{k}": n for k, n in found.items()})
        masker.add_row(reject, pii_config, language=language, prefix="rejected.")
    return reject


def _sorted_out(
    docs: list[dict], decisions: list[Rejection | None], rules: _Rules, tally: _Tally
) -> tuple[list[dict], list[dict]]:
    """One batch's documents split into kept rows (long ones in chunks) and rejects rows."""
    kept, rejects = [], []
    masker = ColumnMasker()  # the rejects' other columns, masked together
    for doc, decision in zip(docs, decisions, strict=True):
        raw_chars = doc.pop("_raw_chars")
        removed = doc.pop("_chars_removed", None) or {}
        doc["chars_removed"] = sum(removed.values())
        for key in ("_words", "_chars_before", "_text_before", "_toxicity"):
            doc.pop(key, None)
        if decision is None:
            chunks = _split_long(doc, rules.of(doc).config)
            kept.extend(chunks)
            tally.keep(doc, chunks, removed, raw_chars)
        else:
            rejects.append(_reject_row(doc, decision, rules, tally, masker))
            tally.reject(decision[0], raw_chars)
    tally.pii_columns.update(masker.mask())
    return kept, rejects


def filter_shard(input_uri: str, output_dir_uri: str, config: FilterConfig) -> FilterStats:
    """Filter one documents.parquet into ``output_dir_uri`` (documents, rejects, stats.json)."""
    rules, tally, offset = _Rules(config), _Tally(), 0
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
                decisions = _filter_batch(docs, rules, tally.totals, tally.pii_columns)
            except Exception as exc:
                raise DataError(
                    f"filtering {input_uri} failed in the batch at row offset {offset} "
                    f"({len(docs)} rows): {type(exc).__name__}: {exc}"
                ) from exc
            kept, rejects = _sorted_out(docs, decisions, rules, tally)
            kept_out.write_rows(kept)
            rejects_out.write_rows(rejects)
            kept_out.flush()  # row groups of at most one batch: nothing outlives its batch
            rejects_out.flush()
            pa.default_memory_pool().release_unused()
            offset += len(docs)
        stats = tally.stats(offset, kept_out.rows, rules)
    storage.write_json(
        {
            **asdict(stats),
            "config": config.as_dict(),
            "input": input_uri,
            "quality_classifier_skipped": rules.quality_skipped,
        },
        storage.join(output_dir_uri, "stats.json"),
    )
    return stats


def _filter_batch(
    docs: list[dict], rules: _Rules, totals: Counter, pii_columns: Counter
) -> list[Rejection | None]:
    """Decide every document of a batch; kept documents are cleaned (and PII-masked, counts of
    the other columns into ``pii_columns``) in place."""
    kept_columns = ColumnMasker()
    decisions: list[Rejection | None] = [_prepare(doc, rules.of(doc), totals) for doc in docs]
    with_text = [
        d for d, decision in zip(docs, decisions, strict=True)
        if d["text"] is not None and (decision is None or decision[0] != "empty")
    ]  # fmt: skip
    _annotate(with_text, rules)
    for i, doc in enumerate(docs):
        if decisions[i] is None:
            decisions[i] = _apply_rules(doc, rules.of(doc))
    _toxicity(docs, decisions, rules)
    _score(docs, decisions, rules)
    for i, doc in enumerate(docs):
        if decisions[i] is not None:
            continue
        source_rules = rules.of(doc)
        if source_rules.threshold is not None and source_rules.model is not None:
            code = is_code(doc, source_rules.config.code_sources)
            if not code and doc["quality_score"] < source_rules.threshold:
                decisions[i] = (
                    "low_quality_score",
                    f"{doc['quality_score']:.4f} < {source_rules.threshold:.4f}",
                )
                continue
        if source_rules.config.pii is not None:
            doc["text"], doc["_pii"] = mask_pii(
                doc["text"], source_rules.config.pii, language=doc.get("language")
            )
            kept_columns.add_row(
                doc, source_rules.config.pii, language=doc.get("language"), prefix="kept."
            )
        doc["num_chars"] = len(doc["text"])
    pii_columns.update(kept_columns.mask())
    return decisions


def _toxicity(docs: list[dict], decisions: list[Rejection | None], rules: _Rules) -> None:
    """``toxicity_score`` on every document with text (one model call per toxicity setting),
    then the toxicity rule on the prose documents still kept."""
    groups: dict[int, tuple[ToxicityFilter, list[dict], list[bool]]] = {}
    for doc, decision in zip(docs, decisions, strict=True):
        source_rules = rules.of(doc)
        toxicity = source_rules.toxicity
        if toxicity is not None and doc["text"] is not None:
            _, members, decidable = groups.setdefault(id(toxicity), (toxicity, [], []))
            members.append(doc)
            decidable.append(
                decision is None and not is_code(doc, source_rules.config.code_sources)
            )
    for toxicity, members, decidable in groups.values():
        toxicity.score_batch(members, decidable)
    for i, doc in enumerate(docs):
        source_rules = rules.of(doc)
        if decisions[i] is None and source_rules.toxicity is not None:
            if not is_code(doc, source_rules.config.code_sources):
                decisions[i] = source_rules.toxicity.check(doc)
                rules.toxicity_judged_by[source_rules.toxicity.judged_by(doc)] += 1
                if decisions[i] is None and source_rules.toxicity.unscored(doc):
                    rules.toxicity_unscored[str(doc.get("language"))] += 1


def _annotate(docs: list[dict], rules: _Rules) -> None:
    """Language ID in one fastText call per language-ID setting (sources share it mostly)."""
    groups: dict[int, tuple[LanguageFilter, list[dict]]] = {}
    for doc in docs:
        lid = rules.of(doc).lid
        groups.setdefault(id(lid.config), (lid, []))[1].append(doc)
    for lid, members in groups.values():
        lid.annotate_batch(members)


def _score(docs: list[dict], decisions: list[Rejection | None], rules: _Rules) -> None:
    """``quality_score`` on every document with text, rejects included."""
    scored = [d for d in docs if d["text"]]
    prose = [
        d for d in scored
        if rules.of(d).model is not None and not is_code(d, rules.config.code_sources)
    ]  # fmt: skip
    if prose and rules.model is not None:
        for doc, score in zip(prose, rules.model.score([d["text"] for d in prose]), strict=True):
            doc["quality_score"] = score
    for doc in scored:
        if doc.get("quality_score") is None:
            doc["quality_score"] = quality_score(
                doc["text"], code=is_code(doc, rules.config.code_sources)
            )


def _prepare(doc: dict, rules: _SourceRules, totals: Counter) -> Rejection | None:
    """Cheap checks and cleaning before language ID."""
    config, text = rules.config, doc["text"]
    doc["_raw_chars"] = len(text) if text is not None else 0
    doc["quality_score"] = None
    doc["language"] = doc["language_score"] = None
    totals["chars_in"] += doc["_raw_chars"]
    if text is None:
        return "empty", "null text"
    if len(text) > config.heuristics.max_chars and config.long_documents == "reject":
        return "too_long", f"{len(text)} chars > max_chars={config.heuristics.max_chars}"
    if len(text) >= 32 and (share := binary_fraction(text)) > config.max_binary_fraction:
        return "binary_content", f"{share:.3f} control/replacement chars"
    code = is_code(doc, config.code_sources)
    if config.unwrap is not None and not code:
        text = mark_paragraphs(text, config.unwrap)
    if config.repair_mojibake and not code:
        repaired = fix_mojibake(text)
        totals["mojibake_repaired"] += repaired != text
        text = repaired
    doc["text"] = normalize_text(text, code=code, config=config.normalize)
    doc["num_chars"] = len(doc["text"])
    if not doc["text"].strip():
        return "empty", f"{doc['_raw_chars']} chars before normalization"
    return None


def _apply_rules(doc: dict, rules: _SourceRules) -> Rejection | None:
    config = rules.config
    if doc["num_chars"] < config.heuristics.min_chars:  # weighting only ever adds length
        length = weighted_length(doc["text"], config.heuristics.cjk_char_weight)
        if length < config.heuristics.min_chars:
            return "too_short", f"{doc['num_chars']} chars (weighted {length:g})"
    if rules.url is not None and (rejection := rules.url.check(doc)) is not None:
        return rejection
    rejection = rules.lid.decide(doc)
    if rejection is not None:
        return rejection
    if is_code(doc, config.code_sources):
        return rules.code.check(doc)
    doc["_chars_before"], doc["_text_before"] = len(doc["text"]), doc["text"]
    for rule in rules.prose:
        rejection = rule.check(doc)
        if rejection is not None:
            return rejection
    removed = sum((doc.get("_chars_removed") or {}).values())
    if removed and removed > config.max_removed_fraction * doc["_chars_before"]:
        by_rule = ", ".join(f"{k}={v}" for k, v in sorted(doc["_chars_removed"].items()))
        doc["text"] = doc["_text_before"]  # the reject shows what the rules would have cut
        return EXCESSIVE_LINE_REMOVAL, (
            f"removed {removed} of {doc['_chars_before']} chars "
            f"(> {config.max_removed_fraction:.2f}): {by_rule}"
        )
    return None


def _split_long(doc: dict, config: FilterConfig) -> list[dict]:
    """``doc`` alone, or its chunks at paragraph boundaries when its profile says split."""
    if config.long_documents != "split" or doc["num_chars"] <= config.heuristics.max_chars:
        return [doc]
    out = []
    for i, chunk in enumerate(split_at_paragraphs(doc["text"], config.chunk_chars)):
        part = {**doc, "text": chunk, "num_chars": len(chunk)}
        part["id"] = doc_id(chunk, doc["source"], f"{doc['id']}#chunk-{i}")
        out.append(part)
    return out
