"""Which files an audit reads: Python files under the given paths.

Honours ``.gitignore`` files (via pathspec, git's own wildmatch semantics), the
``exclude``/``extend-exclude`` globs, and never follows a symlink: a linked file or
folder is skipped, so nothing outside the tree is read and link loops cannot hang.
Only regular files are read: a FIFO or device named ``*.py`` would block or never end.
Paths given explicitly on the command line are always audited; ``exclude`` globs
match a file's name or its path below the folder that was given. A ``.gitignore``
line git would reject is skipped and reported, as git itself skips it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from swacheck.config import Config

if TYPE_CHECKING:
    import pathspec

DEFAULT_EXCLUDES = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".swacheck_cache",
    ".tox",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "_build",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)


# An exclusion pattern that is just a name (no glob, slash or negation) matches an
# entry exactly when the entry has that name: the walk never enters an excluded
# folder, so no ancestor below the given folder can be the match. Such patterns (all
# the defaults) are a set lookup; pathspec is loaded only for the others.
_NAME_PATTERN = re.compile(r"(?=.*[\w-])[\w.-]+\Z")

NOT_REGULAR = "not a regular file (FIFO, socket or device); skipped"


def below(path: Path, base: Path) -> tuple[str, ...] | None:
    """``path``'s parts below the (resolved) folder ``base``, or ``None`` if outside it."""
    for candidate in (os.path.abspath(path), os.path.realpath(path)):
        try:
            return Path(candidate).relative_to(base).parts
        except ValueError:
            continue
    return None


@dataclass(frozen=True)
class DiscoveryProblem:
    path: str
    reason: str


@dataclass
class _Listing:
    """A folder being walked: its remaining entries and what applies below it."""

    entries: Iterator[os.DirEntry[str]]
    relative: str
    chain: list[str]
    resolved: str
    ignoring: bool


