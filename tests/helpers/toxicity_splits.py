"""How the labelled toxicity data of ``../shared/data`` is split and which news counts as a
hard negative: one definition for the shipped model's training script, its benchmark and
``tests/unit/filters/test_toxicity_real_data.py`` (a held-out row there is held out everywhere).

    split_of("stormfront:12:340")          # "heldout", "dev" or "train"
    stormfront_blocks_of(rows)             # (block key, split, posts): the 30-post split units
    hatecheck_splits(rows)                 # one split per HateCheck case, by its root template
    len(VIOLENT.findall(story)) >= 2       # a news story about violence
"""

from __future__ import annotations

import hashlib
import re

VIOLENT = re.compile(
    r"\b(?:kill(?:ed|ing|s)?|murder\w*|shot|shooting|bomb\w*|attack\w*|police|dead|wounded|"
    r"rebels?|gunmen|explosion|terroris\w*|guerrillas?|army|troops)\b",
    re.IGNORECASE,
)
POLITICAL = re.compile(
    r"\b(?:president|minister|parliament|congress\w*|senat\w*|election\w*|government|party|"
    r"opposition|vote[ds]?|democrat\w*|republican\w*|communist\w*|regime|protest\w*)\b",
    re.IGNORECASE,
)
NEWS_OUTLETS = re.compile(
    r"https?://(?:[\w-]+\.)*(?:wsj\.com|bbc\.com|bbc\.co\.uk|cnn\.com|guardian\.co\.uk|"
    r"nytimes\.com|cbsnews\.com|nbcnews\.com|washingtonpost\.com|abs-cbnnews\.com|ibnlive\.in\.com|"
    r"msnbc\.msn\.com|theatlantic\.com|breitbart\.com|cfr\.org|danwei\.com|nj\.com|poynter\.org|"
    r"whitehouse\.gov|gawker\.com|247wallst\.com|news\.cnet\.com|wired\.com|techcrunch\.com|"
    r"infoworld\.com|engadget\.com|universetoday\.com|arstechnica\.com|bigthink\.com)/"
)


def split_of(key: str) -> str:
    """``heldout`` for a stable fifth of the keys, ``dev`` for 15%, ``train`` for the rest."""
    bucket = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % 20
    return "heldout" if bucket < 4 else "dev" if bucket < 7 else "train"


BLOCK_POSTS = 30  # Stormfront posts per split unit (the bench's longest thread)


def stormfront_posts_of(rows: list[dict]) -> dict[str, list[tuple[str, list[dict]]]]:
    """Stormfront's sentence rows as subforum -> [(post id, its sentences in order)], posts
    (and subforums) in id order."""
    posts: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        posts.setdefault((row["subforum_id"], row["post_id"]), []).append(row)
    by_subforum: dict[str, list[tuple[str, list[dict]]]] = {}
    for (subforum, post_id), sentences in sorted(posts.items()):
        sentences.sort(key=lambda r: r["sentence_no"])
        by_subforum.setdefault(subforum, []).append((post_id, sentences))
    return by_subforum


def stormfront_blocks_of(rows: list[dict]) -> list[tuple[str, str, list[tuple[str, list[dict]]]]]:
    """(block key, split, posts) for every block of ``BLOCK_POSTS`` consecutive posts of a
    subforum: the unit Stormfront is split by (``stormfront:<subforum>:<first post>``)."""
    blocks = []
    for subforum, posts in stormfront_posts_of(rows).items():
        for start in range(0, len(posts), BLOCK_POSTS):
            chunk = posts[start : start + BLOCK_POSTS]
            key = f"stormfront:{subforum}:{chunk[0][0]}"
            blocks.append((key, split_of(key), chunk))
    return blocks


def hatecheck_splits(rows: list[dict]) -> list[str]:
    """The split of each HateCheck case, by its *root* template (``ref_templ_id`` followed
    back: a spelling variant, negation or counter-quote goes with its template)."""
    parent = {r["templ_id"]: r["ref_templ_id"] for r in rows}

    def root(templ: int) -> int:
        seen = set()
        while parent.get(templ) is not None and templ not in seen:
            seen.add(templ)
            templ = parent[templ]
        return templ

    return [split_of(f"hatecheck:template:{root(r['templ_id'])}") for r in rows]
