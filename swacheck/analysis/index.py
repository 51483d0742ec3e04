"""The project index: what one audit knows across files.

Built in the engine's first pass from every candidate file: classes with their bases,
methods, the attributes they own (and the class of those whose class can be read off
the source), every function's config-free skeleton for method summaries
(:mod:`swacheck.analysis.skeletons`), and, per rule, whatever facts the rule collects for
cross-file reasoning (``Rule.collect_facts``). Everything here is plain picklable data
so worker processes and the result cache can carry it; config-aware results computed
from it during the check are memoised per index (:meth:`ProjectIndex.memo`) and never
pickled.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import libcst as cst
from libcst.metadata import CodeRange

from swacheck.analysis.names import dotted_name, target_name
from swacheck.analysis.skeletons import (
    FunctionSkeleton,
    annotation_class,
    constructed_class,
    module_skeletons,
    params_of,
)
from swacheck.analysis.walk import walk

T = TypeVar("T")


@dataclass(frozen=True)
class MethodInfo:
    name: str
    params: tuple[str, ...]
    decorators: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClassInfo:
    name: str
    path: str
    bases: tuple[str, ...]
    methods: dict[str, MethodInfo]
    # Attributes assigned on ``self`` in any method.
    self_attributes: frozenset[str]
    is_dataclass: bool = False
    # Annotated class-level names (dataclass fields and plain annotations).
    fields: tuple[str, ...] = ()
    # Keyword names passed to ``cls(...)`` inside classmethods (factory-built attributes).
    factory_attributes: frozenset[str] = frozenset()
    # ``self.<attr>`` -> class name, where the source says (``self.pool = Pool(...)``,
    # ``self.pool = pool`` with ``pool: Pool``, a class-level ``pool: Pool``).
    attribute_types: dict[str, str] = field(default_factory=dict)

    @property
    def owned_attributes(self) -> frozenset[str]:
        return self.self_attributes | frozenset(self.fields) | self.factory_attributes


@dataclass
class ModuleFacts:
    """Everything the first pass learns from one file."""

    path: str
    classes: list[ClassInfo] = field(default_factory=list)
    # Names of all functions and methods defined in the file (for scope rules).
    defined_functions: frozenset[str] = frozenset()
    # Per-rule facts, keyed by rule code.
    rule_facts: dict[str, Any] = field(default_factory=dict)
    # Skeletons of module-level functions (``name``) and methods (``Class.name``).
    functions: dict[str, FunctionSkeleton] = field(default_factory=dict)
    # The semantic core's facts of the file (``swacheck.semantics``), where some semantic
    # rule applies to it.
    semantic: Any = None


def _decorator_names(node: cst.FunctionDef | cst.ClassDef) -> tuple[str, ...]:
    names = []
    for dec in node.decorators:
        expr = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        name = dotted_name(expr)
        if name:
            names.append(name)
    return tuple(names)


class _ClassCollector(cst.CSTVisitor):
    """Collects one class body (nested classes are indexed separately)."""

    def __init__(self) -> None:
        self.self_attributes: set[str] = set()
        self.factory_attributes: set[str] = set()
        self.attribute_types: dict[str, str] = {}
        # Met on the way, for the index walk: nested classes and every function name.
        self.nested: list[cst.ClassDef] = []
        self.function_names: set[str] = set()
        self._classmethod_depth = 0
        self._param_types: list[dict[str, str]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.function_names.add(node.name.value)
        if "classmethod" in _decorator_names(node):
            self._classmethod_depth += 1
        types = {}
        for param in params_of(node):
            if param.annotation is not None:
                cls = annotation_class(param.annotation.annotation)
                if cls:
                    types[param.name.value] = cls
        self._param_types.append(types)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if "classmethod" in _decorator_names(original_node):
            self._classmethod_depth -= 1
        self._param_types.pop()

    def _record_type(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if not (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
        ):
            return
        cls = constructed_class(value)
        if cls is None and isinstance(value, cst.Name) and self._param_types:
            cls = self._param_types[-1].get(value.value)
        if cls is not None:
            self.attribute_types.setdefault(target.attr.value, cls)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.nested.append(node)
        return False

    def _store(self, target: cst.BaseExpression) -> None:
        if (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
        ):
            self.self_attributes.add(target.attr.value)
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._store(element.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._store(target.target)
            self._record_type(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._store(node.target)
        cls = annotation_class(node.annotation.annotation)
        if (
            cls
            and isinstance(node.target, cst.Attribute)
            and isinstance(node.target.value, cst.Name)
            and node.target.value.value == "self"
        ):
            self.attribute_types.setdefault(node.target.attr.value, cls)
        else:
            self._record_type(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._store(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        if self._classmethod_depth and isinstance(node.func, cst.Name) and node.func.value == "cls":
            for arg in node.args:
                if arg.keyword is not None:
                    self.factory_attributes.add(arg.keyword.value)


def _class_info(node: cst.ClassDef, path: str) -> tuple[ClassInfo, _ClassCollector]:
    methods: dict[str, MethodInfo] = {}
    fields_: list[str] = []
    field_types: dict[str, str] = {}
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if isinstance(stmt, cst.FunctionDef):
            params = tuple(p.name.value for p in stmt.params.params)
            methods[stmt.name.value] = MethodInfo(stmt.name.value, params, _decorator_names(stmt))
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign):
                    name = target_name(small.target)
                    if name and isinstance(small.target, cst.Name):
                        fields_.append(name)
                        cls = annotation_class(small.annotation.annotation)
                        if cls:
                            field_types[name] = cls
    collector = _ClassCollector()
    walk(node.body, collector)
    info = ClassInfo(
        name=node.name.value,
        path=path,
        bases=tuple(n for arg in node.bases if (n := dotted_name(arg.value))),
        methods=methods,
        self_attributes=frozenset(collector.self_attributes),
        is_dataclass=any(d.split(".")[-1] == "dataclass" for d in _decorator_names(node)),
        fields=tuple(fields_),
        factory_attributes=frozenset(collector.factory_attributes),
        attribute_types={**field_types, **collector.attribute_types},
    )
    return info, collector


def index_module(
    module: cst.Module, path: str, *, positions: Mapping[cst.CSTNode, CodeRange] | None = None
) -> ModuleFacts:
    """First-pass facts of one parsed file.

    Skeletons (per-function CFGs and events, for the method summaries of the order
    rules) are the costly part and need ``positions``; they are built only when
    positions are given, which the engine does only when an enabled rule uses summaries.
    """
    classes: list[ClassInfo] = []
    functions: set[str] = set()

    def add_class(node: cst.ClassDef) -> None:
        # One walk per class body; nested classes are taken from the collector.
        info, collector = _class_info(node, path)
        classes.append(info)
        functions.update(collector.function_names)
        for nested in collector.nested:
            add_class(nested)

    class Visitor(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            add_class(node)
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            functions.add(node.name.value)

    walk(module, Visitor())
    function_facts = {}
    if positions is not None:
        function_facts = module_skeletons(module, positions)
    return ModuleFacts(
        path=path,
        classes=classes,
        defined_functions=frozenset(functions),
        functions=function_facts,
    )


# More files changed than this: the index is built anew (:meth:`ProjectIndex.updated_to`).
UPDATED_AT_MOST = 16


class ProjectIndex:
    """All :class:`ModuleFacts` of one audit, with lookups across files."""

    def __init__(self, modules: Iterable[ModuleFacts] = ()) -> None:
        self.modules: dict[str, ModuleFacts] = {m.path: m for m in modules}
        self._memo: dict[Hashable, Any] = {}
        self._classes: dict[str, list[ClassInfo]] = {}
        self._functions: set[str] = set()
        for facts in self.modules.values():
            for info in facts.classes:
                self._classes.setdefault(info.name, []).append(info)
            self._functions |= facts.defined_functions

    def updated_to(self, modules: Sequence[ModuleFacts]) -> ProjectIndex | None:
        """The index of ``modules`` made from this one, when they are the files it
        indexes, in its order, few of them changed (an edit); else ``None``."""
        if len(modules) != len(self.modules):
            return None
        changed = []
        for facts, (path, old) in zip(modules, self.modules.items(), strict=True):
            if facts.path != path:
                return None
            if facts is not old:
                changed.append(facts)
                if len(changed) > UPDATED_AT_MOST:
                    return None
        return self._updated(changed)

    def _updated(self, modules: Iterable[ModuleFacts]) -> ProjectIndex:
        """This index with ``modules`` in place of the facts of their files (each already
        indexed), as a new index with its own memo: after an edit, the project is not
        indexed again for the one file whose facts changed. Lookups answer as they
        would from an index built anew (class lists are looked up, not read in order)."""
        index = copy.copy(self)  # without the memo (``__getstate__``)
        index.modules = dict(self.modules)
        index._classes = dict(self._classes)
        functions_changed = False
        for facts in modules:
            old = index.modules[facts.path]
            index.modules[facts.path] = facts
            for name in {info.name for info in (*old.classes, *facts.classes)}:
                infos = [i for i in index._classes.get(name, ()) if i.path != facts.path]
                infos += [info for info in facts.classes if info.name == name]
                if infos:
                    index._classes[name] = infos
                else:
                    index._classes.pop(name, None)
            functions_changed |= old.defined_functions != facts.defined_functions
        if functions_changed:
            index._functions = set().union(*(m.defined_functions for m in index.modules.values()))
        return index

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_memo"] = {}  # config-aware results stay in the process that made them
        return state

    def semantic(self, config: Any) -> Any:
        """The semantic core's analysis of the project's files (built once per index)."""
        from swacheck.semantics.unit import Analysis

        return self.memo(
            ("semantic", id(config)),
            lambda: Analysis(
                (m.semantic for m in self.modules.values() if m.semantic is not None), config
            ),
        )

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Compute ``compute()`` once per index for ``key`` (e.g. the summary resolver)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def function(self, path: str, key: str) -> FunctionSkeleton | None:
        """The skeleton of function ``key`` (``name`` or ``Class.name``) in ``path``."""
        facts = self.modules.get(path)
        return facts.functions.get(key) if facts is not None else None

    def defines_function(self, names: Iterable[str]) -> bool:
        """Whether any audited file defines a function or method with one of ``names``."""
        return any(name in self._functions for name in names)

    def resolve_class(self, name: str, near: str | None = None) -> ClassInfo | None:
        """The class called ``name`` (last dotted component); same file wins a tie."""
        candidates = self._classes.get(name.rsplit(".", 1)[-1], [])
        if not candidates:
            return None
        for info in candidates:
            if info.path == near:
                return info
        return candidates[0] if len(candidates) == 1 else None

    def mro(self, info: ClassInfo) -> list[ClassInfo]:
        """``info`` then its bases known to the audit, depth-first, each once."""
        seen: dict[tuple[str, str], ClassInfo] = {}

        def walk(cls: ClassInfo) -> None:
            key = (cls.path, cls.name)
            if key in seen:
                return
            seen[key] = cls
            for base in cls.bases:
                resolved = self.resolve_class(base, near=cls.path)
                if resolved is not None:
                    walk(resolved)

        walk(info)
        return list(seen.values())

    def find_method(self, info: ClassInfo, name: str) -> tuple[ClassInfo, MethodInfo] | None:
        for cls in self.mro(info):
            if name in cls.methods:
                return cls, cls.methods[name]
        return None

    def owned_attributes(self, info: ClassInfo) -> frozenset[str]:
        owned: frozenset[str] = frozenset()
        for cls in self.mro(info):
            owned |= cls.owned_attributes
        return owned

    def rule_facts(self, code: str) -> Iterator[tuple[str, Any]]:
        """Each file's facts collected by rule ``code``: ``(path, facts)``."""
        for path, facts in self.modules.items():
            if code in facts.rule_facts:
                yield path, facts.rule_facts[code]
