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

import pathspec

from swacheck.config import Config

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


NOT_REGULAR = "not a regular file (FIFO, socket or device); skipped"


@dataclass(frozen=True)
class DiscoveryProblem:
    path: str
    reason: str


class Discovery:
    def __init__(self, config: Config) -> None:
        self.config = config
        patterns = list(config.exclude or DEFAULT_EXCLUDES) + list(config.extend_exclude)
        self.exclude = pathspec.GitIgnoreSpec.from_lines(patterns)
        self.problems: list[DiscoveryProblem] = []
        self._gitignores: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    def _excluded(self, path: Path, is_dir: bool, base: Path) -> bool:
        """Exclusion globs match the name, or the path below the folder given to audit."""
        candidates = [path.name, path.relative_to(base).as_posix()]
        suffix = "/" if is_dir else ""
        return any(self.exclude.match_file(c + suffix) for c in candidates)

    def _gitignore(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._gitignores:
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
        if not self.config.respect_gitignore:
            return False
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

    def _walk(self, folder: Path, base: Path, chain: list[Path]) -> Iterator[Path]:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            self.problems.append(DiscoveryProblem(str(folder), exc.strerror or "unreadable"))
            return
        resolved = folder.resolve()
        for entry in entries:
            path = folder / entry.name
            try:
                if entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if self._excluded(path, is_dir, base) or self._git_ignored(
                resolved / entry.name, is_dir, chain
            ):
                continue
            if is_dir:
                sub = resolved / entry.name
                # os.path, not Path: an unreadable folder is reported by the walk, not raised here.
                sub_chain = [*chain, sub] if os.path.exists(sub / ".gitignore") else chain
                yield from self._walk(path, base, sub_chain)
            elif not entry.name.endswith((".py", ".pyi")):
                continue
            elif self._regular(entry):
                yield path
            else:
                self.problems.append(DiscoveryProblem(str(path), NOT_REGULAR))

    @staticmethod
    def _regular(entry: os.DirEntry[str]) -> bool:
        """A plain file (where the folder entry lacks its type, this stats, which can fail)."""
        try:
            return entry.is_file(follow_symlinks=False)
        except OSError:
            return False
