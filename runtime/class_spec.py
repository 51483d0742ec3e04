"""``module:Class[=ROLE[/CACHE]]``: a class to watch from construction on, with the role
its instances play and, for a pool, its cache model (both recognised when left out).
The syntax of the pytest plugin's ``swa_sanitize_classes`` and of ``--watch-class``;
``auto`` stands for the installed SGLang's recipe (``recipe.py``)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from .model import ATTRIBUTE, MEMOISING, NO_CACHE, Role

ROLES = tuple(role.value for role in Role)
CACHE_MODELS = (NO_CACHE, MEMOISING, ATTRIBUTE)


# ``type.__flags__`` bits: a class defined in Python (its ``__init__`` can be wrapped),
# and one whose attributes cannot be set (a built-in such as ``int``).
_HEAPTYPE = 1 << 9
_IMMUTABLETYPE = 1 << 8


@dataclass(frozen=True)
class ClassSpec:
    module: str
    qualname: str
    role: Role | None = None
    cache: str | None = None
    text: str = ""

    def load(self) -> type:
        """The class named: a ``ValueError`` naming the spec and what is wrong when the
        module or the name cannot be found, importing or reading it raises (whatever it
        raises: an engine module may call ``sys.exit`` at import), the name is not a
        class, or it is a class whose construction cannot be watched (a built-in such as
        ``int``). Only ``KeyboardInterrupt`` passes through."""
        spec = self.text or f"{self.module}:{self.qualname}"
        try:
            obj: Any = importlib.import_module(self.module)
        except ImportError as exc:
            raise ValueError(f"{spec}: cannot import {self.module}: {exc}") from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the module's own code failed (SystemExit too)
            raise ValueError(f"{spec}: importing {self.module} raised {_raised(exc)}") from None
        for part in self.qualname.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise ValueError(f"{spec}: {self.module} has no {self.qualname}") from None
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a module ``__getattr__`` or a descriptor failed
                raise ValueError(f"{spec}: reading {self.qualname} raised {_raised(exc)}") from None
        if not isinstance(obj, type):
            raise ValueError(f"{spec}: {self.qualname} is a {type(obj).__name__}, not a class")
        if not obj.__flags__ & _HEAPTYPE or obj.__flags__ & _IMMUTABLETYPE:
            raise ValueError(
                f"{spec}: {obj.__qualname__} is a built-in class, whose construction cannot "
                f"be watched; name an engine class defined in Python"
            )
        return obj


def _raised(exc: BaseException) -> str:
    """An exception as a usage error names it: its type and its message."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def parse_class_spec(spec: str) -> ClassSpec:
    """Parse one spec; a ``ValueError`` that names what is wrong otherwise."""
    target, _, declared = spec.partition("=")
    module, _, qualname = target.partition(":")
    if not module or not qualname:
        raise ValueError(f"expected module:Class[=ROLE[/CACHE]], got {spec!r}")
    role, _, cache = declared.partition("/")
    if declared and role not in ROLES:
        raise ValueError(f"{spec}: unknown role {role!r} (roles: {', '.join(ROLES)})")
    if cache and (role != Role.POOL.value or cache not in CACHE_MODELS):
        raise ValueError(
            f"{spec}: a cache model follows the role pool "
            f"(pool/{'|'.join(CACHE_MODELS)}), got {declared!r}"
        )
    return ClassSpec(module, qualname, Role(role) if role else None, cache or None, spec)


def load_class_specs(specs: list[str]) -> list[tuple[ClassSpec, type]]:
    """Each spec parsed and its class loaded, ``auto`` expanded to the installed SGLang's
    recipe: a ``ValueError`` naming the first bad one."""
    from .recipe import AUTO, NoSGLang, expand

    if AUTO in specs:
        try:
            specs = expand(specs)
        except NoSGLang as exc:
            raise ValueError(f"auto: {exc}") from None
    loaded = []
    for text in specs:
        spec = parse_class_spec(text)
        loaded.append((spec, spec.load()))
    return loaded
