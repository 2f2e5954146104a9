"""Log records a test reads back; tests import these, never each other."""

from __future__ import annotations

import logging


class ListHandler(logging.Handler):
    """Keeps every record it is handed, at every level (e.g. a sensor context's warnings)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
