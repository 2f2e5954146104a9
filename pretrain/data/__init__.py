"""Raw text in: harvesting the embedded corpus, reading JSONL/Parquet/WARC, the document schema."""
