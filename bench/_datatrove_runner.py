"""Runs datatrove 0.10.1's filters inside ``.venv-bench-datatrove`` (see filter_vs_datatrove.py).

    .venv-bench-datatrove/bin/python bench/_datatrove_runner.py INPUT.jsonl MODEL.ftz REPEATS [pii]

Reads ``{"id", "text"}`` lines, chains LanguageFilter(en, 0.65) → GopherRepetitionFilter →
GopherQualityFilter → C4QualityFilter → FineWebQualityFilter through each block's ``run``
(datatrove's pipeline code path, without reader/writer IO) in this one process, and prints one
JSON object: seconds per pass and each document's (kept, reason) from the first pass. With
``pii``, datatrove's ``PIIFormatter`` (emails and public IPs) also runs on every document, as
our PII masking does (datatrove has no toxicity model to add).
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
    )
    from datatrove.pipeline.formatters import PIIFormatter
    from fasttext.FastText import _FastText

    input_path, model_path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pii = PIIFormatter() if sys.argv[4:] == ["pii"] else None
    rows = [json.loads(line) for line in open(input_path, encoding="utf-8")]
    language = LanguageFilter(languages=["en"], language_threshold=0.65)
    language.model._model = _FastText(model_path)  # the same LID-176 file as ours, no download
    blocks = [language, GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(),
              FineWebQualityFilter()]  # fmt: skip

    def one_pass() -> dict[str, str | None]:
        decisions: dict[str, str | None] = {}
        for row in rows:
            doc = Document(text=row["text"], id=row["id"], metadata={})
            reason = None
            for block in blocks:
                result = block.filter(doc)
                kept, why = (result, None) if isinstance(result, bool) else result
                if not kept:
                    reason = f"{block.name}:{why or 'dropped'}"
                    break
            decisions[row["id"]] = reason
            if pii is not None:
                doc.text = pii.format(doc.text)
        return decisions

    one_pass()  # warm-up: model load, spaCy pipeline construction
    times, decisions = [], {}
    for _ in range(repeats):
        start = time.perf_counter()
        result = one_pass()
        times.append(time.perf_counter() - start)
        decisions = decisions or result
    print(json.dumps({"seconds": times, "decisions": decisions}))


if __name__ == "__main__":
    main()
