"""The audit's classes and callees, as the configured names see them.

:class:`CallResolver` resolves, over the first-pass facts of the files that take part in
summaries (:func:`swacheck.analysis.scope.relevant_text`), a class name to its class,
a class to its bases (MRO) and subclasses, an attribute to the class of the object it
holds, a call event to the function it runs (``self.helper()``, inherited methods,
``super()``, attributes and locals whose class is known, module-level functions).
Method summaries and the cache model build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from swacheck.analysis.skeletons import FunctionSkeleton, function_key
from swacheck.analysis.writes import Event

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo, ProjectIndex
    from swacheck.analysis.names import Names


@dataclass(frozen=True)
class Target:
    """A resolved callee: the file and the function's key there."""

    path: str
    key: str
    cls: str | None
    name: str


class CallResolver:
    """Class and call resolution over the audit's relevant files (config-aware)."""

    def __init__(self, project: ProjectIndex, names: Names, relevant: frozenset[str]) -> None:
        self.project = project
        self.names = names
        self.relevant = relevant
        self._classes: dict[str, list[ClassInfo]] = {}
        self._functions: dict[str, list[str]] = {}
        for path in sorted(relevant):
            facts = project.modules.get(path)
            if facts is None:
                continue
            for info in facts.classes:
                self._classes.setdefault(info.name, []).append(info)
            for key in facts.functions:
                if "." not in key:
                    self._functions.setdefault(key, []).append(path)
        self._mro: dict[tuple[str, str], list[ClassInfo]] = {}
        self._subclasses: dict[tuple[str, str], list[ClassInfo]] | None = None

    # -- classes ------------------------------------------------------------------

    def classes(self) -> list[ClassInfo]:
        """Every class of the relevant files."""
        return [info for infos in self._classes.values() for info in infos]

    def subclasses(self, info: ClassInfo) -> list[ClassInfo]:
        """The classes of the relevant files that have ``info`` among their bases (any depth)."""
        if self._subclasses is None:
            index: dict[tuple[str, str], list[ClassInfo]] = {}
            for cls in self.classes():
                for base in self.mro(cls)[1:]:
                    index.setdefault((base.path, base.name), []).append(cls)
            self._subclasses = index
        return self._subclasses.get((info.path, info.name), [])

    def resolve_class(self, name: str, near: str | None = None) -> ClassInfo | None:
        candidates = self._classes.get(name.rsplit(".", 1)[-1], [])
        for info in candidates:
            if info.path == near:
                return info
        return candidates[0] if len(candidates) == 1 else None

    def mro(self, info: ClassInfo) -> list[ClassInfo]:
        """``info`` then its bases known to the audit, depth-first, each once."""
        key = (info.path, info.name)
        cached = self._mro.get(key)
        if cached is None:
            cached = self._mro[key] = self._walk_bases(info)
        return cached

    def _walk_bases(self, info: ClassInfo) -> list[ClassInfo]:
        seen: dict[tuple[str, str], ClassInfo] = {}

        def walk(cls: ClassInfo) -> None:
            if (cls.path, cls.name) in seen:
                return
            seen[(cls.path, cls.name)] = cls
            for base in cls.bases:
                resolved = self.resolve_class(base, near=cls.path)
                if resolved is not None:
                    walk(resolved)

        walk(info)
        return list(seen.values())

    def find_method(self, info: ClassInfo, name: str, skip_self: bool = False) -> Target | None:
        for cls in self.mro(info)[1 if skip_self else 0 :]:
            if name in cls.methods:
                return Target(cls.path, function_key(cls.name, name), cls.name, name)
        return None

    def attribute_class(self, info: ClassInfo, attr: str) -> ClassInfo | None:
        for cls in self.mro(info):
            type_name = cls.attribute_types.get(attr)
            if type_name:
                return self.resolve_class(type_name, near=cls.path)
        return None

    def defines(self, info: ClassInfo, name: str) -> bool:
        return self.find_method(info, name) is not None

    # -- skeletons -------------------------------------------------------------------

    def skeleton(self, target: Target) -> FunctionSkeleton | None:
        facts = self.project.modules.get(target.path)
        return facts.functions.get(target.key) if facts is not None else None

    def receiver_class(
        self, receiver: str | None, cls: ClassInfo | None, types: dict[str, str], path: str
    ) -> ClassInfo | None:
        """The class of a dotted receiver (``self``, ``self.pool``, ``pool``), if known."""
        if receiver is None or receiver == "?":
            return None
        parts = receiver.split(".")
        if parts[0] == "self":
            current = cls
        elif parts[0] in types:
            current = self.resolve_class(types[parts[0]], near=path)
        else:
            return None
        for attr in parts[1:]:
            if current is None:
                return None
            current = self.attribute_class(current, attr)
        return current

    def resolve_call(
        self, event: Event, cls: ClassInfo | None, types: dict[str, str], path: str
    ) -> Target | None:
        """The function a CALL event runs, when the audit knows it."""
        if event.receiver is None:
            if event.name in types:
                return None
            paths = self._functions.get(event.name, [])
            if path in paths:
                return Target(path, event.name, None, event.name)
            if len(paths) == 1:
                return Target(paths[0], event.name, None, event.name)
            return None
        if event.receiver == "super()":
            return self.find_method(cls, event.name, skip_self=True) if cls else None
        owner = self.receiver_class(event.receiver, cls, types, path)
        if owner is None:
            return None
        return self.find_method(owner, event.name)

    def class_of(self, path: str, name: str | None) -> ClassInfo | None:
        if name is None:
            return None
        facts = self.project.modules.get(path)
        if facts is None:
            return None
        for info in facts.classes:
            if info.name == name:
                return info
        return None
