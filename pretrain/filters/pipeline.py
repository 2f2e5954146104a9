"""The filter stage: raw shard in → normalized, language-tagged, filtered shard out.

Per document, in order: normalize text (updates ``text`` and ``num_chars``) → drop ``empty``
→ language ID (sets ``language``/``language_score``) → heuristic rules → ``quality_score``.
Every dropped document lands in ``rejects.parquet`` with ``stage="filter"``, its reason and a
detail, and ``documents_in == kept + sum(dropped)`` is checked before anything is written::

    from pretrain.filters.pipeline import FilterConfig, filter_shard
    from pretrain.filters.langid import LangIdConfig
    stats = filter_shard(
        ".pretrain/artifacts/raw_shards/embedded-0000/documents.parquet",
        ".pretrain/artifacts/filtered_shards/embedded-0000",
        FilterConfig(langid=LangIdConfig(languages=("en",))),
    )
    stats.as_metadata()  # {"documents_in": 285, "kept": 240, "dropped_too_short": 12, ...}

Output folder: ``documents.parquet``, ``rejects.parquet``, ``stats.json``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from pretrain import storage
from pretrain.data.schema import documents_table, rejects_table
from pretrain.errors import ConfigError, DataError
from pretrain.filters.base import Filter, is_code
from pretrain.filters.heuristics import HeuristicConfig, HeuristicFilter, quality_score
from pretrain.filters.langid import LangIdConfig, LanguageFilter
from pretrain.filters.normalize import NormalizeConfig, normalize_text

STAGE = "filter"


@dataclass(frozen=True, kw_only=True)
class FilterConfig:
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    langid: LangIdConfig = field(default_factory=LangIdConfig)
    heuristics: HeuristicConfig = field(default_factory=HeuristicConfig)
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


@dataclass(frozen=True, kw_only=True)
class FilterStats:
    documents_in: int
    kept: int
    dropped: dict[str, int]
    chars_in: int
    chars_kept: int
    kept_by_source: dict[str, int] = field(default_factory=dict)
    kept_by_language: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.documents_in != self.kept + sum(self.dropped.values()):
            raise DataError(
                f"filter accounting broken: {self.documents_in} in != {self.kept} kept + "
                f"{sum(self.dropped.values())} dropped"
            )

    def as_metadata(self) -> dict[str, int | float | str]:
        out: dict[str, int | float | str] = {
            "documents_in": self.documents_in,
            "kept": self.kept,
            "dropped": self.documents_in - self.kept,
            "keep_rate": round(self.kept / self.documents_in, 6) if self.documents_in else 0.0,
            "chars_in": self.chars_in,
            "chars_kept": self.chars_kept,
        }
        out.update({f"dropped_{reason}": n for reason, n in sorted(self.dropped.items())})
        out.update({f"kept_{src}": n for src, n in sorted(self.kept_by_source.items())})
        top = sorted(self.kept_by_language.items(), key=lambda kv: (-kv[1], str(kv[0])))[:10]
        out["top_languages"] = ", ".join(f"{lang}:{n}" for lang, n in top)
        return out


def filter_shard(input_uri: str, output_dir_uri: str, config: FilterConfig) -> FilterStats:
    """Filter one documents.parquet into ``output_dir_uri`` (documents, rejects, stats.json)."""
    rules: list[Filter] = [LanguageFilter(config.langid), HeuristicFilter(config.heuristics)]
    kept: list[dict] = []
    rejects: list[dict] = []
    documents_in = chars_in = 0
    for batch in storage.iter_table_batches(input_uri, batch_size=config.batch_size):
        missing = {"id", "text", "source"} - set(batch.schema.names)
        if missing:
            raise DataError(f"{input_uri} lacks columns {sorted(missing)}: not a documents table")
        for doc in batch.to_pylist():
            documents_in += 1
            chars_in += len(doc["text"] or "")
            reason = _filter_one(doc, rules, config)
            if reason is None:
                kept.append(doc)
            else:
                rejects.append({**doc, "stage": STAGE, "reason": reason[0], "detail": reason[1]})
    stats = FilterStats(
        documents_in=documents_in,
        kept=len(kept),
        dropped=dict(sorted(Counter(r["reason"] for r in rejects).items())),
        chars_in=chars_in,
        chars_kept=sum(d["num_chars"] for d in kept),
        kept_by_source=dict(sorted(Counter(d["source"] for d in kept).items())),
        kept_by_language=dict(sorted(Counter(d["language"] for d in kept).items())),
    )
    storage.write_table(documents_table(kept), storage.join(output_dir_uri, "documents.parquet"))
    storage.write_table(rejects_table(rejects), storage.join(output_dir_uri, "rejects.parquet"))
    storage.write_json(
        {**asdict(stats), "config": config.as_dict(), "input": input_uri},
        storage.join(output_dir_uri, "stats.json"),
    )
    return stats


def _filter_one(doc: dict, rules: list[Filter], config: FilterConfig) -> tuple[str, str] | None:
    """Normalize ``doc`` in place and return ``(reason, detail)`` if a rule drops it."""
    code = is_code(doc, config.code_sources)
    text = doc["text"]
    if text is None:
        return "empty", "null text"
    doc["text"] = normalize_text(text, code=code, config=config.normalize)
    doc["num_chars"] = len(doc["text"])
    if not doc["text"].strip():
        return "empty", f"{len(text)} chars before normalization"
    for rule in rules:
        rejection = rule.check(doc)
        if rejection is not None:
            return rejection
    doc["quality_score"] = quality_score(doc["text"], code=code)
    return None
