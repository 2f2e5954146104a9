"""The filter stage's settings: one config dataclass for every rule family and the source profiles.

Every field is reachable from the Dagster launchpad (``foundation/stages.py``) and as a
``pretrain`` CLI option (``--filter.<field>``); a block set to ``None`` is switched off, and
``profiles`` maps a source name to its :class:`~pretrain.filters.profiles.SourceProfile`::

    from pretrain.filters.config import FilterConfig
    config = FilterConfig(long_documents="split", toxicity=None)
    config.for_source("books").long_documents  # "split" (the books profile)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pretrain.errors import ConfigError
from pretrain.filters.c4_fineweb import C4Config, FineWebConfig
from pretrain.filters.gopher import GopherQualityConfig, GopherRepetitionConfig
from pretrain.filters.heuristics import HeuristicConfig
from pretrain.filters.langid import LangIdConfig
from pretrain.filters.normalize import NormalizeConfig
from pretrain.filters.pii import PiiConfig
from pretrain.filters.profiles import (
    ANY_LANGUAGE,
    FAMILIES,
    LONG_DOCUMENT_POLICIES,
    SourceProfile,
    default_profiles,
)
from pretrain.filters.toxicity import ToxicityConfig
from pretrain.filters.unwrap import UnwrapConfig
from pretrain.filters.urls import UrlConfig
from pretrain.settings import check_types


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
    unwrap: UnwrapConfig | None = field(default_factory=UnwrapConfig)  # None: physical lines
    max_removed_fraction: float = 0.30  # line rules removing more → excessive_line_removal
    long_documents: str = "reject"  # over heuristics.max_chars: "reject", "keep" or "split"
    chunk_chars: int = 100_000  # chunk size for "split" (cut at paragraph boundaries)
    profiles: dict[str, SourceProfile] = field(default_factory=default_profiles)
    use_quality_classifier: bool = True  # False: the heuristic score even with a model
    max_drop_rate_per_reason: float = 0.5  # asset-check bound: warn above this share of input

    def __post_init__(self) -> None:
        check_types(self)
        if not 0.0 <= self.max_removed_fraction <= 1.0:
            raise ConfigError(
                f"max_removed_fraction={self.max_removed_fraction}: use a fraction in [0, 1]"
            )
        if self.long_documents not in LONG_DOCUMENT_POLICIES:
            raise ConfigError(
                f"long_documents={self.long_documents!r}: use one of {LONG_DOCUMENT_POLICIES}"
            )
        if self.chunk_chars < 1000:
            raise ConfigError(f"chunk_chars={self.chunk_chars}: use at least 1000")
        bad = {
            k: type(v).__name__
            for k, v in self.profiles.items()
            if not isinstance(v, SourceProfile)
        }
        if bad:
            raise ConfigError(f"profiles {bad}: each value must be a SourceProfile")
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
    def for_code_sources(cls, code_sources: tuple[str, ...], **kwargs: Any) -> FilterConfig:
        """Default components, all treating ``code_sources`` as code."""
        return cls(
            normalize=NormalizeConfig(code_sources=code_sources),
            langid=LangIdConfig(code_sources=code_sources),
            heuristics=HeuristicConfig(code_sources=code_sources),
            code_sources=code_sources,
            **kwargs,
        )

    def as_dict(self) -> dict:
        return asdict(self)

    def for_source(self, source: str) -> FilterConfig:
        """This config with ``source``'s profile applied (no profile: itself)."""
        profile = self.profiles.get(source)
        if profile is None:
            return long_documents_pass(replace(self, profiles={}))
        return apply_profile(self, profile)


def apply_profile(config: FilterConfig, p: SourceProfile) -> FilterConfig:
    """The base config with ``p``'s overrides (inherit ``None``; switch families off)."""
    langid, heuristics = config.langid, config.heuristics
    if p.languages is not None:
        any_language = ANY_LANGUAGE in p.languages
        langid = replace(langid, languages=None if any_language else tuple(p.languages))
    if p.min_language_score is not None:
        langid = replace(langid, min_score=p.min_language_score)
    if p.min_chars is not None:
        heuristics = replace(heuristics, min_chars=p.min_chars)
    if p.max_chars is not None:
        heuristics = replace(heuristics, max_chars=p.max_chars)
    changes: dict[str, Any] = {"langid": langid, "heuristics": heuristics, "profiles": {}}
    for family in FAMILIES:
        if not getattr(p, family):
            changes[family] = None
    if p.c4 and config.c4 is not None and p.c4_min_sentences is not None:
        changes["c4"] = replace(config.c4, min_sentences=p.c4_min_sentences)
    if p.gopher_quality and config.gopher_quality is not None:
        gopher: dict[str, Any] = {
            "min_doc_words": p.gopher_min_doc_words,
            "min_alpha_words_ratio": p.gopher_min_alpha_words_ratio,
        }
        changes["gopher_quality"] = replace(
            config.gopher_quality, **{k: v for k, v in gopher.items() if v is not None}
        )
    if not p.unwrap:
        changes["unwrap"] = None
    if not p.use_quality_model:
        changes.update(quality_model_uri=None, min_quality_score=None, keep_top_fraction=None)
    for name in ("long_documents", "chunk_chars", "max_removed_fraction"):
        if getattr(p, name) is not None:
            changes[name] = getattr(p, name)
    return long_documents_pass(replace(config, **changes))


def long_documents_pass(config: FilterConfig) -> FilterConfig:
    """Kept or split long documents must not then fall to Gopher's word maximum."""
    if config.long_documents == "reject" or config.gopher_quality is None:
        return config
    unbounded = replace(config.gopher_quality, max_doc_words=2**62)
    return replace(config, gopher_quality=unbounded)
