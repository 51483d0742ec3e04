"""Apply fixes to a file's text and write it back atomically.

Edits of one pass never overlap (a later overlapping edit waits for the next run, as
in ruff); the file is written to a temporary sibling and renamed over the original,
so an interrupted write leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from swacheck.finding import Applicability, Edit, Finding, Fix, Position


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _offset(starts: list[int], position: Position) -> int:
    row = min(position.row, len(starts))
    return min(starts[row - 1] + position.column, starts[-1])


def fixable(findings: Iterable[Finding], unsafe: bool) -> list[Finding]:
    return [
        f
        for f in findings
        if f.fix is not None and (unsafe or f.fix.applicability is Applicability.SAFE)
    ]


def apply_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, list[Fix]]:
    """Return the fixed text and the fixes applied (those not overlapping an earlier one)."""
    starts = _offsets(text)
    chosen: list[tuple[int, int, Edit]] = []
    applied: list[Fix] = []
    for fix in sorted(fixes, key=lambda f: min(e.start for e in f.edits)):
        spans = [(_offset(starts, e.start), _offset(starts, e.end), e) for e in fix.edits]
        if any(
            (s < oe and os_ < e) or (s == e == os_ == oe)
            for s, e, _ in spans
            for os_, oe, _ in chosen
        ):
            continue
        chosen.extend(spans)
        applied.append(fix)
    out = text
    for start, end, edit in sorted(chosen, key=lambda span: (span[0], span[1]), reverse=True):
        out = out[:start] + edit.content + out[end:]
    return out, applied


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` via a temporary sibling and ``os.replace``, keeping its mode."""
    mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".swacheck", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
