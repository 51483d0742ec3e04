"""Import a release's unmodified SGLang classes on a CPU machine without its dependencies.

SGLang's import graph reaches model configs, tokenizers, servers and CUDA kernels that
the pools, allocators and graph runners under test never use. Rather than installing
all of that, :func:`activated` puts the extracted wheel first on ``sys.path`` and adds
three import hooks, for as long as it is active:

- **lazy packages**: ``import sglang.a.b`` does not run ``sglang/__init__.py`` or
  ``sglang/a/__init__.py`` (they import most of SGLang); a package's ``__init__.py``
  runs the first time a name is looked up on it (``from sglang.srt.utils import X``);
- **guarded modules**: an SGLang module that cannot run here (it needs something
  missing, or a stub did not behave like the real thing) keeps what it defined before
  it failed and answers the rest with stubs; :attr:`Release.failed` lists them and the
  tests assert that no module they test is among them;
- **stubs for missing third-party modules**, imported from SGLang's own files only
  (``orjson``, ``sgl_kernel``, ``transformers`` ...): permissive stand-ins whose every
  attribute is a class that can be called, subclassed, indexed and used as a
  decorator, all falsy (so feature switches read from them are off); ``msgspec``'s
  ``Struct`` behaves as the record base 0.5.23's KV index translator builds on.

Every SGLang module that imports is the release's own, unmodified; the classes under
test are checked to come from the wheel. Leaving the context removes the hooks and
every module it imported or stubbed, so another release can be loaded next.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGE = "sglang"


class _StubMeta(type):
    """The type of every stand-in: any attribute, item, call or subclass works."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return stub_class(f"{cls.__qualname__}.{name}")

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __setitem__(cls, key: Any, value: Any) -> None:
        pass

    def __iter__(cls) -> Iterator[Any]:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __bool__(cls) -> bool:
        return False

    def __contains__(cls, item: Any) -> bool:
        return False

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls

    def __instancecheck__(cls, instance: Any) -> bool:
        return False

    def __subclasscheck__(cls, subclass: Any) -> bool:
        return False

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            return args[0]  # a decorator from a missing package leaves the function alone
        return super().__call__(*args, **kwargs)


def _missing_dunder(name: str) -> Any:
    raise AttributeError(name)


def stub_class(name: str) -> type:
    """A stand-in class named ``name``; its instances are stand-ins too."""
    return _StubMeta(
        name.rsplit(".", 1)[-1],
        (),
        {
            "__init__": lambda self, *args, **kwargs: None,
            "__init_subclass__": classmethod(lambda cls, **kwargs: None),
            "__call__": lambda self, *args, **kwargs: None,
            "__bool__": lambda self: False,
            "__getattr__": lambda self, attr: (
                _missing_dunder(attr) if attr.startswith("__") else stub_class(attr)
            ),
        },
    )


class Struct:
    """A stand-in for ``msgspec.Struct`` (SGLang 0.5.23's ``IdSpace``, ``KVIndexTable``):
    a record whose fields are its class annotations, set from positional and keyword
    arguments, defaults from the class. msgspec's validation and encoding are not needed
    by the classes under test; its record behaviour is."""

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names: list[str] = []
        for klass in reversed(type(self).__mro__):
            names += [n for n in getattr(klass, "__annotations__", {}) if n not in names]
        for name, value in zip(names, args, strict=False):
            object.__setattr__(self, name, value)
        for name in names[len(args) :]:
            value = kwargs[name] if name in kwargs else getattr(type(self), name)
            object.__setattr__(self, name, value)


# Missing third-party modules whose stand-in must behave, not only import: by name.
BEHAVING_STANDINS = {"msgspec": {"Struct": Struct}}


class StubModule(types.ModuleType):
    """A module whose missing names are stand-ins (also a failed module's class)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


@dataclass
class Release:
    """An activated release: where it lies, and what the hooks did."""

    version: str
    root: Path
    stubbed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def load(self, module: str, *names: str) -> tuple[Any, ...]:
        """The named attributes of an SGLang module, which must have imported cleanly and
        come from this release's wheel."""
        imported = importlib.import_module(module)
        if module in self.failed:
            raise ImportError(f"{module} of sglang {self.version} failed: {self.failed[module]}")
        found = tuple(getattr(imported, name) for name in names)
        for value in found:
            source = getattr(sys.modules.get(getattr(value, "__module__", "")), "__file__", "")
            if not str(source).startswith(str(self.root)):
                raise ImportError(f"{module}.{value.__name__} does not come from {self.root}")
        return found


