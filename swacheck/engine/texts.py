"""The text of each reported file after an audit, by the path findings show.

Snippets (``--output-format full``) and content fingerprints (the baseline, GitLab's
``fingerprint``) need the lines findings point at. They are read once the audit is over,
so a file ``--fix`` rewrote is read as written; a document (stdin, an editor's buffer)
is given as bytes. Rows are counted as libcst counts them (``engine.fixer.rows``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from swacheck.engine.decoding import decode_lossy
from swacheck.engine.fixer import rows

STDIN = "-"


class FileTexts:
    """Rows of the reported files: ``files`` maps a shown path to its path on disk,
    ``documents`` a shown path to its bytes (read from nowhere else)."""

    def __init__(
        self, files: Mapping[str, Path] | None = None, documents: Mapping[str, bytes] | None = None
    ) -> None:
        self._files = dict(files or {})
        self._documents = dict(documents or {})
        self._rows: dict[str, list[str]] = {}

    def rows(self, shown: str) -> list[str]:
        """The file's rows without their line ends; empty when it cannot be read."""
        if shown not in self._rows:
            data = self._documents.get(shown)
            if data is None:
                try:
                    data = Path(self._files.get(shown, shown)).read_bytes()
                except (OSError, ValueError):
                    data = b""
            self._rows[shown] = [row.rstrip("\r\n") for row in rows(decode_lossy(data))]
        return self._rows[shown]

    def row(self, shown: str, number: int) -> str:
        """Row ``number`` (1-based) of the file, or ``""`` past its end."""
        found = self.rows(shown)
        return found[number - 1] if 0 < number <= len(found) else ""

    def absolute(self, shown: str) -> str:
        """The file's absolute path, as ruff's JSON gives it (stdin stays ``-``)."""
        if shown == STDIN:
            return shown
        return os.path.abspath(self._files.get(shown, shown))


NO_TEXTS = FileTexts()
