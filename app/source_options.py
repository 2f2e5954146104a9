"""Command-line options shared by ``pretrain demo`` and ``pretrain data``: where the raw text is,
and the two settings a new user reaches for first (reference text, languages)."""

from __future__ import annotations

import argparse
from typing import Any


def add_data_options(
    parser: argparse.ArgumentParser, source_default: str | None = "embedded"
) -> None:
    """``--source``, ``--source-name``, ``--add-source``, ``--shards``, ``--reference``, ..."""
    parser.add_argument(
        "--source",
        default=source_default,
        required=source_default is None,
        help="'embedded', a folder or s3:// prefix",
    )
    parser.add_argument(
        "--source-name", default="web", help="mixture source (and filter profile) for --source"
    )
    parser.add_argument(
        "--artifact-root", default=None, help="default: $PRETRAIN_ROOT or .pretrain/artifacts"
    )
    parser.add_argument(
        "--add-source",
        action="append",
        default=[],
        metavar="NAME=URI",
        help="another source (folder or s3:// prefix) with its mixture name; repeatable",
    )
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--max-files-per-source", type=int, default=None, help="cap per source")
    parser.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="URI",
        help="reference-quality text (JSONL/Parquet/text) for the quality classifier; "
        "repeatable. Without any, the classifier is skipped (heuristic quality_score); "
        "the same as --quality.reference_uris",
    )
    parser.add_argument(
        "--languages",
        default=None,
        help="keep only these, e.g. 'en,de' (the same as --filter.langid.languages)",
    )


def data_settings(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--reference`` and ``--languages`` as the stage settings they stand for."""
    settings: dict[str, dict[str, Any]] = {}
    if getattr(args, "reference", None):
        settings["quality"] = {"reference_uris": list(args.reference)}
    if getattr(args, "languages", None):
        languages = [x.strip() for x in args.languages.split(",") if x.strip()]
        settings["filter"] = {"langid": {"languages": languages}}
    return settings
