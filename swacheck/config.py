"""``[tool.swacheck]`` configuration: the names the rules look for, and rule selection.

Keys mirror ruff's where they mean the same thing. Anything unknown or of the
wrong type is a :class:`ConfigError` naming the key, so a typo never silently
turns a rule off.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any

from swacheck.files import read_regular
from swacheck.models.schema import model_problem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigError(Exception):
    """A configuration problem the user must fix (exit status 2)."""


# Names with the word ``swa`` (between ``_`` or the ends) that also hold a location
# word (``loc``/``locs``, ``slot``/``slots``, ``indices``, ``index``) as a ``_``-separated
# word: ``out_cache_loc_swa``, ``swa_indices``. Whole words, so ``_swa_block_offsets``
# (``block`` holds ``loc``) is not one. Names with ``mapping`` are tables, not locations.
DEFAULT_SWA_LOC_PATTERN = (
    r"^(?!.*mapping)(?=(?:.*_)?swa(?:_.*)?$)"
    r"(?=(?:.*_)?(?:locs?|slots?|indices|index)(?:_.*)?$).*$"
)

INTEGER_DTYPES = ("int32", "int64")
# The largest per-file bounds accepted (bytes, CPU seconds, MiB): beyond them a bound is
# no bound, and the operating system's interfaces overflow (``setitimer``, ``setrlimit``).
MAX_FILE_SIZE = 2**40
MAX_FILE_TIME = 86_400
MAX_FILE_MEMORY = 2**30
# The roles an SWA location plays (I3): the KV stores' scatter targets, and the page
# tables / window indices attention kernels read. ``swa-loc-dtype`` sets each role's
# dtype, or ``auto``: inferred from the project (``swacheck.semantics.conventions``).
SWA_ROLES = ("write", "page-table")
AUTO = "auto"
# How a pool caches translations, for the runtime sanitizer (``auto``: observed).
CACHE_MODELS = ("auto", "none", "memoising", "attribute")


@dataclass(frozen=True)
class Config:
    mapping_attributes: tuple[str, ...] = ("full_to_swa_index_mapping",)
    invalidate_methods: tuple[str, ...] = ("invalidate_loc_cache",)
    translate_methods: tuple[str, ...] = ("translate_loc_from_full_to_swa",)
    swa_loc_pattern: str = DEFAULT_SWA_LOC_PATTERN
    # ``auto``, one dtype for every role, or a table of roles (see ``swa_dtype_for``).
    swa_loc_dtype: str | Mapping[str, str] = AUTO
    # The runtime sanitizer's names (the linter ignores them): attributes a pool keeps
    # translations in, how pools cache (``cache-model``), the dtypes SWA locations may
    # have where they are consumed (empty: ``swa-loc-dtype``), whether a translation's
    # own dtype is checked, and the methods that recognise graph runners, their input
    # holders and the KV writes of a pool's SWA sub-pool.
    cache_attributes: tuple[str, ...] = ("cached_loc",)
    cache_model: str = "auto"
    # The shapes of ``swa-loc-dtype`` (``"auto"``, a dtype, a table by role
    # ``{ write = "int64", page-table = "int32" }``) or a list of dtypes every role may
    # have; empty: ``swa-loc-dtype`` (see ``swacheck.runtime.dtype_roles``).
    runtime_swa_loc_dtypes: Any = ()
    check_translate_dtype: bool = False
    replay_methods: tuple[str, ...] = ("replay", "execute")
    capture_methods: tuple[str, ...] = ("capture",)
    capture_run_methods: tuple[str, ...] = ("run_once",)
    populate_methods: tuple[str, ...] = ("populate_from_forward_batch", "fill_from")
    kv_write_methods: tuple[str, ...] = ("set_kv_buffer", "set_key_buffer", "set_key_buffer_fused")
    # A Triton launch ``kernel[grid](..., mapping, ...)`` counts as a possible mapping write.
    kernel_launch_writes: bool = True
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Which codes' fixes are offered, as ruff's ``lint.fixable``/``extend-fixable``/
    # ``unfixable`` (empty ``fixable``: every code); a code left out has no fix, anywhere.
    fixable: tuple[str, ...] = ()
    extend_fixable: tuple[str, ...] = ()
    unfixable: tuple[str, ...] = ()
    respect_gitignore: bool = True
    cache_dir: str = ".swacheck_cache"
    # Per-file bounds (0: none), so one generated or hostile file cannot stall or kill a
    # hook, a CI job or an editor: a candidate file's size in bytes, the CPU seconds each
    # pass over it may take, and the memory (MiB of address space) a worker process may
    # add while it handles it. A file beyond any is answered with SWA999.
    max_file_size: int = 1_000_000
    max_file_time: float = 20.0
    max_file_memory: int = 768
    # ``[tool.swacheck.model]``: entries added to the engine's model, of the shape of
    # ``swacheck/models/*.toml`` (``swacheck.models.schema``): the project's own sources,
    # translators, fills, sinks, mode tests and dtypes.
    model: Mapping[str, Any] = field(default_factory=dict)
    # ``--ignore-noqa``: suppression comments suppress nothing (a command-line flag only,
    # as in ruff: not a configuration key).
    ignore_noqa: bool = False
    # Where the configuration was read from (``None``: defaults only).
    source: Path | None = None

    def __post_init__(self) -> None:
        try:
            re.compile(self.swa_loc_pattern)
        except (re.error, RecursionError, OverflowError) as exc:  # too deep, a huge {n}
            reason = str(exc) or type(exc).__name__
            raise ConfigError(
                f"swa-loc-pattern: not a valid regular expression: {reason}"
            ) from None
        for key, globs in (("exclude", self.exclude), ("extend-exclude", self.extend_exclude)):
            for glob in globs:
                import pathspec

                try:
                    pathspec.GitIgnoreSpec.from_lines([glob])
                except (ValueError, re.error) as exc:
                    raise ConfigError(f"{key}: invalid glob {glob!r}: {exc}") from None
        for glob in self.per_file_ignores:
            try:
                PurePosixPath("x.py").match(glob)
            except (ValueError, re.error) as exc:
                raise ConfigError(f"per-file-ignores: invalid glob {glob!r}: {exc}") from None
        for key, limit, most in (
            ("max-file-size", self.max_file_size, MAX_FILE_SIZE),
            ("max-file-time", self.max_file_time, MAX_FILE_TIME),
            ("max-file-memory", self.max_file_memory, MAX_FILE_MEMORY),
        ):
            if not 0 <= limit <= most:  # NaN compares false, so it is refused too
                raise ConfigError(
                    f"{key}: expected 0 (no limit) or a positive number up to {most:,}, "
                    f"got {limit!r}"
                )
        _check_swa_loc_dtype(self.swa_loc_dtype)
        _check_dtype_spec("runtime-swa-loc-dtypes", self.runtime_swa_loc_dtypes)
        if self.cache_model not in CACHE_MODELS:
            raise ConfigError(
                f"cache-model: expected one of {', '.join(CACHE_MODELS)}, got {self.cache_model!r}"
            )

    def swa_dtype_for(self, role: str) -> str:
        """The dtype ``swa-loc-dtype`` sets for ``role`` (one of :data:`SWA_ROLES`):
        ``int32``, ``int64``, or ``auto`` (inferred from the project)."""
        if isinstance(self.swa_loc_dtype, str):
            return self.swa_loc_dtype
        return self.swa_loc_dtype.get(role, AUTO)

    @property
    def root(self) -> Path | None:
        """The folder paths in ``exclude`` and ``per-file-ignores`` are relative to."""
        return self.source.parent if self.source else None

    def fingerprint(self, scope: str = "findings") -> str:
        """A stable text of the keys a cached result depends on.

        ``"findings"``: every key but :data:`NOT_FINDINGS` (an audit's findings);
        ``"analysis"``: also without :data:`REPORTING` (a file's facts and the rules'
        declarations: what the analysis of a file yields, whichever rules report).
        A key missing from both lists (a new one) counts: forgetting one costs a cold
        cache, never a stale one. ``"discovery"``: only :data:`DISCOVERY` (which files a
        walk of the project finds).
        """
        left_out = NOT_FINDINGS if scope == "findings" else NOT_FINDINGS + REPORTING
        parts = []
        for f in fields(self):
            if f.name in left_out if scope != "discovery" else f.name not in DISCOVERY:
                continue
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                value = sorted(value.items())
            parts.append(f"{f.name}={value!r}")
        return ";".join(parts)


# What a role's dtype may be in ``runtime-swa-loc-dtypes``.
_DTYPE_VALUES = (AUTO, *INTEGER_DTYPES)


def _check_dtype_spec(key: str, value: Any) -> None:
    """A dtype contract: ``"auto"``, a dtype, a list of dtypes, or a table by role whose
    values are any of those (``{ write = "int64", page-table = "int32" }``)."""
    if isinstance(value, Mapping):
        for role, inner in value.items():
            if role not in SWA_ROLES:
                raise ConfigError(f"{key}: unknown role {role!r} (roles: {', '.join(SWA_ROLES)})")
            if isinstance(inner, Mapping):
                raise ConfigError(f"{key}.{role}: expected a dtype or a list of dtypes")
            _check_dtype_spec(f"{key}.{role}", inner)
        return
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, (tuple, list)):
        raise ConfigError(f"{key}: expected a dtype, a list or a table, got {value!r}")
    for name in names:
        allowed = _DTYPE_VALUES if isinstance(value, str) else INTEGER_DTYPES
        if name not in allowed:
            raise ConfigError(f"{key}: expected one of {', '.join(allowed)}, got {name!r}")


def _dtype_spec(value: Any) -> Any:
    """A dtype contract as the configuration keeps it (lists as tuples)."""
    if isinstance(value, Mapping):
        return {role: _dtype_spec(inner) for role, inner in value.items()}
    return tuple(value) if isinstance(value, list) else value


def _check_swa_loc_dtype(value: object) -> None:
    choices = f"{AUTO}, {', '.join(INTEGER_DTYPES)}"
    if isinstance(value, str):
        if value not in (AUTO, *INTEGER_DTYPES):
            raise ConfigError(f"swa-loc-dtype: expected one of {choices}, got {value!r}")
        return
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"swa-loc-dtype: expected {AUTO!r}, a dtype ({', '.join(INTEGER_DTYPES)}) or a "
            f'table of roles such as {{ write = "int64", page-table = "int32" }}, '
            f"got {type(value).__name__} {value!r}"
        )
    for role, dtype in value.items():
        if role not in SWA_ROLES:
            raise ConfigError(
                f"swa-loc-dtype: unknown role {role!r} (roles: {', '.join(SWA_ROLES)})"
            )
        if not isinstance(dtype, str) or dtype not in (AUTO, *INTEGER_DTYPES):
            raise ConfigError(f"swa-loc-dtype.{role}: expected one of {choices}, got {dtype!r}")


# Keys no finding depends on: where files are found (an audit's record lists its files),
# where the cache is, and the runtime sanitizer's names (the linter never reads them).
NOT_FINDINGS = (
    "source",
    "cache_dir",
    "exclude",
    "extend_exclude",
    "respect_gitignore",
    "cache_attributes",
    "cache_model",
    "runtime_swa_loc_dtypes",
    "check_translate_dtype",
    "replay_methods",
    "capture_methods",
    "capture_run_methods",
    "populate_methods",
)
# Keys a walk of the project depends on (the files found): part of NOT_FINDINGS, since an
# audit's record lists its files, but what a kept walk is valid for.
DISCOVERY = ("exclude", "extend_exclude", "respect_gitignore")
# Keys that decide which findings are reported, not what the analysis of a file yields
# (the engine keys what depends on them otherwise: rule codes, a path's ignored codes,
# a file's SWA999 for a bound).
REPORTING = (
    "select",
    "extend_select",
    "ignore",
    "per_file_ignores",
    "max_file_size",
    "max_file_time",
)


_DEFAULTS = Config()
# Fields that are no ``[tool.swacheck]`` key: where it was read from, command-line flags.
_NOT_KEYS = ("source", "ignore_noqa")
_KEYS = {f.name.replace("_", "-"): f for f in fields(Config) if f.name not in _NOT_KEYS}
_STRING_LIST_KEYS = {k for k, f in _KEYS.items() if isinstance(getattr(_DEFAULTS, f.name), tuple)}


def _string_list(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list):
        raise ConfigError(f"{key}: expected a list of strings, got {type(value).__name__}")
    for item in value:
        if not isinstance(item, str):
            raise ConfigError(f"{key}: expected a list of strings, found {item!r}")
    return tuple(value)


def settings(config: Config) -> dict[str, Any]:
    """The configuration's keys, spelled as in ``[tool.swacheck]``, and their values."""
    return {key: getattr(config, f.name) for key, f in _KEYS.items()}


def config_from_table(table: Mapping[str, Any], source: Path | None = None) -> Config:
    """Build a :class:`Config` from a ``[tool.swacheck]`` table, validating every key."""
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _KEYS:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"unknown configuration key {key!r} (known keys: {known})")
        name = _KEYS[key].name
        default = getattr(_DEFAULTS, name)
        if key == "runtime-swa-loc-dtypes":
            _check_dtype_spec(key, value)
            values[name] = _dtype_spec(value)
        elif key in _STRING_LIST_KEYS:
            values[name] = _string_list(key, value)
        elif key == "swa-loc-dtype":
            _check_swa_loc_dtype(value)
            values[name] = value if isinstance(value, str) else dict(value)
        elif key == "model":
            problem = model_problem(value)
            if problem is not None:
                raise ConfigError(f"model.{problem}".replace("model.:", "model:"))
            values[name] = value
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{key}: expected a table of glob = [codes]")
            values[name] = {str(g): _string_list(f"{key}.{g}", c) for g, c in value.items()}
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{key}: expected true or false, got {value!r}")
            values[name] = value
        elif isinstance(default, str):
            if not isinstance(value, str):
                raise ConfigError(f"{key}: expected a string, got {value!r}")
            values[name] = value
        elif isinstance(default, int | float):
            kind = int if isinstance(default, int) else (int, float)
            if isinstance(value, bool) or not isinstance(value, kind):
                what = "an integer" if kind is int else "a number"
                raise ConfigError(f"{key}: expected {what}, got {value!r}")
            values[name] = value
    return Config(source=source, **values)


