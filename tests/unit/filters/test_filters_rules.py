"""Each rule block on small inline cases and on real text from ../shared/data (skips if absent)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from pretrain.data.encoding import binary_fraction, fix_mojibake
from pretrain.errors import ConfigError
from pretrain.filters.c4_fineweb import C4Filter, FineWebFilter, count_sentences
from pretrain.filters.funnel import aggregate, drop_rates_within, funnel_markdown
from pretrain.filters.gopher import GopherQuality, GopherQualityConfig, GopherRepetition
from pretrain.filters.langid import LangIdConfig, LanguageFilter
from pretrain.filters.urls import UrlConfig, UrlFilter
from pretrain.text import words
from tests.helpers.shared_data import SHARED_DATA

SHARED = SHARED_DATA
DOLMA = SHARED / "web" / "cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
ZH = SHARED / "web" / "zh" / "sophonplus_chinese_reviews_82k.jsonl.zst"
GOOD = (
    "The library opened a new reading room on the second floor last spring. It has tall windows "
    "that face the park, and the light is good for most of the day. Students come to study "
    "there before their exams, and older readers like the quiet corner with the newspapers. "
    "The staff added long tables, power outlets and a shelf of local history books. On weekends "
    "the room hosts a small chess club that meets after lunch. Everyone agrees that the change "
    "has made the building feel more welcoming than it was before."
)


def _doc(text: str, language: str = "en", **extra: object) -> dict:
    return {"text": text, "language": language, "source": "web", **extra}


def test_tokenizer_and_sentences() -> None:
    assert words("Don't stop-me now...") == ["Do", "n't", "stop", "-", "me", "now", "..."]
    assert words("我爱北京 ok", unsegmented=True) == ["我", "爱", "北", "京", "ok"]
    assert count_sentences("It rained. We stayed in! Did you?") == 3
    assert count_sentences('He said "stop." Then he left') == 2


def test_gopher_rules_inline() -> None:
    assert GopherRepetition().check(_doc(GOOD)) is None
    assert GopherQuality().check(_doc(GOOD)) is None
    assert GopherRepetition()(_doc("buy cheap phones now\n" * 20)) == "gopher_dup_line_frac"
    assert GopherQuality()(_doc("short text here")) == "gopher_short_doc"
    hashes = " ".join(f"#tag{i} and the words" for i in range(40))
    assert GopherQuality()(_doc(hashes)) == "gopher_too_many_hashes"
    no_stop = " ".join(["alpha", "beta", "gamma", "delta", "omega"] * 12)
    english_list = GopherQuality(GopherQualityConfig(default_stop_words_language="en"))
    assert english_list(_doc(no_stop)) == "gopher_few_stop_words"
    assert GopherQuality()(_doc(no_stop, language="xx")) is None  # no list for xx: rule skipped
    with pytest.raises(ConfigError, match="default_stop_words_language"):
        GopherQualityConfig(default_stop_words_language="fr")


def test_c4_removes_lines_and_fineweb_rules() -> None:
    doc = _doc("Home\nMenu\nThis site uses cookies to track you.\n" + GOOD)
    assert C4Filter().check(doc) is None
    assert doc["text"].startswith("The library") and "cookies" not in doc["text"]
    assert C4Filter()(_doc(GOOD + "\nfunction() { return 1; } is here.")) == "c4_curly_bracket"
    assert C4Filter()(_doc(GOOD + "\nLorem ipsum dolor sit amet.")) == "c4_lorem_ipsum"
    assert C4Filter()(_doc("One sentence only here.")) == "c4_too_few_sentences"
    assert FineWebFilter().check(_doc(GOOD)) is None
    menu = "\n".join(f"Item number {i}" for i in range(30)) + "\n" + GOOD
    assert FineWebFilter()(_doc(menu)) == "fineweb_line_punct_ratio"


def test_rules_on_real_common_crawl_text() -> None:
    if not DOLMA.exists():
        pytest.skip("needs ../shared/data")
    with gzip.open(DOLMA, "rt") as f:
        texts = [json.loads(line)["text"] for line in f][:300]
    rules = [GopherRepetition(), GopherQuality(), C4Filter(), FineWebFilter()]
    reasons: Counter[str] = Counter()
    for text in texts:
        doc = _doc(text)
        reasons[next((r for rule in rules if (r := rule(doc))), "kept")] += 1
    # Boilerplate-heavy CC pages: every family fires, and a minority survives all four.
    assert 10 <= reasons["kept"] <= 150
    families = {r.split("_")[0] for r in reasons if r != "kept"}
    assert {"gopher", "c4"} <= families
    fineweb_alone = Counter(FineWebFilter()(_doc(t)) for t in texts if t.strip())
    assert (
        fineweb_alone["fineweb_line_punct_ratio"] + fineweb_alone["fineweb_short_line_ratio"] > 10
    )


def test_unsegmented_chinese_is_judged_by_characters() -> None:
    if not ZH.exists():
        pytest.skip("needs ../shared/data")
    import zstandard

    with zstandard.open(ZH, "rt", encoding="utf-8") as f:
        reviews = [json.loads(next(f))["text"] for _ in range(400)]
    long_reviews = [t for t in reviews if len(t) >= 80][:40]
    assert long_reviews
    kept = sum(GopherQuality()(_doc(t, language="zh")) is None for t in long_reviews)
    # Character-based: 80+ character reviews are not "short", but a mostly-English rule set
    # with English stop words would have dropped every one of them.
    assert kept >= len(long_reviews) // 2
    english_rules = GopherQuality(GopherQualityConfig(default_stop_words_language="en"))
    assert all(english_rules(_doc(t, language="en")) for t in long_reviews)


def test_language_thresholds_per_language() -> None:
    doc = {"text": GOOD, "source": "web"}
    assert LanguageFilter(LangIdConfig(language_thresholds={"en": 0.999999}))(dict(doc)) == (
        "low_language_score"
    )
    assert LanguageFilter(LangIdConfig(language_thresholds={"fr": 0.999999}))(dict(doc)) is None
    with pytest.raises(ConfigError, match="language_thresholds"):
        LangIdConfig(language_thresholds={"en": 1.5})


def test_url_blocklist_patterns_and_dedup(tmp_path: Path) -> None:
    listed = tmp_path / "block.txt"
    listed.write_text("# comment\nbad.example\n/ads/\n")
    rule = UrlFilter(UrlConfig(blocklist=("spam.example",), blocklist_uri=str(listed)))
    assert rule({"url": "https://www.spam.example/page"}) == "url_blocklist"
    assert rule({"url": "http://sub.bad.example/"}) == "url_blocklist"
    assert rule({"url": "http://fine.example/ads/1"}) == "url_blocklist"
    assert rule({"url": "http://casino-bonus.example/"}) == "url_adult_spam"
    assert rule({"url": "https://a.example/x"}) is None
    assert rule({"url": "https://A.example/x/#top"}) == "duplicate_url"
    assert rule({"url": "lib/os.py"}) is None and rule({"url": "lib/os.py"}) is None


def test_encoding_repairs_and_binary() -> None:
    assert fix_mojibake("CafÃ© dÃ©jÃ\xa0 vu â€” GrÃ¶ÃŸe") == "Café déjà vu — Größe"
    assert fix_mojibake("Größe, déjà vu") == "Größe, déjà vu"  # correct text untouched
    assert binary_fraction("\x00\x01abc") == 0.4 and binary_fraction("plain") == 0.0


def test_funnel_markdown_and_drop_rate_bounds() -> None:
    from pretrain.filters.funnel import FilterStats

    a = FilterStats(documents_in=10, kept=6, dropped={"empty": 1, "c4_too_few_sentences": 3},
                    chars_in=100, chars_kept=70, dropped_chars={"empty": 0, "c4_too_few_sentences": 30},
                    reason_order=("empty", "c4_too_few_sentences"))  # fmt: skip
    both = aggregate([a, a])
    assert both.documents_in == 20 and both.dropped == {"c4_too_few_sentences": 6, "empty": 2}
    table = funnel_markdown(both)
    assert "| empty | 2 | 0 | 18 |" in table and "| c4_too_few_sentences | 6 | 60 | 12 |" in table
    assert drop_rates_within(a, 0.5).passed
    outcome = drop_rates_within(a, 0.2)
    assert not outcome.passed and "c4_too_few_sentences" in outcome.description
    with pytest.raises(Exception, match="accounting"):
        FilterStats(documents_in=3, kept=1, dropped={"empty": 1}, chars_in=0, chars_kept=0)
