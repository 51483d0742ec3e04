"""Content-hash result cache (``.swacheck_cache/`` by default, as ruff's ``.ruff_cache``).

Entries are keyed by the effective configuration, the swacheck version and source,
and (all but the catalogue) the enabled rule set; and by what each one is a function of:

- *catalogue*: every rule's declarations (:mod:`swacheck.catalogue`), so that the
  stages before parsing need not import the rules or libcst;
- *run*: the result of an audit of exactly these files (paths and bytes): a warm audit
  reads one entry;
- *facts*: one file's first-pass :class:`ModuleFacts` (or its SWA999 finding), with
  its digest, keyed by the file's bytes;
- *findings*: one file's second-pass findings, additionally keyed by the digest of the
  whole project index, since a rule may follow a helper into another file. A change to
  any file that changes its facts therefore re-checks every file; a change that leaves
  the facts alone (most edits inside a method body do not) re-checks only that file.

Entries are pickles written atomically, each behind an HMAC under a key kept outside
every audited tree (``$XDG_CACHE_HOME/swacheck/cache-key``, created on first use): the
cache folder lives inside the tree, and unpickling an entry someone planted there would
run their code. A corrupt, foreign or unsigned entry is a miss.

A *read-only* cache (``read_only=True``) reads what the command line wrote and writes
nothing, not even the key: a language server starts warm from it, and the entries of
buffer states that never reach the disk would only pile up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import os
import pickle
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swacheck import __version__
from swacheck.config import Config

_GITIGNORE = "# Automatically created by swacheck.\n*\n"


@functools.cache
def _code_digest() -> str:
    """A digest of swacheck's own source files (engine, analysis, rules): names, sizes
    and modification times, which is enough to tell edited code and cheap to read.

    A development install changes rules and fact types without a version bump; a
    cached entry from other code must be a miss, never an object of a stale shape.
    """
    import importlib.util

    digest = hashlib.sha256()
    for package in ("swacheck", "swacheck.rules"):
        spec = importlib.util.find_spec(package)  # located, not imported
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for path in sorted(Path(folder).rglob("*.py")):
                info = path.stat()
                digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


_MAC_SIZE = 32


def _key_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "swacheck" / "cache-key"


@functools.cache
def _secret() -> bytes | None:
    """This user's cache-signing key, created on first use; ``None`` if it cannot be."""
    path = _key_path()
    with contextlib.suppress(OSError):
        return path.read_bytes()[:_MAC_SIZE] or None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(_MAC_SIZE))
        return path.read_bytes()[:_MAC_SIZE]
    except OSError:
        return None


def _mac(payload: bytes) -> bytes:
    key = _secret()
    assert key is not None
    return hmac.new(key, payload, hashlib.sha256).digest()


class ResultCache:
    """Entries under ``folder`` for one configuration and, once :meth:`for_rules` names
    them, one rule set (the rule catalogue is read before rules are selected).

    ``read_only``: :meth:`put` writes nothing (see the module docstring)."""

    def __init__(
        self,
        folder: Path,
        config: Config,
        rule_codes: Sequence[str] = (),
        *,
        read_only: bool = False,
    ) -> None:
        self.folder = folder
        self.read_only = read_only
        self._config = config
        self._codes = tuple(sorted(rule_codes))
        salt = "\0".join([__version__, _code_digest(), config.fingerprint(), ",".join(self._codes)])
        self._salt = hashlib.sha256(salt.encode()).hexdigest()
        self._ready = False

    def for_rules(self, rule_codes: Sequence[str]) -> ResultCache:
        return ResultCache(self.folder, self._config, rule_codes, read_only=self.read_only)

    def _prepare(self) -> bool:
        if not self._ready:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                ignore = self.folder / ".gitignore"
                if not ignore.exists():
                    ignore.write_text(_GITIGNORE)
                self._ready = True
            except OSError:
                return False
        return True

    def key(self, kind: str, data: bytes, extra: str = "") -> str:
        digest = hashlib.sha256()
        # File names that are not UTF-8 reach here as surrogate escapes.
        extra_bytes = extra.encode("utf-8", "surrogateescape")
        for part in (self._salt.encode(), kind.encode(), extra_bytes, data):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        return digest.hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / key[2:]

    def get(self, key: str) -> Any | None:
        if self.read_only and not _key_path().is_file():
            return None  # no key: nothing was written that could be read
        if _secret() is None:
            return None
        try:
            with open(self._path(key), "rb") as handle:
                mac, payload = handle.read(_MAC_SIZE), handle.read()
            if not hmac.compare_digest(mac, _mac(payload)):
                return None  # not written by this user's swacheck: never unpickled
            return pickle.loads(payload)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return None

    def put(self, key: str, value: Any) -> None:
        if self.read_only or _secret() is None or not self._prepare():
            return
        target = self._path(key)
        try:
            target.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp")
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(fd, "wb") as handle:
                handle.write(_mac(payload) + payload)
            os.replace(tmp, target)
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)


def result_cache(
    config: Config, folder: Path | None = None, *, read_only: bool = False
) -> ResultCache:
    """The cache under ``folder`` or the configuration's ``cache-dir`` (a relative one
    is taken relative to the configuration's root)."""
    if folder is None:
        folder = Path(config.cache_dir)
        if not folder.is_absolute() and config.root is not None:
            folder = config.root / folder
    return ResultCache(folder, config, read_only=read_only)


def _canonical(value: Any) -> Any:
    """A hash-seed-independent form of ``value`` (sets sorted, dataclasses as tuples)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple((f.name, _canonical(getattr(value, f.name))) for f in dataclasses.fields(value)),
        )
    if isinstance(value, dict):
        return tuple(sorted((repr(_canonical(k)), _canonical(v)) for k, v in value.items()))
    if isinstance(value, set | frozenset):
        return tuple(sorted(repr(_canonical(v)) for v in value))
    if isinstance(value, list | tuple):
        return tuple(_canonical(v) for v in value)
    return repr(value)


def facts_digest(facts: Any) -> str:
    """A digest of one file's first-pass result, stable across processes and runs."""
    return hashlib.sha256(repr(_canonical(facts)).encode()).hexdigest()


def project_digest(file_digests: Mapping[str, str]) -> str:
    """A digest of the whole project index from its files' :func:`facts_digest`."""
    digest = hashlib.sha256()
    for path in sorted(file_digests):
        digest.update(f"{path}\0{file_digests[path]}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()