# No configuration file is this large; a larger one is not read.
CONFIG_FILE_LIMIT = 16 * 2**20


def _table(path: Path) -> dict[str, Any]:
    """The raw ``[tool.swacheck]`` table of a pyproject.toml (or a bare swacheck.toml)."""
    try:
        # Non-blocking and regular files only: a FIFO named f.toml must not hang the run.
        raw = read_regular(path, CONFIG_FILE_LIMIT).data
        if raw is None:
            raise ConfigError(f"{path}: cannot read: larger than {CONFIG_FILE_LIMIT:,} bytes")
        data = _toml(raw.decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:  # TOMLDecodeError, UnicodeDecodeError, _toml's own
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: [tool] must be a table")
    table = tool.get("swacheck", {} if path.name == "pyproject.toml" else data)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.swacheck] must be a table")
    return table


def load_config_file(path: Path, overrides: Mapping[str, Any] | None = None) -> Config:
    """Read ``[tool.swacheck]`` from a pyproject.toml (or a bare swacheck.toml table);
    ``overrides`` (``--config KEY=VALUE``) replace its keys."""
    table = _table(path)
    try:
        return config_from_table({**table, **(overrides or {})}, source=path.resolve())
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _toml(text: str) -> dict[str, Any]:
    """``text`` parsed as TOML; ``ValueError`` for anything the parser refuses or dies on.

    tomllib raises more than ``TOMLDecodeError``: ``RecursionError`` for arrays or inline
    tables nested a few hundred deep, ``ValueError`` for an integer over 4,300 digits.
    """
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ValueError("arrays or inline tables nested too deeply") from None


