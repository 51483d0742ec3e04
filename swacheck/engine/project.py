"""The project an audit runs in: its root, and what the engine knows of each of its files.

Cross-file rules (activation, the class index, method summaries) need every file of the
project, but pre-commit and editors name only the files that changed. So an audit of a
few files runs in the context of their whole project: the root is the nearest folder
upward holding a ``pyproject.toml`` with ``[tool.swacheck]``, else the nearest version
control root (``.git``, ``.hg``).

Reading and hashing every file of a large project on each call would cost more than the
call may take, so the :class:`Inventory` keeps, per file, its stat signature (mtime,
size, inode, ctime: what ruff's cache keys on, plus what a rename changes) and what the
engine learnt from its bytes (digest, prefilter relevance, which rules' scope it opens).
A file whose signature is unchanged is not read again. Like git's index, an entry
recorded while its file was still "racy" (modified within :data:`RACY_NS` of the scan,
so a later edit in the same clock tick could leave the signature unchanged) is
re-read and re-hashed on the next scan.

The last walks of the project are kept too, each under the discovery settings it was
made with (``Config.fingerprint("discovery")``): which files a walk finds depends on
them, and the inventory's cache key does not (a file's state does not), so one walk
must never serve an audit under other exclusions.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple

from swacheck.config import find_config_file

VCS_MARKERS = (".git", ".hg")
# Files modified this close to a scan are checked by content on the next scan.
RACY_NS = 2_000_000_000
# Walks kept, one per discovery setting (a user switching between a few exclusions).
KEPT_LISTINGS = 4

# mtime_ns, size, inode, ctime_ns.
Signature = tuple[int, int, int, int]


def find_root(start: Path) -> Path | None:
    """The project root of ``start`` (a file or folder), or ``None`` outside any project."""
    config = find_config_file(start)
    if config is not None:
        return config.parent
    start = Path(os.path.realpath(start))  # not Path.resolve: it raises for a link loop
    for folder in [start, *start.parents] if os.path.isdir(start) else start.parents:
        if any(os.path.exists(folder / marker) for marker in VCS_MARKERS):
            return folder
    return None


def signature(path: str | Path) -> Signature | None:
    """``path``'s stat signature; ``None`` if it cannot be stat'ed."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FileState(NamedTuple):
    """What the engine learnt from one version of a file's bytes (all config-dependent)."""

    digest: str
    # The enabled rules whose triggers occur in it (the prefilter lets it through for
    # them; which of them apply is decided per audit, from every file's ``opens``).
    triggered: tuple[str, ...]
    # Codes of the rules whose scope (``RuleSpec.activation``) it opens.
    opens: tuple[str, ...]
    # It holds a noqa comment that may name an SWA code (read for SWA100).
    noqa: bool


# A signature, the state, and whether the signature can be trusted (False while the file
# was racy at the scan that recorded it: it is re-read next time). Plain tuples: the
# inventory of a 5,000-file project loads in 2 ms, where dataclasses take 9.
Entry = tuple[Signature, tuple[str, bool, tuple[str, ...], bool], bool]


class Listing(NamedTuple):
    """What a walk of the project found, and what it depended on: the folders it listed
    (by modification time: a file created, deleted or renamed in one changes it) and the
    ``.gitignore`` files it read. While none of them changes, a walk finds the same files."""

    folders: dict[str, int]
    ignore_files: dict[str, Signature | None]
    # The files' keys (paths relative to the root).
    files: tuple[str, ...]
    # The walk's problems, "path\0reason" (a .gitignore line skipped, an unreadable folder).
    problems: tuple[str, ...]

    def still_valid(self) -> bool:
        try:
            if any(os.stat(folder).st_mtime_ns != mtime for folder, mtime in self.folders.items()):
                return False
        except OSError:
            return False
        return all(signature(path) == sig for path, sig in self.ignore_files.items())


class Inventory:
    """Per file of a project (by its key), the entry of the last scan that saw it; and
    the last walks of the project, by the discovery settings each was made under (none
    for a setting until a walk was recorded that can be trusted)."""

    def __init__(self, stored: object = None) -> None:
        entries, listings = {}, {}
        if isinstance(stored, dict):
            entries = stored.get("files", {})
            listings = stored.get("listings", {})
        self.entries: dict[str, Entry] = entries
        self.listings: dict[str, Listing] = listings if isinstance(listings, dict) else {}
        self.changed = False

    def stored(self) -> dict[str, object]:
        """The form the cache keeps (plain containers: fast to load)."""
        return {"files": self.entries, "listings": self.listings}

    def listing(self, discovery: str) -> Listing | None:
        """The last walk made under the discovery settings ``discovery``, if kept."""
        found = self.listings.get(discovery)
        return found if isinstance(found, Listing) else None

    def record_listing(self, discovery: str, listing: Listing, scan_ns: int) -> None:
        """Keep ``listing`` (made under ``discovery``) unless a folder of it was racy
        (changed just before the scan); the oldest walks of other settings go first."""
        racy = any(mtime >= scan_ns - RACY_NS for mtime in listing.folders.values())
        before = list(self.listings.items())
        self.listings.pop(discovery, None)
        if not racy:
            self.listings[discovery] = listing
            while len(self.listings) > KEPT_LISTINGS:
                del self.listings[next(iter(self.listings))]
        self.changed = self.changed or list(self.listings.items()) != before

    def record(self, key: str, sig: Signature, state: FileState, scan_ns: int) -> None:
        trusted = max(sig[0], sig[3]) < scan_ns - RACY_NS
        entry: Entry = (sig, tuple(state), trusted)  # type: ignore[assignment]
        if self.entries.get(key) != entry:
            self.entries[key] = entry
            self.changed = True

    def forget(self, key: str) -> None:
        if self.entries.pop(key, None) is not None:
            self.changed = True

    def keep_only(self, keys: set[str]) -> None:
        """Forget files that are no longer part of the project."""
        gone = [key for key in self.entries if key not in keys]
        for key in gone:
            del self.entries[key]
        self.changed = self.changed or bool(gone)
