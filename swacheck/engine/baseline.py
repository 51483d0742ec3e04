"""A baseline: today's findings, recorded so that only new ones fail (gradual adoption).

A finding is recorded by its code, its file (relative to the baseline's folder) and the
content of the line it flags: the row's text with its whitespace normalised, and which
occurrence of that (file, code, text) it is, counted from the top of the file. So a
finding still matches when lines are added or removed around it or its line is
re-indented, and does not when its line is edited or a second copy of it appears.
Entries whose finding is gone (fixed, or its line changed) are *stale*; they are
reported, and ``--write-baseline`` drops them.

The file is JSON, sorted, one entry per finding, meant to be committed and reviewed.
Written by hand because no library records lint findings by content (ruff has no
baseline; mypy-baseline and basedpyright's are tied to their tools' output).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from swacheck.engine.fixer import write_atomic
from swacheck.engine.texts import FileTexts
from swacheck.finding import Finding

FORMAT = "swacheck-baseline"
VERSION = 1
_BLANKS = re.compile(r"\s+")


class BaselineError(Exception):
    """A baseline file that cannot be read or written (the message names it and why)."""


@dataclass(frozen=True, order=True)
class Entry:
    file: str
    code: str
    # The flagged line, whitespace normalised, and which occurrence of it this is.
    line: str
    occurrence: int

    def fingerprint(self) -> str:
        """A stable hash of the entry (GitLab's ``fingerprint``)."""
        key = "\0".join((self.file, self.code, self.line, str(self.occurrence)))
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _relative(path: str, base: Path) -> str:
    if path == "-":
        return path
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:  # another drive
        return Path(path).as_posix()


def entries(
    findings: Iterable[Finding], texts: FileTexts, base: Path
) -> list[tuple[Finding, Entry]]:
    """Each finding with its entry; files are named relative to ``base``."""
    seen: Counter[tuple[str, str, str]] = Counter()
    keyed = []
    for finding in sorted(findings, key=lambda f: f.sort_key):
        file = _relative(texts.absolute(finding.path), base)
        line = _BLANKS.sub(" ", texts.row(finding.path, finding.start.row)).strip()
        occurrence = seen[(file, finding.code, line)]
        seen[(file, finding.code, line)] += 1
        keyed.append((finding, Entry(file, finding.code, line, occurrence)))
    return keyed


@dataclass(frozen=True)
class Baseline:
    path: Path
    entries: frozenset[Entry]

    @property
    def base(self) -> Path:
        return self.path.resolve().parent

    @classmethod
    def load(cls, path: Path) -> Baseline:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BaselineError(f"{path}: no such file (write one with --write-baseline)") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BaselineError(f"{path}: cannot read: {exc}") from None
        except json.JSONDecodeError as exc:
            raise BaselineError(f"{path}: not JSON: {exc}") from None
        if not isinstance(document, dict) or document.get(FORMAT) != VERSION:
            raise BaselineError(f"{path}: not a swacheck baseline (no {FORMAT!r}: {VERSION})")
        try:
            found = frozenset(
                Entry(str(e["file"]), str(e["code"]), str(e["line"]), int(e["occurrence"]))
                for e in document["findings"]
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BaselineError(f"{path}: malformed entry ({exc!r})") from None
        return cls(path, found)

    def split(
        self, findings: Sequence[Finding], texts: FileTexts
    ) -> tuple[list[Finding], list[Finding]]:
        """(new findings, findings the baseline records)."""
        new, known = [], []
        for finding, entry in entries(findings, texts, self.base):
            (known if entry in self.entries else new).append(finding)
        return new, known

    def stale(
        self,
        findings: Sequence[Finding],
        texts: FileTexts,
        audited: Iterable[str],
        codes: Iterable[str],
    ) -> list[Entry]:
        """Entries for the ``audited`` files (shown paths) and enabled ``codes`` that no
        finding matches: what was fixed, or whose line changed."""
        files = {_relative(texts.absolute(shown), self.base) for shown in audited}
        enabled = set(codes)
        matched = {entry for _, entry in entries(findings, texts, self.base)}
        return sorted(
            e for e in self.entries if e.file in files and e.code in enabled and e not in matched
        )


def write_baseline(
    path: Path,
    findings: Sequence[Finding],
    texts: FileTexts,
    audited: Iterable[str],
    codes: Iterable[str],
) -> int:
    """Record ``findings`` in ``path``; entries of an existing baseline for files that
    were not audited or codes that were not enabled are kept (so a partial run, as
    pre-commit's, does not drop them). Returns the number of entries written."""
    previous = frozenset[Entry]()
    if path.exists():
        previous = Baseline.load(path).entries
    base = path.resolve().parent
    files = {_relative(texts.absolute(shown), base) for shown in audited}
    enabled = set(codes)
    kept = {e for e in previous if e.file not in files or e.code not in enabled}
    current = {entry for _, entry in entries(findings, texts, base)}
    recorded = sorted(kept | current)
    document = {
        FORMAT: VERSION,
        "findings": [
            {"file": e.file, "code": e.code, "line": e.line, "occurrence": e.occurrence}
            for e in recorded
        ],
    }
    data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        if path.exists():
            write_atomic(path, data)
        else:  # a new file appears whole or not at all
            fresh = path.with_name(f".{path.name}.swacheck-new")
            fresh.write_bytes(data)
            os.replace(fresh, path)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return len(recorded)
