"""Which rules run where: ``select``/``ignore`` prefixes and ``per-file-ignores`` globs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Generic, Protocol, TypeVar

from swacheck.config import Config, ConfigError
from swacheck.engine.codes import ENGINE_CODES


class _Coded(Protocol):
    code: str


R = TypeVar("R", bound=_Coded)


def _matches(code: str, selector: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def _check_selectors(selectors: Iterable[str], codes: Sequence[str], what: str) -> None:
    for selector in (s.upper() for s in selectors):
        if selector != "ALL" and not any(_matches(c, selector) for c in codes):
            raise ConfigError(
                f"{what}: unknown rule code or prefix {selector!r} "
                f"(known: {', '.join(codes)}; see `swacheck rules`)"
            )


@dataclass(frozen=True)
class Selection(Generic[R]):
    """What an audit reports: rules, and the engine's own codes (``engine/codes.py``)."""

    rules: list[R]
    engine_codes: frozenset[str]


def select(
    rules: Sequence[R],
    config: Config,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    extend_select: Sequence[str] | None = None,
    overridden: Set[str] = frozenset(),
) -> Selection[R]:
    """The codes enabled by configuration and the command line, as ruff resolves them.

    ``--select`` replaces the configured ``select``; ``extend-select`` (configured, then
    given) adds to it; ``ignore`` (configured, then given) removes and wins over both.
    No ``select`` at all means every rule. Engine codes that are on by default
    (``SWA999``) stay on unless ignored; the others (``SWA100``) need a selector. An
    unknown code is a :class:`ConfigError` naming where it was given: a flag, a key
    ``overridden`` by ``--config KEY = VALUE``, or the configuration file's key.
    """
    codes = [r.code for r in rules] + [c.code for c in ENGINE_CODES]

    def configured(key: str) -> str:
        if key in overridden:
            return f"--config {key}"
        return f"{config.source}: {key}" if config.source is not None else key

    base = [s.upper() for s in (select if select is not None else config.select)]
    extra = [s.upper() for s in (*config.extend_select, *(extend_select or ()))]
    chosen_ignore = [s.upper() for s in (config.ignore or ())] + [s.upper() for s in ignore or ()]
    _check_selectors(base, codes, "--select" if select is not None else configured("select"))
    _check_selectors(config.extend_select, codes, configured("extend-select"))
    _check_selectors(extend_select or (), codes, "--extend-select")
    _check_selectors(config.ignore, codes, configured("ignore"))
    _check_selectors(ignore or (), codes, "--ignore")
    for glob, file_codes in config.per_file_ignores.items():
        where = f"{configured('per-file-ignores')}.{glob}"
        _check_selectors([c.upper() for c in file_codes], codes, where)
    for key in ("fixable", "extend_fixable", "unfixable"):
        selectors = [s.upper() for s in getattr(config, key)]
        _check_selectors(selectors, codes, configured(key.replace("_", "-")))
    chosen_select = base + extra if base else []
    explicit = base + extra

    def ignored(code: str) -> bool:
        return any(_matches(code, s) for s in chosen_ignore)

    enabled = [
        rule
        for rule in rules
        if (not chosen_select or any(_matches(rule.code, s) for s in chosen_select))
        and not ignored(rule.code)
    ]
    engine = frozenset(
        c.code
        for c in ENGINE_CODES
        if not ignored(c.code) and (c.default or any(_matches(c.code, s) for s in explicit))
    )
    return Selection(enabled, engine)


def is_fixable(code: str, config: Config) -> bool:
    """Whether ``code``'s findings keep their fix: ``fixable`` (none: every code) and
    ``extend-fixable`` offer it, ``unfixable`` takes it away and wins."""
    offered = [s.upper() for s in (*(config.fixable or ("ALL",)), *config.extend_fixable)]
    return any(_matches(code, s) for s in offered) and not any(
        _matches(code, s.upper()) for s in config.unfixable
    )


def with_fixable_flags(
    config: Config,
    codes: Sequence[str],
    fixable: Sequence[str] | None,
    extend_fixable: Sequence[str],
    unfixable: Sequence[str],
) -> Config:
    """``config`` with ``--fixable``/``--extend-fixable``/``--unfixable`` applied after its
    own keys, as ruff applies a later rule selection: ``--fixable`` starts over from its
    codes, ``--extend-fixable`` adds to what is left, ``--unfixable`` removes and wins.
    The result names its unfixable codes only."""
    if fixable is None and not extend_fixable and not unfixable:
        return config
    for flag, selectors in (
        ("--fixable", fixable or ()),
        ("--extend-fixable", extend_fixable),
        ("--unfixable", unfixable),
    ):
        _check_selectors(selectors, codes, flag)

    def chosen(selectors: Sequence[str]) -> set[str]:
        return {code for code in codes if any(_matches(code, s) for s in selectors)}

    if fixable is not None:
        offered = chosen(fixable)
    else:
        offered = {code for code in codes if is_fixable(code, config)}
    offered = (offered | chosen(extend_fixable)) - chosen(unfixable)
    taken = tuple(code for code in codes if code not in offered)
    return replace(config, fixable=(), extend_fixable=(), unfixable=taken)


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
