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


@dataclass(frozen=True)
class DiscoveryProblem:
    path: str
    reason: str


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
        self._gitignores: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    def _excluded(self, path: Path, is_dir: bool, base: Path) -> bool:
        """Exclusion globs match the name, or the path below the folder given to audit."""
        assert self.exclude is not None  # name-only patterns are matched by the walk
        candidates = [path.name, path.relative_to(base).as_posix()]
        suffix = "/" if is_dir else ""
        return any(self.exclude.match_file(c + suffix) for c in candidates)

    def _gitignore(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._gitignores:
            import pathspec

            spec = None
            ignore_file = folder / ".gitignore"
            if os.path.isfile(ignore_file):
                try:
                    lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
                    spec = pathspec.GitIgnoreSpec.from_lines(self._valid_lines(ignore_file, lines))
                except OSError as exc:
                    self.problems.append(DiscoveryProblem(str(ignore_file), exc.strerror or ""))
            self._gitignores[folder] = spec
        return self._gitignores[folder]

    def _valid_lines(self, ignore_file: Path, lines: Sequence[str]) -> list[str]:
        """The lines of a ``.gitignore`` that compile; each other one is reported."""
        import pathspec

        valid = []
        for number, line in enumerate(lines, 1):
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except (ValueError, re.error) as exc:
                reason = f"line {number}: invalid pattern {line!r} skipped ({exc})"
                self.problems.append(DiscoveryProblem(str(ignore_file), reason))
                continue
            valid.append(line)
        return valid

    def _git_ignored(self, path: Path, is_dir: bool, ignore_chain: Sequence[Path]) -> bool:
        suffix = "/" if is_dir else ""
        for folder in ignore_chain:
            spec = self._gitignore(folder)
            if spec is not None and spec.match_file(path.relative_to(folder).as_posix() + suffix):
                return True
        return False

    def _ignore_chain(self, folder: Path) -> list[Path]:
        """The folders whose .gitignore applies inside ``folder``: up to the repository root."""
        chain = []
        for parent in [folder, *folder.parents]:
            chain.append(parent)
            if os.path.exists(parent / ".git"):
                break
        else:
            chain = [folder]
        return list(reversed(chain))

    def files(self, paths: Sequence[Path]) -> Iterator[Path]:
        for given in paths:
            if os.path.islink(given) and os.path.isdir(given):
                self.problems.append(DiscoveryProblem(str(given), "is a symlink; not followed"))
                continue
            try:
                mode = given.stat().st_mode
            except FileNotFoundError:
                self.problems.append(DiscoveryProblem(str(given), "no such file or directory"))
                continue
            except OSError as exc:
                self.problems.append(DiscoveryProblem(str(given), exc.strerror or "unreadable"))
                continue
            if stat.S_ISREG(mode):
                yield given
            elif stat.S_ISDIR(mode):
                yield from self._walk(given, given, self._ignore_chain(given.resolve()))
            else:
                self.problems.append(DiscoveryProblem(str(given), NOT_REGULAR))

    def _walk(
        self, folder: Path, base: Path, chain: list[Path], resolved: Path | None = None
    ) -> Iterator[Path]:
        """Files below ``folder``; ``resolved`` is its real path (no link is followed
        below the given folder, so a child's real path is this plus its name)."""
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            self.problems.append(DiscoveryProblem(str(folder), exc.strerror or "unreadable"))
            return
        resolved = resolved or folder.resolve()
        ignoring = self.config.respect_gitignore and any(self._gitignore(f) for f in chain)
        for entry in entries:
            name = entry.name
            try:
                if entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir and not name.endswith((".py", ".pyi")):
                continue
            if self.exclude is None:
                if name in self.excluded_names:
                    continue
            elif self._excluded(folder / name, is_dir, base):
                continue
            if ignoring and self._git_ignored(resolved / name, is_dir, chain):
                continue
            if is_dir:
                sub = resolved / name
                # os.path, not Path: an unreadable folder is reported by the walk, not raised here.
                sub_chain = [*chain, sub] if os.path.exists(sub / ".gitignore") else chain
                yield from self._walk(folder / name, base, sub_chain, sub)
            elif self._regular(entry):
                yield folder / name
            else:
                self.problems.append(DiscoveryProblem(str(folder / name), NOT_REGULAR))

    @staticmethod
    def _regular(entry: os.DirEntry[str]) -> bool:
        """A plain file (where the folder entry lacks its type, this stats, which can fail)."""
        try:
            return entry.is_file(follow_symlinks=False)
        except OSError:
            return False