def parse_override(text: str) -> dict[str, Any]:
    """A ``--config`` value that is a TOML ``KEY = VALUE`` pair, as a table (ruff's syntax)."""
    try:
        table = _toml(text)
    except ValueError as exc:
        raise ConfigError(
            f"--config {text!r}: not a configuration file, nor a TOML `KEY = VALUE` pair "
            f"overriding one option (e.g. --config \"select = ['SWA002']\"): {exc}"
        ) from None
    try:
        config_from_table(table)
    except ConfigError as exc:
        raise ConfigError(f"--config {text!r}: {exc}") from None
    return table


def find_config_file(start: Path) -> Path | None:
    """The nearest pyproject.toml with a ``[tool.swacheck]`` table, upward from ``start``.

    ``os.path`` tests, not ``Path``'s: those raise for a folder that cannot be searched,
    and an unreadable path is discovery's to report, not a crash here.
    """
    start = Path(os.path.realpath(start))  # not Path.resolve: it raises for a link loop
    for folder in [start, *start.parents] if os.path.isdir(start) else start.parents:
        candidate = folder / "pyproject.toml"
        if os.path.isfile(candidate):
            try:
                data = read_regular(candidate, CONFIG_FILE_LIMIT).data
            except OSError:
                continue
            if data is not None and b"[tool.swacheck" in data:
                return candidate
    return None


def resolve_config(
    explicit: Path | None, paths: Iterable[Path], overrides: Mapping[str, Any] | None = None
) -> Config:
    """The configuration of an audit: ``explicit`` (``--config FILE``) or the nearest
    ``[tool.swacheck]`` upward from the first path, with ``overrides`` on top."""
    if explicit is None:
        for path in paths:
            explicit = find_config_file(path)
            break
    if explicit is not None:
        return load_config_file(explicit, overrides)
    return config_from_table(dict(overrides or {}))