class _LazyPackages(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, release: Release) -> None:
        self.release = release

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".")[0] != PACKAGE:
            return None
        folder = self.release.root.joinpath(*fullname.split("."))
        if not folder.is_dir():
            return None
        init = folder / "__init__.py"
        spec = importlib.machinery.ModuleSpec(
            fullname, self, is_package=True, origin=str(init) if init.exists() else None
        )
        spec.submodule_search_locations = [str(folder)]
        return spec

    def create_module(self, spec: Any) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = spec.submodule_search_locations
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        init = Path(module.__path__[0]) / "__init__.py"
        if not init.exists():
            return
        done = False

        def run_init(name: str) -> Any:
            nonlocal done
            if done or (name.startswith("__") and name != "__all__"):
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            done = True
            del module.__getattr__
            module.__file__ = str(init)
            exec(compile(init.read_text(), init, "exec"), module.__dict__)
            return getattr(module, name)

        module.__getattr__ = run_init  # type: ignore[method-assign]


class _GuardedLoader(importlib.abc.Loader):
    def __init__(self, real: importlib.machinery.SourceFileLoader, release: Release) -> None:
        self.real = real
        self.release = release

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        try:
            self.real.exec_module(module)
        except Exception as exc:  # keep what it defined; stand-ins for the rest
            self.release.failed[module.__name__] = f"{type(exc).__name__}: {exc}"
            module.__class__ = StubModule


class _GuardedModules(importlib.abc.MetaPathFinder):
    def __init__(self, release: Release) -> None:
        self.release = release

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".")[0] != PACKAGE:
            return None
        file = self.release.root.joinpath(*fullname.split(".")).with_suffix(".py")
        if not file.is_file():
            return None
        real = importlib.machinery.SourceFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(
            fullname, file, loader=_GuardedLoader(real, self.release)
        )


class _MissingThirdParty(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stand-ins for modules that cannot be found, when SGLang's own code imports them."""

    def __init__(self, release: Release) -> None:
        self.release = release
        self.root = str(release.root)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        top = fullname.split(".")[0]
        if top == PACKAGE or top in sys.stdlib_module_names:
            return None
        if not self._imported_by_sglang():
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, (_LazyPackages, _GuardedModules)):
                continue
            try:
                if finder.find_spec(fullname, path, target) is not None:
                    return None
            except Exception:
                continue
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def _imported_by_sglang(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if not (filename.startswith("<frozen") or "importlib" in filename):
                return filename.startswith(self.root)
            frame = frame.f_back
        return False

    def create_module(self, spec: Any) -> types.ModuleType:
        self.release.stubbed.append(spec.name)
        module = StubModule(spec.name)
        module.__path__ = []
        for name, value in BEHAVING_STANDINS.get(spec.name, {}).items():
            setattr(module, name, value)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


@contextlib.contextmanager
def activated(version: str, root: Path) -> Iterator[Release]:
    """Make ``import sglang...`` load release ``version`` from ``root`` (see above)."""
    if any(name == PACKAGE or name.startswith(PACKAGE + ".") for name in sys.modules):
        raise RuntimeError("another sglang is imported in this process")
    release = Release(version, root)
    hooks = [_MissingThirdParty(release), _LazyPackages(release), _GuardedModules(release)]
    before = set(sys.modules)
    sys.meta_path[:0] = hooks
    sys.path.insert(0, str(root))
    try:
        yield release
    finally:
        for hook in hooks:
            sys.meta_path.remove(hook)
        with contextlib.suppress(ValueError):
            sys.path.remove(str(root))
        for name in set(sys.modules) - before:
            if name == PACKAGE or name.startswith(PACKAGE + ".") or name in release.stubbed:
                del sys.modules[name]
        importlib.invalidate_caches()
