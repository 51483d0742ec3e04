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

Nor may the write land anywhere but on the file the audit read. A file swapped for a
symlink to an identical copy elsewhere (another checkout) while the audit ran had that
copy rewritten. Now the file is opened in its folder's descriptor without following a
link (a path a walk found is never followed; a link named on the command line is
resolved first, the user's say), must be the very file read (same device and inode),
and the temporary sibling is created and renamed over it in that same folder
descriptor, the name checked to be that file once more just before the rename.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import secrets
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


def _read_only(name: str, folder: int | None, mode: int) -> bool:
    """No write bit, or no write access: what an editor would refuse to save over.

    The mode bits matter for root too, for whom ``os.access`` always says yes.
    """
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return True
    return not os.access(name, os.W_OK, dir_fd=folder)


class ChangedOnDisk(OSError):
    """The file no longer holds the bytes the fix was made from, or is no longer the file
    they were read from: it was not written."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.EAGAIN, "changed on disk during the run", str(path))


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# Where files can be opened, made, renamed and removed relative to a folder's descriptor
# (Linux, macOS, the BSDs); elsewhere by path, the final name checked with lstat.
_AT = {os.open, os.rename, os.unlink, os.stat} <= os.supports_dir_fd and _NOFOLLOW != 0

# A file's identity: the device and inode it was read from.
Identity = tuple[int, int]


def _contents(fd: int) -> bytes:
    """Everything in the open file ``fd``, read from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _same_file(fd: int, name: str, folder: int | None) -> bool:
    """Whether ``name`` still names the file open as ``fd`` (not one renamed over it, nor
    a link put in its place)."""
    try:
        now = os.stat(name, dir_fd=folder, follow_symlinks=False)
        held = os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def write_atomic(
    path: Path,
    data: bytes,
    expected: bytes | None = None,
    *,
    identity: Identity | None = None,
    follow: bool = True,
) -> None:
    """Replace the content of ``path`` by ``data``.

    Written to a temporary sibling, flushed, then renamed over the file, keeping its
    mode and, where the user may set it, its owner. Raises ``PermissionError`` for a
    read-only file; any failure leaves the original untouched and no temporary behind.
    ``expected``: the bytes the fix was made from; ``identity``: the device and inode of
    the file they were read from; ``follow``: whether a symlink at ``path`` is followed
    to its target (a path the user named) or makes the write fail (a path a walk found,
    where no link is followed). Where the file is not that file, holds other bytes or is
    a link not to be followed (see the module docstring), :class:`ChangedOnDisk` is
    raised and nothing is written.
    """
    target = os.path.realpath(path) if follow else os.path.abspath(path)
    parent, name = os.path.split(target)
    folder = os.open(parent, os.O_RDONLY | _CLOEXEC) if _AT else None
    at = name if _AT else target
    try:
        _replace_checked(path, at, folder, data, expected, identity)
    finally:
        if folder is not None:
            with contextlib.suppress(OSError):
                os.fsync(folder)  # the rename itself made durable (best effort)
            os.close(folder)


def _replace_checked(
    path: Path,
    name: str,
    folder: int | None,
    data: bytes,
    expected: bytes | None,
    identity: Identity | None,
) -> None:
    """:func:`write_atomic` on ``name`` in the open ``folder`` (``None``: a whole path)."""
    if folder is None and os.path.islink(name):
        raise ChangedOnDisk(path)
    flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
    try:
        original = os.open(name, flags, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO):  # a link, or a FIFO
            raise ChangedOnDisk(path) from None
        raise
    try:
        info = os.fstat(original)
        if not stat.S_ISREG(info.st_mode):
            raise ChangedOnDisk(path)
        if identity is not None and (info.st_dev, info.st_ino) != identity:
            raise ChangedOnDisk(path)  # another file at the path: a copy, a link's target
        if expected is not None and _contents(original) != expected:
            raise ChangedOnDisk(path)
        if _read_only(name, folder, stat.S_IMODE(info.st_mode)):
            raise PermissionError(errno.EACCES, "file is read-only", str(path))
        _replace(name, folder, data, info, original, expected, path)
        if expected is not None:
            late = _contents(original)
            if late != expected:  # written into the replaced file just before the rename
                _replace(name, folder, late, info, None, None, path)
                raise ChangedOnDisk(path)
    finally:
        os.close(original)


def _replace(
    name: str,
    folder: int | None,
    data: bytes,
    info: os.stat_result,
    original: int | None,
    expected: bytes | None,
    path: Path,
) -> None:
    """``data`` into a temporary sibling of ``name``, renamed over it; where ``expected``,
    only while ``name`` is still the file open as ``original`` and holds those bytes."""
    temporary = _write_sibling(name, folder, data, info)
    try:
        if (
            expected is not None
            and original is not None
            and (not _same_file(original, name, folder) or _contents(original) != expected)
        ):
            raise ChangedOnDisk(path)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise


def _write_sibling(name: str, folder: int | None, data: bytes, info: os.stat_result) -> str:
    """A temporary sibling of ``name`` (in ``folder``) holding ``data``, with its mode and
    (where the user may set it) owner: its name, in ``folder``. Named ``.NAME.XXXX.swacheck``,
    never ``*.py``, so no audit reads one a kill left behind."""
    head, base = os.path.split(name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(100):
        temporary = os.path.join(head, f".{base}.{secrets.token_hex(4)}.swacheck")
        try:
            fd = os.open(temporary, flags, 0o600, dir_fd=folder)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if os.name == "posix" and (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
                # Before chmod, which chown may undo (set-id bits). Best effort: another
                # owner needs privileges; without them the file stays ours, as an editor
                # leaves it.
                with contextlib.suppress(OSError):
                    os.fchown(handle.fileno(), info.st_uid, info.st_gid)
            os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise
    return temporary
