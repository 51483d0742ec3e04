"""Which rules run where: ``select``/``ignore`` prefixes and ``per-file-ignores`` globs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath
from typing import Protocol, TypeVar

from swacheck.config import Config, ConfigError
from swacheck.finding import PARSE_ERROR_CODE


class _Coded(Protocol):
    code: str


R = TypeVar("R", bound=_Coded)


def _matches(code: str, selector: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def _check_selectors(selectors: Iterable[str], codes: Sequence[str], what: str) -> None:
    for selector in selectors:
        if selector != "ALL" and not any(_matches(c, selector) for c in codes):
            raise ConfigError(
                f"{what}: unknown rule code or prefix {selector!r} "
                f"(known: {', '.join(codes)}; see `swacheck rules`)"
            )


def select_rules(
    rules: Sequence[R],
    config: Config,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
) -> list[R]:
    """Rules enabled by configuration, with CLI ``--select``/``--ignore`` taking precedence."""
    codes = [r.code for r in rules] + [PARSE_ERROR_CODE]
    chosen_select = [s.upper() for s in (select if select is not None else config.select)]
    chosen_ignore = [s.upper() for s in (config.ignore or ())] + [s.upper() for s in ignore or ()]
    _check_selectors(chosen_select, codes, "select")
    _check_selectors(chosen_ignore, codes, "ignore")
    for glob, file_codes in config.per_file_ignores.items():
        _check_selectors([c.upper() for c in file_codes], codes, f"per-file-ignores.{glob}")
    enabled = []
    for rule in rules:
        if chosen_select and not any(_matches(rule.code, s) for s in chosen_select):
            continue
        if any(_matches(rule.code, s) for s in chosen_ignore):
            continue
        enabled.append(rule)
    return enabled


def ignored_for_path(config: Config, relative: str) -> frozenset[str]:
    """Code prefixes ``per-file-ignores`` turns off for ``relative`` (a POSIX path)."""
    path = PurePosixPath(relative)
    ignored: set[str] = set()
    for glob, codes in config.per_file_ignores.items():
        if path.match(glob) or PurePosixPath(*path.parts[-1:]).match(glob):
            ignored.update(c.upper() for c in codes)
    return frozenset(ignored)


def is_ignored(code: str, prefixes: frozenset[str]) -> bool:
    return any(_matches(code, p) for p in prefixes)
