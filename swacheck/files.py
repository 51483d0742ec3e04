"""Reading a file someone else controls: only a regular file, without blocking, within a size.

A path found by discovery (or named in ``--config``) can be swapped for a FIFO before it
is opened, and ``open()`` on a FIFO blocks until a writer comes; a sparse file can claim
gigabytes. So the file is opened non-blocking and without following a final symlink
where the caller says so, its type and size are read from the descriptor that is then
read (no window between the check and the read), and nothing larger than the caller's
limit is read at all.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

NOT_REGULAR = "not a regular file (FIFO, socket or device)"


class NotRegularFile(OSError):
    """The path is not a regular file (a FIFO, a socket, a device or a folder)."""

    def __init__(self, path: str) -> None:
        super().__init__(0, NOT_REGULAR, path)


class FileRead(NamedTuple):
    # The bytes, or ``None`` when the file is larger than the limit (nothing was read).
    data: bytes | None
    # mtime_ns, size, inode, ctime_ns of the descriptor read (the project's signature).
    signature: tuple[int, int, int, int]


_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_FLAGS |= getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def read_regular(path: str | os.PathLike[str], limit: int = 0) -> FileRead:
    """``path``'s bytes if it is a regular file of at most ``limit`` bytes (0: any size).

    Raises :class:`NotRegularFile` for anything else that exists, ``OSError`` when it
    cannot be opened or read. A file larger than ``limit`` is not read: ``data`` is
    ``None`` and its size is in the signature.
    """
    fd = os.open(path, _FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(os.fsdecode(path))
        signature = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
        if limit and info.st_size > limit:
            return FileRead(None, signature)
        # What fstat announced plus one byte (to see growth), then on to the end, never
        # past the limit.
        chunks = []
        remaining = limit + 1 if limit else None
        want = info.st_size + 1
        while True:
            chunk = os.read(fd, want if remaining is None else min(want, remaining))
            if not chunk:
                return FileRead(b"".join(chunks), signature)
            chunks.append(chunk)
            if remaining is not None:
                remaining -= len(chunk)
                if remaining <= 0:
                    return FileRead(None, signature)
            want = 1 << 16
    finally:
        os.close(fd)
