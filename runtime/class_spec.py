"""``module:Class[=ROLE[/CACHE]]``: a class to watch from construction on, with the role
its instances play and, for a pool, its cache model (both recognised when left out).
The syntax of the pytest plugin's ``swa_sanitize_classes`` and of ``--watch-class``."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from .model import ATTRIBUTE, MEMOISING, NO_CACHE, Role

ROLES = tuple(role.value for role in Role)
CACHE_MODELS = (NO_CACHE, MEMOISING, ATTRIBUTE)


@dataclass(frozen=True)
class ClassSpec:
    module: str
    qualname: str
    role: Role | None = None
    cache: str | None = None

    def load(self) -> type:
        """The class named (``ValueError`` if the name is not a class)."""
        obj: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        if not isinstance(obj, type):
            raise ValueError(f"{self.module}:{self.qualname} is not a class")
        return obj


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
    return ClassSpec(module, qualname, Role(role) if role else None, cache or None)
