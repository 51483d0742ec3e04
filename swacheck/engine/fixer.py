"""Apply fixes to a file's text and write it back atomically.

Edits of one pass never overlap (a later overlapping edit waits for the next run, as
in ruff); the file is written to a temporary sibling and renamed over the original,
so an interrupted write leaves either the old file or the new one, never half of one.
The replacement keeps the file's mode and owner, a symlink stays a link (its target is
rewritten), and a file without write permission is refused, not replaced. Hard links
are the one thing a rename cannot keep: the fixed file gets a new inode.

A fix is made from the bytes the audit read, and an audit takes a while: an editor may
save the file meanwhile. So the file must still hold exactly those bytes (compared
whole, not by time stamp or size) when the fix is written: checked as the write
begins, again just before the rename, and once more after it, on the replaced file
(still open): an edit written into it in between is put back, and
:class:`ChangedOnDisk` raised. What no check can see is an editor renaming its own new
file over the path within the microseconds between the last check and the rename.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from swacheck.finding import Applicability, Edit, Finding, Fix, Position

# Line ends as libcst counts rows. Not ``str.splitlines``, which also splits at a form
# feed, ``\x1c``-``\x1e``, ``\x85`` and ``\u2028``: rows after one would shift and an
# edit would land in the wrong place (still parsing, so nothing would catch it).
_LINE_END = re.compile(r"\r\n|\r|\n")


def rows(text: str) -> list[str]:
    """``text``'s rows as libcst and the positions count them, line ends kept."""
    starts = _offsets(text)
    return [text[a:b] for a, b in itertools.pairwise(starts)]


def _offsets(text: str) -> list[int]:
    """The offset of each row's first character, then the end of the text."""
    starts = [0, *(match.end() for match in _LINE_END.finditer(text))]
    if starts[-1] != len(text):
        starts.append(len(text))
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


def _read_only(path: Path, mode: int) -> bool:
    """No write bit, or no write access: what an editor would refuse to save over.

    The mode bits matter for root too, for whom ``os.access`` always says yes.
    """
    return not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every platform can open a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class ChangedOnDisk(OSError):
    """The file no longer holds the bytes the fix was made from: it was not written."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.EAGAIN, "changed on disk during the run", str(path))


def _contents(fd: int) -> bytes:
    """Everything in the open file ``fd``, read from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _same_file(fd: int, target: Path) -> bool:
    """Whether ``target`` still names the file open as ``fd`` (not one renamed over it)."""
    try:
        now, held = os.stat(target), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def write_atomic(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace the content of ``path`` (of its target, if a symlink) by ``data``.

    Written to a temporary sibling, flushed, then renamed over the file, keeping its
    mode and, where the user may set it, its owner. Raises ``PermissionError`` for a
    read-only file; any failure leaves the original untouched and no temporary behind.
    ``expected``: the bytes the fix was made from; if the file holds others (see the
    module docstring), :class:`ChangedOnDisk` is raised and the file is left as it is.
    """
    target = Path(os.path.realpath(path))
    original = os.open(target, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(original)
        if expected is not None and _contents(original) != expected:
            raise ChangedOnDisk(path)
        mode = stat.S_IMODE(info.st_mode)
        if _read_only(target, mode):
            raise PermissionError(errno.EACCES, "file is read-only", str(path))
        tmp_name = _write_sibling(target, data, info)
        try:
            if expected is not None and (
                not _same_file(original, target) or _contents(original) != expected
            ):
                raise ChangedOnDisk(path)
            os.replace(tmp_name, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise
        _fsync_folder(target.parent)
        if expected is not None:
            late = _contents(original)
            if late != expected:  # written into the replaced file just before the rename
                write_atomic(target, late)
                raise ChangedOnDisk(path)
    finally:
        os.close(original)


def _write_sibling(target: Path, data: bytes, info: os.stat_result) -> str:
    """A temporary sibling of ``target`` holding ``data``, with ``target``'s mode and
    (where the user may set it) owner."""
    import tempfile  # only a write needs it: not every audit's start-up

    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".swacheck", dir=target.parent
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if os.name == "posix" and (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
            # Before chmod, which chown may undo (set-id bits). Best effort: another
            # owner needs privileges; without them the file stays ours, as an editor leaves it.
            with contextlib.suppress(OSError):
                os.chown(tmp_name, info.st_uid, info.st_gid)
        os.chmod(tmp_name, stat.S_IMODE(info.st_mode))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    return tmp_name
