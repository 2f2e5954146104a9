"""What a proxy is judged on: the basis's held-out documents per source, and the user's targets.

A **yardstick** is a set of documents a proxy's bits per byte is measured on. The experiment
basis holds one per source (its held-out validation documents) and one per **target set**: files
of text the user cares about (JSONL with a ``text`` field, Parquet with a ``text`` column, or
text files; local or ``s3://``), named, and optionally tied to a source (``kind``): a new shard
group of that source is judged on it. A target of a kind can also serve as the **reference**,
the clean data of that kind an admission values a group against (``reference_share``: the
share of its documents, by a hash of the text, that join the basis's reserve of its kind
instead of the yardstick; 1.0 gives all of it, and it is then no yardstick). By default a kind
the corpus holds no reserve of takes half its target, any other none::

    target = TargetSet(name="clean_news", uris=("s3://b/eval/reuters.jsonl.gz",), kind="news")
    more = TargetSet(name="more_news", uris=("s3://b/news/held.jsonl",), kind="news",
                     reference_share=1.0)       # all of it tops up the news reserve
    BasisConfig(targets=(target, more))         # experiment_basis packs and describes them
    stats = describe(texts)                     # documents, characters, language shares
    yardstick_warnings("news validation", stats, language="en", min_docs=300)

A yardstick is only as good as its documents: a 21-page web sample of which 11 pages are not
English cannot say whether an English group helps English web text. :func:`yardstick_warnings`
says so (too few documents, or the group's language under half of it), and every decision and
search that judges on it carries the warning.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pretrain.errors import ConfigError, DataError
from pretrain.settings import check_types

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_]{0,63}$")
TARGET_PREFIX = "target:"


@dataclass(frozen=True, kw_only=True)
class TargetSet:
    """A named set of documents to judge proxies on (see the module docstring)."""

    name: str
    uris: tuple[str, ...]  # files or folders: JSONL, Parquet or text, local or s3://
    kind: str | None = None  # the source it stands for: its groups are judged on it
    max_docs: int = 2000  # at most this many documents are read (the first, in file order)
    # share of its documents that join the reserve of its kind (the reference arms' clean
    # data) instead of the yardstick; None: half when the corpus holds no reserve of the kind
    reference_share: float | None = None

    def __post_init__(self) -> None:
        check_types(self)
        if not _NAME_RE.match(self.name):
            raise ConfigError(
                f"TargetSet.name={self.name!r}: use lower-case letters, digits and '_' "
                "(it names a yardstick: target:<name>)"
            )
        if not self.uris:
            raise ConfigError(f"target {self.name!r} has no uris: give its files or folders")
        if self.max_docs < 1:
            raise ConfigError(f"target {self.name!r}: max_docs={self.max_docs} must be >= 1")
        share = self.reference_share
        if share is not None and not 0.0 <= share <= 1.0:
            raise ConfigError(f"target {self.name!r}: reference_share={share}: use [0, 1]")
        if share and self.kind is None:
            raise ConfigError(
                f"target {self.name!r}: reference_share={share} needs a kind (the source whose "
                "reserve it tops up)"
            )

    def reserve_share(self, kind_has_reserve: bool) -> float:
        """The share of its documents that go to the reserve of its kind."""
        if self.kind is None:
            return 0.0
        if self.reference_share is not None:
            return self.reference_share
        return 0.0 if kind_has_reserve else 0.5

    @property
    def is_yardstick(self) -> bool:
        """False for a target that is all reference (``reference_share`` 1.0)."""
        return self.reference_share != 1.0


@dataclass(frozen=True, kw_only=True)
class YardstickStats:
    """How many documents a yardstick holds, how much text, and in which languages."""

    documents: int
    chars: int
    languages: dict[str, float]  # language -> share of the documents

    def as_metadata(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> YardstickStats:
        return cls(
            documents=int(data["documents"]),
            chars=int(data["chars"]),
            languages={str(k): float(v) for k, v in dict(data["languages"]).items()},
        )

    @property
    def main_language(self) -> str | None:
        return max(self.languages, key=self.languages.__getitem__) if self.languages else None


def describe(texts: Sequence[str], *, code: bool = False) -> YardstickStats:
    """Documents, characters and language shares (fastText LID-176 on each document; code
    counts as the language ``code``)."""
    if code:
        languages = ["code"] * len(texts)
    else:
        from pretrain.filters.langid import predict

        languages = [label for label, _ in predict(list(texts))] if texts else []
    counts = Counter(languages)
    return YardstickStats(
        documents=len(texts),
        chars=sum(len(t) for t in texts),
        languages={k: round(n / len(texts), 4) for k, n in counts.most_common()} if texts else {},
    )


def yardstick_warnings(
    name: str, stats: YardstickStats, *, language: str | None, min_docs: int
) -> list[str]:
    """Why ``name`` is too small or too mixed to judge a group in ``language`` by (none when
    it is fit)."""
    found = []
    if stats.documents < min_docs:
        found.append(
            f"yardstick {name} holds {stats.documents} documents (under {min_docs}): too few "
            "to judge by; give a target set of at least that many (BasisConfig.targets)"
        )
    if language is not None and stats.languages.get(language, 0.0) < 0.5:
        share = stats.languages.get(language, 0.0)
        found.append(
            f"yardstick {name} is {share:.0%} {language} (the group's language): too mixed to "
            f"judge an {language} group by; give a target set of {language} text"
        )
    return found


def read_target(target: TargetSet) -> Iterator[str]:
    """The texts of ``target``'s files, in order, at most ``max_docs`` (bad records are
    skipped: a yardstick is read, not ingested); a ``DataError`` when none is readable."""
    from pretrain.data.raw import list_source_files
    from pretrain.data.readers import is_reject, iter_records

    read = 0
    for uri in target.uris:
        for raw in list_source_files(uri, target.name):
            if raw.kind == "unsupported":
                continue
            for record in iter_records(raw):
                if is_reject(record) or not record["text"].strip():
                    continue
                yield record["text"]
                read += 1
                if read >= target.max_docs:
                    return
    if not read:
        raise DataError(f"target {target.name!r}: no document with text in {list(target.uris)}")


def target_key(name: str) -> str:
    """The key of a target's bits per byte in a proxy's result (``target:<name>``)."""
    return TARGET_PREFIX + name