class Discovery:
    def __init__(self, config: Config) -> None:
        self.config = config
        patterns = list(config.exclude or DEFAULT_EXCLUDES) + list(config.extend_exclude)
        self.excluded_names: frozenset[str] = frozenset()
        self.exclude: pathspec.GitIgnoreSpec | None = None
        if all(_NAME_PATTERN.match(pattern) for pattern in patterns):
            self.excluded_names = frozenset(patterns)
        else:
            import pathspec

            self.exclude = pathspec.GitIgnoreSpec.from_lines(patterns)
        self.problems: list[DiscoveryProblem] = []
        self._gitignores: dict[str, pathspec.GitIgnoreSpec | None] = {}
        # Every folder a walk listed, with its modification time: a folder whose entries
        # change (a file created, deleted or renamed in it) gets a new one.
        self.listed: dict[str, int] = {}

    # Paths are strings below: a walk of thousands of files builds no Path objects.

    def _skipped(self, name: str, relative: str, is_dir: bool) -> bool:
        """Exclusion globs match the name, or the path below the folder given to audit."""
        if self.exclude is None:
            return name in self.excluded_names
        suffix = "/" if is_dir else ""
        return any(self.exclude.match_file(c + suffix) for c in (name, relative))

    def _gitignore(self, folder: str) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._gitignores:
            spec = None
            ignore_file = os.path.join(folder, ".gitignore")
            if os.path.isfile(ignore_file):
                import pathspec  # only where there is a .gitignore: its import costs 30 ms

                try:
                    with open(ignore_file, encoding="utf-8", errors="replace") as handle:
                        lines = handle.read().splitlines()
                    spec = pathspec.GitIgnoreSpec.from_lines(self._valid_lines(ignore_file, lines))
                except OSError as exc:
                    self.problems.append(DiscoveryProblem(ignore_file, exc.strerror or ""))
            self._gitignores[folder] = spec
        return self._gitignores[folder]

    def _valid_lines(self, ignore_file: str, lines: Sequence[str]) -> list[str]:
        """The lines of a ``.gitignore`` that compile; each other one is reported."""
        import pathspec

        valid = []
        for number, line in enumerate(lines, 1):
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except (ValueError, re.error) as exc:
                reason = f"line {number}: invalid pattern {line!r} skipped ({exc})"
                self.problems.append(DiscoveryProblem(ignore_file, reason))
                continue
            valid.append(line)
        return valid

    def _git_ignored(self, path: str, is_dir: bool, ignore_chain: Sequence[str]) -> bool:
        """Whether a ``.gitignore`` of ``ignore_chain`` (real folder paths) matches ``path``
        (a real path below them)."""
        suffix = "/" if is_dir else ""
        for folder in ignore_chain:
            spec = self._gitignore(folder)
            if spec is not None:
                below_folder = path[len(folder) :].lstrip(os.sep).replace(os.sep, "/")
                if spec.match_file(below_folder + suffix):
                    return True
        return False

    def _ignore_chain(self, folder: Path) -> list[str]:
        """The folders whose .gitignore applies inside ``folder``: up to the repository root."""
        chain = []
        for parent in [folder, *folder.parents]:
            chain.append(str(parent))
            if os.path.exists(parent / ".git"):
                break
        else:
            chain = [str(folder)]
        return list(reversed(chain))

    def excluded(self, path: Path, base: Path) -> bool:
        """Whether a walk of ``base`` would leave ``path`` out: an exclusion glob or a
        ``.gitignore`` matches it or a folder between ``base`` and it.

        For paths named on the command line: ``--force-exclude``, and whether a given
        path belongs to the project. A path outside ``base`` is matched by its name.
        """
        parts = below(path, base)
        if parts is None:
            parts = (path.name,)
            base = Path(os.path.abspath(path)).parent
        chain = self._ignore_chain(base)
        ignoring = self.config.respect_gitignore and any(self._gitignore(f) for f in chain)
        folder, relative = str(base), ""
        for depth, name in enumerate(parts):
            child = os.path.join(folder, name)
            relative = f"{relative}/{name}" if relative else name
            is_dir = depth < len(parts) - 1 or os.path.isdir(child)
            if self._skipped(name, relative, is_dir):
                return True
            if ignoring and self._git_ignored(child, is_dir, chain):
                return True
            folder = child
            if is_dir and os.path.exists(os.path.join(folder, ".gitignore")):
                chain = [*chain, folder]
                ignoring = self.config.respect_gitignore
        return False

    def files(self, paths: Sequence[Path]) -> Iterator[Path]:
        """Python files: those given, and those found below given folders."""
        for given in paths:
            for path, _ in self._given(given):
                yield Path(path)

    def walk(self, folder: Path) -> dict[str, str]:
        """The Python files below ``folder``: path relative to it (POSIX) -> path.

        Afterwards :attr:`listed` holds the folders it listed and :meth:`ignore_files`
        the ``.gitignore`` files it read: while none of them changes, neither does the
        result (the configuration aside)."""
        return {relative: path for path, relative in self._given(folder)}

    def ignore_files(self) -> list[str]:
        """The ``.gitignore`` files the walks so far consulted (existing or not)."""
        return [os.path.join(folder, ".gitignore") for folder in self._gitignores]

    def _given(self, given: Path) -> Iterator[tuple[str, str]]:
        if os.path.islink(given) and os.path.isdir(given):
            self.problems.append(DiscoveryProblem(str(given), "is a symlink; not followed"))
            return
        try:
            mode = given.stat().st_mode
        except FileNotFoundError:
            self.problems.append(DiscoveryProblem(str(given), "no such file or directory"))
            return
        except OSError as exc:
            self.problems.append(DiscoveryProblem(str(given), exc.strerror or "unreadable"))
            return
        if stat.S_ISREG(mode):
            yield str(given), given.name
        elif stat.S_ISDIR(mode):
            resolved = given.resolve()
            yield from self._walk(str(given), "", self._ignore_chain(resolved), str(resolved))
        else:
            self.problems.append(DiscoveryProblem(str(given), NOT_REGULAR))

    def _walk(
        self, folder: str, relative: str, chain: list[str], resolved: str
    ) -> Iterator[tuple[str, str]]:
        """``(path, path below the given folder)`` of the files below ``folder``, depth
        first in name order; ``resolved`` is its real path (no link is followed below the
        given folder, so a child's real path is this plus its name).

        A stack of listings, not recursion: a tree thousands of folders deep is walked
        like any other (a recursive walk died of ``RecursionError`` at ~1,000 levels).
        """
        stack = [self._listing(folder, relative, chain, resolved)]
        while stack:
            listing = stack[-1]
            entry = next(listing.entries, None)
            if entry is None:
                stack.pop()
                continue
            name = entry.name
            try:
                if entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir and not name.endswith((".py", ".pyi")):
                continue
            child = f"{listing.relative}/{name}" if listing.relative else name
            if self._skipped(name, child, is_dir):
                continue
            real = os.path.join(listing.resolved, name)
            if listing.ignoring and self._git_ignored(real, is_dir, listing.chain):
                continue
            if is_dir:
                # os.path, not Path: an unreadable folder is reported by the walk, not raised here.
                has_ignore = os.path.exists(os.path.join(real, ".gitignore"))
                sub_chain = [*listing.chain, real] if has_ignore else listing.chain
                stack.append(self._listing(entry.path, child, sub_chain, real))
            elif self._regular(entry):
                yield entry.path, child
            else:
                self.problems.append(DiscoveryProblem(entry.path, NOT_REGULAR))

    def _listing(self, folder: str, relative: str, chain: list[str], resolved: str) -> _Listing:
        """``folder``'s entries in name order (none if it cannot be listed: reported)."""
        try:
            self.listed[folder] = os.stat(folder).st_mtime_ns
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            self.problems.append(DiscoveryProblem(folder, exc.strerror or "unreadable"))
            return _Listing(iter(()), relative, chain, resolved, False)
        ignoring = self.config.respect_gitignore and any(self._gitignore(f) for f in chain)
        return _Listing(iter(entries), relative, chain, resolved, ignoring)

    @staticmethod
    def _regular(entry: os.DirEntry[str]) -> bool:
        """A plain file (where the folder entry lacks its type, this stats, which can fail)."""
        try:
            return entry.is_file(follow_symlinks=False)
        except OSError:
            return False
