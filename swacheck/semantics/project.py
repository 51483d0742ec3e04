"""The project: every file's facts, and the lookups that cross files.

Built from the :class:`~swacheck.semantics.module.ModuleFacts` of every candidate file
of an audit. It answers: which class or function a qualified name is (through the
imports that spell it, or a class name alone where only one class has it), a class's
bases and subclasses in method resolution order, which function a call runs (a method
through its receiver's class, ``super()``, a module function, a nested function, a
class's constructor), what each field of a class is bound to in its methods, and the
function a term belongs to. Nothing here knows the engine; the model's questions are
asked in :mod:`swacheck.semantics.values`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from swacheck.semantics.function import BIND, Event, FunctionFacts
from swacheck.semantics.module import ClassFacts, ModuleFacts
from swacheck.semantics.terms import Attr, Call, Global, Param, Term

CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__new__", "__setstate__"})


@dataclass(frozen=True)
class Function:
    """A function of the project: its qualified name, its facts, its module."""

    qual: str
    facts: FunctionFacts
    module: ModuleFacts

    @property
    def cls(self) -> str | None:
        """The qualified name of the class it is a method of."""
        return f"{self.module.module}.{self.facts.cls}" if self.facts.cls else None

    @property
    def self_param(self) -> str | None:
        return self.facts.receiver

    def __hash__(self) -> int:
        return hash(self.qual)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Function) and other.qual == self.qual


@dataclass(frozen=True)
class Class:
    qual: str
    facts: ClassFacts
    module: ModuleFacts

    def __hash__(self) -> int:
        return hash(self.qual)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Class) and other.qual == self.qual


class Project:
    def __init__(self, modules: Iterable[ModuleFacts]) -> None:
        self.modules: dict[str, ModuleFacts] = {}
        self.classes: dict[str, Class] = {}
        self.functions: dict[str, Function] = {}
        self._class_names: dict[str, list[str]] = {}
        self._method_names: dict[str, list[str]] = {}
        self._function_names: dict[str, list[str]] = {}
        self._stores: dict[tuple[str, str], list[tuple[Function, Event]]] = {}
        # First components of the project's module names: a name spelled under another
        # package (``torch.cat``) is never matched to a project definition by its last part.
        self._tops: set[str] = set()
        self._tails: dict[str, str | None] = {}
        for module in modules:
            self.modules[module.module] = module
            self._tops.add(module.module.split(".", 1)[0])
            # the module by every tail of its dotted name: a tree audited from above its
            # import root (``python/sglang/...`` of a checkout, a folder given by an
            # absolute path) spells its imports from below it (``sglang.srt...``)
            parts = module.module.split(".")
            for start in range(1, len(parts)):
                tail = ".".join(parts[start:])
                self._tails[tail] = None if tail in self._tails else module.module
            for key, cls in module.classes.items():
                qual = f"{module.module}.{key}"
                self.classes[qual] = Class(qual, cls, module)
                self._class_names.setdefault(cls.name, []).append(qual)
            for key, facts in module.functions.items():
                qual = f"{module.module}.{key}"
                self.functions[qual] = Function(qual, facts, module)
                if facts.cls is not None:
                    self._method_names.setdefault(facts.name, []).append(qual)
                elif "<locals>" not in key:
                    self._function_names.setdefault(facts.name, []).append(qual)
            if module.top is not None:
                qual = f"{module.module}.<module>"
                self.functions[qual] = Function(qual, module.top, module)

    # -- names ----------------------------------------------------------------------------

    def _rooted(self, name: str) -> str:
        """``name`` with its module spelled as the project names it (``sglang.srt.x.C``
        -> ``python.sglang.srt.x.C``), where one audited module's name ends so."""
        parts = name.split(".")
        for end in range(len(parts) - 1, 0, -1):
            module = self._tails.get(".".join(parts[:end]))
            if module is not None:
                return ".".join([module, *parts[end:]])
        return name

    def class_named(self, name: str) -> Class | None:
        """The class a qualified name spells (``pkg.mod.Cls``), or, where the import
        path does not lead to an audited file, the one class of the project with that
        name."""
        found = self.classes.get(name) or self.classes.get(self._rooted(name))
        if found is not None:
            return found
        if not self._ours(name):
            return None
        short = name.rsplit(".", 1)[-1]
        candidates = self._class_names.get(short, [])
        if len(candidates) == 1:
            return self.classes[candidates[0]]
        if candidates:
            # the one whose module the spelled path ends with
            for qual in candidates:
                if name.endswith(qual) or qual.endswith(name):
                    return self.classes[qual]
        return None

    def function_named(self, name: str) -> Function | None:
        found = self.functions.get(name) or self.functions.get(self._rooted(name))
        if found is not None:
            return found
        if not self._ours(name):
            return None
        short = name.rpartition(".")[2]
        candidates = self._function_names.get(short, [])
        if len(candidates) == 1:
            return self.functions[candidates[0]]
        for qual in candidates:
            if name.endswith(qual) or qual.endswith(name):
                return self.functions[qual]
        return None

    def _ours(self, name: str) -> bool:
        return "." not in name or name.split(".", 1)[0] in self._tops or self._rooted(name) != name

    def global_value(self, name: str) -> tuple[Term, Function] | None:
        """The value a module-level name holds, with its module's top level."""
        module, _, short = self._rooted(name).rpartition(".")
        facts = self.modules.get(module)
        if facts is None or short not in facts.globals:
            return None
        top = self.functions.get(f"{module}.<module>")
        return (facts.globals[short], top) if top is not None else None

    # -- classes ----------------------------------------------------------------------------

    def bases(self, cls: Class) -> list[Class]:
        out = []
        for base in cls.facts.bases:
            found = self.class_named(base)
            if found is not None and found.qual != cls.qual:
                out.append(found)
        return out

    def mro(self, cls: Class) -> list[Class]:
        """``cls`` and its bases known to the project, depth first, left to right."""
        out: list[Class] = []
        seen: set[str] = set()
        stack = [cls]
        while stack:
            current = stack.pop(0)
            if current.qual in seen:
                continue
            seen.add(current.qual)
            out.append(current)
            stack[0:0] = self.bases(current)
        return out

    @cached_property
    def _subclasses(self) -> dict[str, list[Class]]:
        found: dict[str, list[Class]] = {}
        for cls in self.classes.values():
            for base in self.bases(cls):
                found.setdefault(base.qual, []).append(cls)
        return found

    def subclasses(self, cls: Class) -> list[Class]:
        """Every class deriving from ``cls`` in the project (transitively)."""
        out: list[Class] = []
        stack = list(self._subclasses.get(cls.qual, ()))
        seen = {cls.qual}
        while stack:
            current = stack.pop()
            if current.qual in seen:
                continue
            seen.add(current.qual)
            out.append(current)
            stack.extend(self._subclasses.get(current.qual, ()))
        return out

    def method(self, cls: Class, name: str) -> Function | None:
        for current in self.mro(cls):
            found = self.functions.get(f"{current.qual}.{name}")
            if found is not None:
                return found
        return None

    def functions_named(self, name: str) -> list[Function]:
        """Every function or method of the project called ``name``."""
        return [
            self.functions[q]
            for q in (*self._method_names.get(name, ()), *self._function_names.get(name, ()))
        ]

    def methods_named(self, name: str) -> list[Function]:
        return [self.functions[q] for q in self._method_names.get(name, ())]

    def class_of_function(self, function: Function) -> Class | None:
        return self.classes.get(function.cls) if function.cls else None

    def methods_of(self, cls: Class) -> Iterator[Function]:
        """The methods defined in ``cls`` itself (nested functions of them included)."""
        prefix = cls.qual + "."
        for qual, function in self.functions.items():
            if qual.startswith(prefix) and function.facts.cls == cls.facts.key:
                yield function

    @cached_property
    def _field_binders(self) -> dict[str, dict[str, list[Function]]]:
        """Per class, per field: the methods that bind ``self.<field>`` (from each
        function's index: no body is read)."""
        found: dict[str, dict[str, list[Function]]] = {}
        for function in self.functions.values():
            cls = function.cls
            if cls is None:
                continue
            for name in function.facts.index.binds_own:
                found.setdefault(cls, {}).setdefault(name, []).append(function)
        return found

    def _field_stores(self, cls: str, name: str) -> list[tuple[Function, Event]]:
        """Every binding of ``self.<name>`` in the methods of class ``cls`` (memoised)."""
        found = self._stores.get((cls, name))
        if found is not None:
            return found
        out = self._stores[cls, name] = []
        for function in self._field_binders.get(cls, {}).get(name, ()):
            own = Param(function.self_param or "")
            for event in function.facts.events:
                target = event.target
                if (
                    event.kind == BIND
                    and isinstance(target, Attr)
                    and target.base == own
                    and target.name == name
                ):
                    out.append((function, event))
        return out

    def field_stores(self, cls: Class, name: str) -> list[tuple[Function, Event]]:
        """Bindings of field ``name`` by the methods of ``cls``, its bases and its
        subclasses (an object of ``cls`` may be any of them)."""
        out: list[tuple[Function, Event]] = []
        for current in [*self.mro(cls), *self.subclasses(cls)]:
            out += self._field_stores(current.qual, name)
        return out

    def field_annotation(self, cls: Class, name: str) -> str:
        for current in self.mro(cls):
            for field_name, annotation, _ in current.facts.fields:
                if field_name == name:
                    return annotation
        return ""

    def owns(self, cls: Class, name: str) -> bool:
        """Whether objects of ``cls`` have a field ``name`` (bound in a method, a
        class-level annotation or constant)."""
        for current in self.mro(cls):
            facts = current.facts
            if any(f == name for f, _, _ in facts.fields) or any(
                c == name for c, _ in facts.constants
            ):
                return True
            if name in self._field_binders.get(current.qual, {}):
                return True
        return False

    # -- calls ------------------------------------------------------------------------------

    @cached_property
    def _calls_by_name(self) -> dict[str, list[Function]]:
        """Per name, the functions that call something of that name, in project order."""
        found: dict[str, list[Function]] = {}
        for function in self.functions.values():
            for name in function.facts.index.calls:
                found.setdefault(name, []).append(function)
        return found

    def possible_callers(self, function: Function) -> list[Function]:
        """Every function a call of ``function`` may be in, in project order
        (:meth:`callers`)."""
        found = {caller.qual: caller for _, caller in self.callers(function)}
        return sorted(found.values(), key=lambda f: self._order[f.qual])

    def callers(self, function: Function) -> Iterator[tuple[str, Function]]:
        """The functions that call something of ``function``'s name, or of a class whose
        constructor it is, each with the name it calls (calls are resolved by name, so
        no other function can call it); through ``super()``, only its class's subclasses'
        methods."""
        own = self.class_of_function(function)
        below = {cls.qual for cls in self.subclasses(own)} if own is not None else set()
        for name in self._call_names(function, own):
            for caller in self._calls_by_name.get(name, ()):
                if not name.startswith("super().") or caller.cls in below:
                    yield name, caller

    def _call_names(self, function: Function, own: Class | None) -> set[str]:
        """The names a call of ``function`` is spelled with: its own (through
        ``super()`` too, for a method), and those of the classes whose constructor it is."""
        names = {function.facts.name}
        if own is not None:
            names.add(f"super().{function.facts.name}")
        if function.facts.name == "__init__" and own is not None:
            for cls in (own, *self.subclasses(own)):
                if self.method(cls, "__init__") == function:
                    names.add(cls.facts.name)
        return names

    @cached_property
    def _order(self) -> dict[str, int]:
        return {qual: i for i, qual in enumerate(self.functions)}

    def annotated_class(self, annotation: str, module: ModuleFacts) -> Class | None:
        """The class an annotation names (``X``, ``mod.X``, ``Optional[X]``, ``X | None``,
        ``"X"``)."""
        text = annotation.strip().strip("'\"")
        for wrapper in ("Optional[", "typing.Optional["):
            if text.startswith(wrapper) and text.endswith("]"):
                text = text[len(wrapper) : -1]
        parts = [p.strip() for p in text.split("|")]
        parts = [p for p in parts if p not in ("None", "")]
        if len(parts) != 1:
            return None
        name = parts[0]
        if not name.replace(".", "").replace("_", "").isalnum() or (
            not name[:1].isupper() and "." not in name
        ):
            return None
        head, _, rest = name.partition(".")
        qualified = module.imports.get(head)
        if qualified is None:
            qualified = f"{module.module}.{head}" if head in _local_classes(module) else head
        return self.class_named(f"{qualified}.{rest}" if rest else qualified)

    def callee_by_name(self, func: Term) -> Function | Class | None:
        """What calling a global runs: a function, or a class (its constructor)."""
        if not isinstance(func, Global):
            return None
        return self.function_named(func.name) or self.class_named(func.name)


def _local_classes(module: ModuleFacts) -> set[str]:
    return {cls.name for cls in module.classes.values()}


def call_func(term: Term) -> Term | None:
    return term.func if isinstance(term, Call) else None
