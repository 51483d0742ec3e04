"""Content-hash result cache (``.swacheck_cache/`` by default, as ruff's ``.ruff_cache``).

Entries are keyed by swacheck's version and a digest of its analysing source (the
bytes, so a reinstall of the same code keeps them), and by what each kind of entry is a
function of (:data:`DEPENDS`: the configuration keys it reads, the enabled rule set):

- *catalogue*: every rule's declarations (:mod:`swacheck.catalogue`), so that the
  stages before parsing need not import the rules or libcst;
- *inventory*: what the engine knows of each file of a project (by its stat signature);
- *run*: the result of an audit of exactly these files (paths and bytes): a warm audit
  reads one entry;
- *facts*, *project-facts*: one file's first-pass :class:`ModuleFacts` (or its SWA999
  finding), keyed by the file's bytes and the analysis configuration only: a change of
  ``select``, ``exclude``, the output or any key the analysis does not read keeps them;
- *findings*: one file's second-pass findings, additionally keyed by the digest of the
  whole project index, since a rule may follow a helper into another file. A change to
  any file that changes its facts therefore re-checks every file; a change that leaves
  the facts alone (most edits inside a method body do not) re-checks only that file.

Entries are pickles written atomically, each behind an HMAC under a key kept outside
every audited tree (``$XDG_CACHE_HOME/swacheck/cache-key``, created on first use): the
cache folder lives inside the tree, and unpickling an entry someone planted there would
run their code. The MAC covers the entry's format version and its key with the content,
so an entry moved, swapped or replayed under another key is a miss, as is a corrupt,
foreign or unsigned one.

The folder may be committed to a repository or restored from a shared CI cache, so
nothing in it is trusted to point anywhere: no symlink inside it (nor the folder
itself, nor a folder between the project and it) is followed; entries are opened
relative to the folder's descriptor with ``O_NOFOLLOW``, and anything but a regular
file is a miss. A ``cache-dir`` that a project's configuration puts outside the project
is not used (the repository has no say over the user's other files): only
``--cache-dir`` or ``SWACHECK_CACHE_DIR`` may put it there. Wherever it comes from, the
cache is never put inside version control's own folder (``.git``: its entries' names
are loose objects' there), nor in a folder that holds Python sources or a
``pyproject.toml`` (the cache folder was a package: ``cache-dir = "pkg"``); a folder the
cache creates gets a ``CACHEDIR.TAG`` and a ``.gitignore`` of ``*``, and no other folder
ever gets a ``.gitignore`` (one in ``pkg`` hid its new modules from git and the audit).

Every front end (the command line, a pre-commit call, the language server) uses one
cache: where the configuration's ``cache-dir`` says, relative to the configuration's
folder, else to the project's root (:func:`cache_folder`), whatever the working
directory. The workspace writes only what describes files as they are on disk (an
editor's unsaved buffers leave nothing behind: ``engine/workspace.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import hmac
import os
import pickle
import secrets
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swacheck import __version__
from swacheck.config import Config
from swacheck.files import read_regular
from swacheck.places import is_position

_GITIGNORE = "# Automatically created by swacheck.\n*\n"
# The entries' layout: part of every signature, so an entry of another layout is a miss.
FORMAT = "swacheck-cache-3"
# What each kind of entry depends on beyond its key: which configuration keys (a scope
# of :meth:`Config.fingerprint`), and whether the enabled rule set.
DEPENDS: dict[str, tuple[str, bool]] = {
    "catalogue": ("analysis", False),
    "facts": ("analysis", False),
    "project-facts": ("analysis", False),
    "inventory": ("analysis", True),
    "findings": ("analysis", True),
    "activation": ("analysis", True),
    "run": ("findings", True),
}
# Presentation only (and the rules, digested as their own package, and the runtime
# sanitizer): a change there leaves every entry valid.
_NOT_ANALYSIS = ("report", "server", "rules", "runtime", "reference_impl")


@functools.cache
def _code_digest() -> str:
    """A digest of the code that analyses: swacheck's analysing source (engine, analysis,
    rules: the files' names below their package and their bytes, not where or when they
    were installed), the interpreter (its ``ast`` finds regions, syntax errors and their
    positions) and libcst's version (its parser makes the trees facts are read from).

    A development install changes rules and fact types without a version bump; a
    cached entry from other code must be a miss, never an object of a stale shape. A
    reinstall of the same code keeps every entry. One project's cache is shared by every
    environment that audits it (a pre-commit hook's, a developer's, an editor's), which
    may run another Python or libcst.
    """
    import importlib.util

    digest = hashlib.sha256()
    digest.update(f"{sys.implementation.cache_tag}:{sys.version_info[:3]}\0".encode())
    libcst = importlib.util.find_spec("libcst")  # located, not imported (a warm audit never is)
    for folder in (libcst.submodule_search_locations or []) if libcst else []:
        with contextlib.suppress(OSError):
            digest.update(Path(folder, "_version.py").read_bytes())
    for package in ("swacheck", "swacheck.rules"):
        spec = importlib.util.find_spec(package)  # located, not imported
        skipped = _NOT_ANALYSIS if package == "swacheck" else ()
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for relative, path in sorted(_sources(folder, "", skipped)):
                with open(path, "rb") as handle:
                    data = handle.read()
                digest.update(f"{package}:{relative}\0{len(data)}\0".encode())
                digest.update(data)
    return digest.hexdigest()


def _sources(folder: str, prefix: str, skipped: Sequence[str]) -> list[tuple[str, str]]:
    """The ``.py`` files below ``folder`` (relative name, path), but in ``skipped``."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name in skipped or entry.name == "__pycache__":
                continue
            if entry.is_dir(follow_symlinks=False):
                found += _sources(entry.path, f"{prefix}{entry.name}/", ())
            elif entry.name.endswith(".py"):
                found.append((prefix + entry.name, entry.path))
    return found


_MAC_SIZE = 32


def _key_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "swacheck" / "cache-key"


def _read_key(path: Path) -> bytes | None:
    """The key in ``path`` if it holds a whole one (a regular file, not blocking on a
    FIFO); ``None`` if it is missing, empty, short or cannot be read."""
    try:
        data = read_regular(path, 1 << 16).data
    except OSError:
        return None
    return data[:_MAC_SIZE] if data is not None and len(data) >= _MAC_SIZE else None


@functools.cache
def _secret() -> tuple[bytes | None, str]:
    """This user's cache-signing key and, if there is none, why the cache is off.

    Made on first use; a key file that is empty or short (a full disk, a truncation) or
    that cannot be read is replaced by a new one: before, a 0-byte key turned the cache
    off for good without a word. A new key is made whole beside the file and linked in
    (renamed over a bad one), so a concurrent first use reads either key, never half.
    """
    path = _key_path()
    key = _read_key(path)
    if key is not None:
        return key, ""
    temporary = path.with_name(f".cache-key.{secrets.token_hex(8)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        fd = os.open(temporary, flags, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(_MAC_SIZE))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)  # where there is none: the first to link wins
        except FileExistsError:
            if _read_key(path) is None:
                os.replace(temporary, path)
        key = _read_key(path)
        if key is not None:
            return key, ""
        reason = "it cannot be read back"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    return None, f"the cache is off: its signing key {path} cannot be made ({reason})"


def _mac(key: str, payload: bytes) -> bytes:
    """The entry ``key``'s signature of ``payload``: the format and the key are signed too."""
    secret, _ = _secret()
    assert secret is not None
    signed = hmac.new(secret, f"{FORMAT}\0{key}\0".encode(), hashlib.sha256)
    signed.update(payload)
    return signed.digest()


# -- the folder, never through a link ---------------------------------------------------

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
# Where a folder's descriptor can be opened from (Linux, macOS, the BSDs), everything
# is opened relative to its folder's; elsewhere paths are checked with lstat.
_AT = {os.open, os.mkdir, os.rename, os.unlink} <= os.supports_dir_fd and _NOFOLLOW != 0

# A folder: its descriptor, or its path where descriptors cannot be opened from.
_Dir = int | str


def _at(folder: _Dir, name: str) -> tuple[str, int | None]:
    """``name`` in ``folder`` as ``os`` functions take it: a path and a ``dir_fd``."""
    if isinstance(folder, int):
        return name, folder
    return os.path.join(folder, name), None


def _close(folder: _Dir | None) -> None:
    if isinstance(folder, int):
        os.close(folder)


class LinkRefused(OSError):
    """A folder of the cache is a symlink (or not a folder): it is not entered."""


def _enter(folder: _Dir, name: str, create: bool) -> _Dir:
    """The sub-folder ``name`` of ``folder`` (made if ``create``), never through a link."""
    return _made(folder, name, create)[0]


def _made(folder: _Dir, name: str, create: bool) -> tuple[_Dir, bool]:
    """:func:`_enter`, and whether this call made the folder."""
    path, dir_fd = _at(folder, name)
    made = False
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o777, dir_fd=dir_fd)
            made = True
    return _opened(path, dir_fd), made


def _opened(path: str, dir_fd: int | None) -> _Dir:
    if not _AT:
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            raise LinkRefused(errno.ELOOP, "is a symlink or not a folder")
        return path
    try:
        return os.open(path, _DIRECTORY | _NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise LinkRefused(errno.ELOOP, "is a symlink or not a folder") from None
        raise


@dataclasses.dataclass(frozen=True)
class CacheFolder:
    """Where the cache lives: ``base``, a folder taken as it is (the user's, or the
    project's), and ``parts`` below it, each made and entered without following a link."""

    base: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        return self.base.joinpath(*self.parts)

    def open(self, create: bool) -> tuple[_Dir, bool]:
        """The cache folder (its descriptor where it can be opened) and whether this call
        made it: raises ``OSError`` (:class:`LinkRefused` for a link) if it is not there
        or cannot be made."""
        made = False
        if create and not self.parts:
            made = not os.path.isdir(self.base)
            os.makedirs(self.base, exist_ok=True)
        folder: _Dir = os.open(self.base, _DIRECTORY) if _AT else str(self.base)
        try:
            for part in self.parts:
                child, made = _made(folder, part, create)
                _close(folder)
                folder = child
        except BaseException:
            _close(folder)
            raise
        return folder, made


# Version control's own folders: no cache belongs there (in ``.git/objects`` an entry's
# two-hex folder and name are a loose object's, which ``git fsck`` then reports bad).
VCS_FOLDERS = frozenset({".git", ".hg", ".svn", ".bzr"})


def _in_vcs_folder(path: str) -> str | None:
    """The version control folder ``path`` lies in (or is), as written or resolved."""
    for candidate in (os.path.abspath(path), os.path.realpath(path)):
        for part in Path(candidate).parts:
            if part in VCS_FOLDERS:
                return part
    return None


# The cache directory tag (https://bford.info/cachedir/): backup tools skip the folder,
# and swacheck knows the folder as a cache, which it checks no further than its top.
CACHEDIR_TAG = "CACHEDIR.TAG"
_TAG_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
_TAG = _TAG_SIGNATURE + (
    b"\n# This file is a cache directory tag created by swacheck.\n"
    b"# For information about cache directory tags, see https://bford.info/cachedir/\n"
)


def _is_source(name: str) -> bool:
    """A file the audit reads: Python sources and a project's configuration."""
    return name.endswith((".py", ".pyi")) or name == "pyproject.toml"


def _source_in(folder: _Dir, deep: bool) -> str | None:
    """A Python source or ``pyproject.toml`` inside ``folder`` (its path below it), found
    without following a link; below its top level only if ``deep``. One folder open at a
    time: a wide tree needs no more descriptors than a narrow one."""
    pending = [""]
    while pending:
        below = pending.pop()
        try:
            current = _opened(*_at(folder, below)) if below else folder
        except OSError:
            continue
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if deep:
                            pending.append(f"{below}{entry.name}/")
                    elif _is_source(entry.name) and not entry.is_symlink():
                        return below + entry.name
        except OSError:
            continue
        finally:
            if current is not folder:
                _close(current)
    return None


def _tagged(folder: _Dir) -> bool:
    """Whether ``folder`` carries a cache directory tag (a regular file, not a link)."""
    path, dir_fd = _at(folder, CACHEDIR_TAG)
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        return handle.read(len(_TAG_SIGNATURE)) == _TAG_SIGNATURE


def _write_new(folder: _Dir, name: str, data: bytes) -> None:
    """``name`` in ``folder`` holding ``data``, unless something is there (kept as it is)."""
    path, dir_fd = _at(folder, name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    with contextlib.suppress(OSError):
        fd = os.open(path, flags, 0o644, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)


def cache_folder(
    config: Config, user: Path | None = None, base: Path | None = None
) -> tuple[CacheFolder | None, str]:
    """Where the cache lives, or ``None`` and why it is not used.

    ``user``: ``--cache-dir`` or ``SWACHECK_CACHE_DIR``, the user's own say: taken as
    given (relative to the working directory, links in it followed). Else the
    configuration's ``cache-dir``, relative to the configuration's folder (without one:
    ``base``, the project's root, so that a call from a sub-folder uses the cache of
    a call from the root; without a project, the working directory), which must lie
    below that folder and is reached without following a link: a repository does not
    decide where the user's files are written. Nothing inside the cache folder is ever
    followed.
    """
    if user is not None:
        target = os.path.abspath(user)
        named = f"cache folder {target}"
    else:
        root = str(config.root or base or os.getcwd())
        target = os.path.normpath(os.path.join(root, config.cache_dir))
        relative = os.path.relpath(target, root)
        where = f" in {config.source}" if config.source else ""
        named = f"cache-dir = {config.cache_dir!r}{where}"
        if _outside(relative):
            return None, (
                f"{named} is not a folder below the project ({root}): the cache is not used. "
                "A cache elsewhere needs your own say: --cache-dir or SWACHECK_CACHE_DIR"
            )
    vcs = _in_vcs_folder(target)
    if vcs is not None:
        return None, (
            f"{named} lies inside {vcs}, version control's own folder: the cache is not used"
        )
    if user is not None:
        return CacheFolder(Path(target), ()), ""
    return CacheFolder(Path(root), Path(relative).parts), ""


def _outside(relative: str) -> bool:
    """Whether a relative path names its base folder itself or something outside it."""
    return relative in (os.curdir, os.pardir) or relative.startswith(os.pardir + os.sep)


class ResultCache:
    """Entries under ``folder`` for one configuration and, once :meth:`for_rules` names
    them, one rule set (the rule catalogue is read before rules are selected).

    ``folder=None``: a cache that holds nothing (``problem`` says why)."""

    def __init__(
        self,
        folder: CacheFolder | None,
        config: Config,
        rule_codes: Sequence[str] = (),
        *,
        problem: str = "",
    ) -> None:
        self.location = folder
        # Why the cache is not used, if it is not (a refused folder, a link in it).
        self.problem = problem
        self._config = config
        self._codes = tuple(sorted(rule_codes))
        salt = f"{__version__}\0{_code_digest()}"
        self._salts = {
            kind: hashlib.sha256(
                "\0".join(
                    [salt, config.fingerprint(scope), ",".join(self._codes) if codes else ""]
                ).encode()
            ).hexdigest()
            for kind, (scope, codes) in DEPENDS.items()
        }
        # Whether the folder was checked (and, once written to, made or adopted as a cache).
        self._checked = False
        self._ready = False

    @property
    def folder(self) -> Path | None:
        return self.location.path if self.location is not None else None

    def for_rules(self, rule_codes: Sequence[str]) -> ResultCache:
        return ResultCache(
            self.location,
            self._config,
            rule_codes,
            problem=self.problem,
        )

    def key(self, kind: str, data: bytes, extra: str = "") -> str:
        digest = hashlib.sha256()
        # File names that are not UTF-8 reach here as surrogate escapes.
        extra_bytes = extra.encode("utf-8", "surrogateescape")
        for part in (self._salts[kind].encode(), kind.encode(), extra_bytes, data):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        return digest.hexdigest()

    def _open(self, create: bool) -> _Dir | None:
        """The cache folder, ``None`` if it is not there (or refused: :attr:`problem`).

        A folder this call makes gets the tag and a ``.gitignore``. One that was there
        is checked once: refused if it holds a Python source or a ``pyproject.toml``
        (anywhere below it, or at its top where it carries a cache's tag); else adopted
        (tagged, never given a ``.gitignore``) when first written to."""
        if self.location is None:
            return None
        try:
            folder, made = self.location.open(create)
        except LinkRefused as exc:
            self.problem = f"{self.location.path}: {exc.strerror}; the cache is not used"
            self.location = None
            return None
        except OSError:
            return None
        try:
            if made:
                _write_new(folder, CACHEDIR_TAG, _TAG)
                _write_new(folder, ".gitignore", _GITIGNORE.encode())
                self._checked = self._ready = True
            if not self._checked:
                self._checked = True
                tagged = _tagged(folder)
                source = _source_in(folder, deep=not tagged)
                if source is not None:
                    self.problem = (
                        f"{self.location.path}: holds {source}, which audits read: the cache is "
                        "not used there (a cache folder must be the cache's own)"
                    )
                    self.location = None
                    _close(folder)
                    return None
                self._ready = tagged
            if create and not self._ready:
                self._ready = True
                _write_new(folder, CACHEDIR_TAG, _TAG)
        except OSError:
            _close(folder)
            return None
        return folder

    def usable(self) -> bool:
        """Whether entries can be read and written: the key is there (or made) and the
        folder, if it exists, is not refused; :attr:`problem` says why not."""
        if not self._keyed():
            return False
        folder = self._open(create=False)
        _close(folder)
        return self.location is not None

    def _keyed(self) -> bool:
        """Whether this user's signing key is there; :attr:`problem` says why not."""
        secret, reason = _secret()
        if secret is None:
            self.problem = self.problem or reason
        return secret is not None

    def get(self, key: str) -> Any | None:
        if not self._keyed():
            return None
        folder = self._open(create=False)
        if folder is None:
            return None
        sub = None
        try:
            sub = _enter(folder, key[:2], create=False)
            path, dir_fd = _at(sub, key[2:])
            # Non-blocking: a FIFO planted as an entry would block the open.
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=dir_fd)
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    return None
                mac, payload = handle.read(_MAC_SIZE), handle.read()
            if not hmac.compare_digest(mac, _mac(key, payload)):
                return None  # not written by this user's swacheck for this key: never unpickled
            return pickle.loads(payload)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return None
        finally:
            _close(sub)
            _close(folder)

    def put(self, key: str, value: Any) -> None:
        if not self._keyed():
            return
        folder = self._open(create=True)
        if folder is None:
            return
        sub = None
        temporary = f".tmp{secrets.token_hex(8)}"
        try:
            sub = _enter(folder, key[:2], create=True)
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            path, dir_fd = _at(sub, temporary)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
            fd = os.open(path, flags, 0o600, dir_fd=dir_fd)
            with os.fdopen(fd, "wb") as handle:
                handle.write(_mac(key, payload) + payload)
            target, _ = _at(sub, key[2:])
            os.replace(path, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except LinkRefused as exc:
            self.problem = f"{self.folder / key[:2]}: {exc.strerror}; not followed"
        except OSError:
            if sub is not None:
                path, dir_fd = _at(sub, temporary)
                with contextlib.suppress(OSError):
                    os.unlink(path, dir_fd=dir_fd)
        finally:
            _close(sub)
            _close(folder)


def result_cache(
    config: Config, folder: Path | CacheFolder | None = None, base: Path | None = None
) -> ResultCache:
    """The cache in ``folder`` (the user's ``--cache-dir``, or a location found by
    :func:`cache_folder`) or where the configuration's ``cache-dir`` says (relative to
    ``base``, the project's root, without a configuration file)."""
    if isinstance(folder, CacheFolder):
        return ResultCache(folder, config)
    location, problem = cache_folder(config, folder, base)
    return ResultCache(location, config, problem=problem)


class _Digests:
    """Hash-seed-independent digests of values (sets sorted, dataclasses by their
    fields), each shared object digested once: the semantic core's facts are graphs of
    terms that share their parts (a value and every view of it), and spelling them out
    as one tree grew with the number of paths through them (a cold audit of SGLang
    0.5.23's ``srt`` spent minutes and 5 GB on it)."""

    def __init__(self) -> None:
        self._memo: dict[int, bytes] = {}
        self._keep: list[Any] = []  # the objects digested, so their ids stay theirs

    def of(self, value: Any) -> bytes:
        if isinstance(value, str | int | float | bool | bytes | type(None)):
            return hashlib.sha256(repr(value).encode("utf-8", "surrogateescape")).digest()
        found = self._memo.get(id(value))
        if found is None:
            found = self._memo[id(value)] = self._of(value)
            self._keep.append(value)
        return found

    def _of(self, value: Any) -> bytes:
        digest = hashlib.sha256()
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            digest.update(b"D" + type(value).__name__.encode())
            for f in dataclasses.fields(value):
                if is_position(f):
                    continue
                digest.update(f.name.encode() + b"=" + self.of(getattr(value, f.name)))
        elif isinstance(value, dict):
            digest.update(b"M")
            for item in sorted(self.of(k) + self.of(v) for k, v in value.items()):
                digest.update(item)
        elif isinstance(value, set | frozenset):
            digest.update(b"S")
            for item in sorted(self.of(v) for v in value):
                digest.update(item)
        elif isinstance(value, list | tuple):
            digest.update(b"L")
            for v in value:
                digest.update(self.of(v))
        else:
            digest.update(b"R" + repr(value).encode("utf-8", "surrogateescape"))
        return digest.digest()


def facts_digest(facts: Any) -> str:
    """A digest of one file's first-pass result without its positions (fields marked
    :func:`swacheck.places.position`), stable across processes and runs: other files'
    findings are a function of it, so an edit that only shifts a file's rows leaves it,
    and them, as they were."""
    return _Digests().of(facts).hex()


def project_digest(file_digests: Mapping[str, str]) -> str:
    """A digest of the whole project from one digest per file."""
    digest = hashlib.sha256()
    for path in sorted(file_digests):
        digest.update(f"{path}\0{file_digests[path]}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()
