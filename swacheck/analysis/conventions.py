"""Each SWA role's dtype convention, per file and per project (I3 by role).

A file's SWA values are found once (:func:`role_values`): every value bound to a name of
a role (:mod:`swacheck.analysis.roles`) with where its dtype is decided
(:mod:`swacheck.analysis.dtypes`), what the file's translate methods and helpers return,
what its mapping tables are built as, and the dtypes its functions assert on their
parameters. :class:`DtypeFacts` is the picklable form the engine's first pass keeps for
every file; :class:`Conventions` aggregates them across the project (pre-commit's partial
file lists see the same project) and answers, for a file and a role, which dtype its
values must have and why:

* ``write`` (KV stores' scatter targets): the file's own explicit casts of them (a cast
  is a choice made for a consumer: ``translate(loc).to(torch.int32)`` before a KV store
  of its own) or asserts; else what the project's translation returns (the producer
  every path hands to the KV stores) or its KV stores assert; else int32, the design's
  dtype where nothing says otherwise;
* ``page-table`` (what kernels read; kernels differ per backend, so the file decides
  first): the file's casts or asserts; else its own allocations; else the project's
  casts; else int32.

A level whose evidence disagrees with itself decides nothing; the next one does. Where no
level decides and one disagreed (a project whose translations return both dtypes, such as
0.5.16's unified pool beside the SWA pool), the role has no convention and nothing is
reported against one; int32 only where no level has any evidence. ``swa-loc-dtype`` set
for a role replaces the inference.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst

from swacheck.analysis.dtypes import (
    ALLOCATION,
    CAST,
    DEFAULT,
    GATHER,
    HELPER,
    TRANSLATION,
    Source,
    ValueDtypes,
    assignments,
    literal_dtype,
)
from swacheck.analysis.escapes import escape_of
from swacheck.analysis.index import ProjectIndex
from swacheck.analysis.names import Names, target_name
from swacheck.analysis.roles import WRITE, role_of
from swacheck.analysis.walk import walk
from swacheck.config import AUTO, Config
from swacheck.context import FileContext

# Kinds a resolved dtype can have (``Resolved.kind``): the concrete kinds of ``dtypes``
# (ALLOCATION, DEFAULT, CAST), TRANSLATION (a translation or a gather from the mapping
# table) and ASSERTED (a function's assert on a parameter).
ASSERTED = "asserted"
# Values someone chose for their consumer: a translation's, a cast's.
_DELIBERATE = frozenset({TRANSLATION, CAST})
DEFAULT_DTYPE = "int32"
_HELPER_DEPTH = 4


@dataclass(frozen=True)
class FactSource:
    """A :class:`~swacheck.analysis.dtypes.Source` without its node: picklable."""

    kind: str
    dtype: str | None
    row: int
    what: str = ""
    ref: str = ""
    passes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, source: Source, context: FileContext) -> FactSource:
        return cls(
            source.kind,
            source.dtype,
            context.start(source.node).row,
            source.what,
            source.ref,
            source.passes,
        )


@dataclass(frozen=True)
class Requirement:
    """A parameter whose dtype its function asserts (or annotates): ``assert loc.dtype ==
    torch.int32``. ``position`` counts the parameters a caller passes (no ``self``)."""

    param: str
    position: int
    dtypes: frozenset[str]
    row: int


@dataclass(frozen=True)
class RoleFact:
    role: str
    slot: str
    sources: tuple[FactSource, ...]


@dataclass
class DtypeFacts:
    """One file's facts for the conventions (see the module docstring)."""

    translations: tuple[FactSource, ...] = ()
    mapping: tuple[FactSource, ...] = ()
    helpers: dict[str, tuple[FactSource, ...]] = field(default_factory=dict)
    bindings: tuple[RoleFact, ...] = ()
    # Function key (``name`` or ``Class.name``) -> its asserted parameters.
    requirements: dict[str, tuple[Requirement, ...]] = field(default_factory=dict)


@dataclass
class RoleBinding:
    """A value bound to a role's name: ``self.out_cache_loc_swa = torch.zeros(...)``,
    ``KVWriteLoc(swa_loc=...)``, ``bufs["swa_page_table"] = ...``."""

    role: str
    slot: str
    sources: list[Source]
    # For a local of a function: how and where the value leaves it (`` and is returned at
    # line 12``); a local that stays in its function is no binding.
    leaves: str = ""
    # A cast into a local handed to a call (``swa_loc = swa_loc.to(torch.int32)`` before
    # the KV store's call): evidence of what the callee takes, not itself checked.
    checked: bool = True


@dataclass
class FileValues:
    """What :func:`role_values` finds in one file (nodes included)."""

    bindings: list[RoleBinding] = field(default_factory=list)
    # Each translate method's returned values (``(method, source)``), and the mapping
    # tables' constructions.
    translate_returns: list[tuple[str, Source]] = field(default_factory=list)
    mapping: list[Source] = field(default_factory=list)
    helpers: dict[str, list[Source]] = field(default_factory=dict)
    requirements: dict[str, tuple[Requirement, ...]] = field(default_factory=dict)

    def facts(self, context: FileContext) -> DtypeFacts:
        def of(sources: Iterable[Source]) -> tuple[FactSource, ...]:
            return tuple(FactSource.of(s, context) for s in sources)

        return DtypeFacts(
            translations=of(s for _, s in self.translate_returns),
            mapping=of(self.mapping),
            helpers={key: of(sources) for key, sources in self.helpers.items()},
            bindings=tuple(RoleFact(b.role, b.slot, of(b.sources)) for b in self.bindings),
            requirements=dict(self.requirements),
        )


# Kinds that count for a local that does not leave its function except into a call: a
# buffer allocated for the object it is handed to. A cast, gather or translation into a
# local is an intermediate (host-side bookkeeping, a value converted again before use).
_HANDED_KINDS = frozenset({ALLOCATION, DEFAULT, HELPER})


def role_values(context: FileContext) -> FileValues:
    """Every role binding, translate result, helper result, mapping construction and
    asserted parameter of the file (memoised per file)."""
    return context.tree_memo(("swa-role-values",), lambda: _collect(context))


def _collect(context: FileContext) -> FileValues:
    values = ValueDtypes(context)
    found = FileValues()
    names = context.names

    def bind(target: cst.BaseExpression, value: cst.BaseExpression, statement: cst.CSTNode) -> None:
        if isinstance(target, cst.Tuple | cst.List):
            if isinstance(value, cst.Tuple | cst.List) and len(value.elements) == len(
                target.elements
            ):
                for t, v in zip(target.elements, value.elements, strict=True):
                    bind(t.value, v.value, statement)
            return
        name = target_name(target)
        role = role_of(name, names) if name else None
        if role is None or name is None:
            if isinstance(target, cst.Attribute) and names.is_mapping(target.attr.value):
                found.mapping.extend(values.sources(value))
            return
        sources = values.sources(value)
        if not sources:
            return
        function = context.enclosing(statement, cst.FunctionDef)
        if not isinstance(target, cst.Name) or function is None:
            found.bindings.append(RoleBinding(role, name, sources))
            return
        leaves = escape_of(function, statement, name)
        if leaves is not None:
            row = context.start(leaves.node).row
            how = f" and is {leaves.how} at line {row}"
            found.bindings.append(RoleBinding(role, name, sources, how))
            return
        handed = escape_of(function, statement, name, calls=True)
        if handed is None:
            return
        row = context.start(handed.node).row
        how = f" and is {handed.how} at line {row}"
        allocated = [s for s in sources if s.kind in _HANDED_KINDS]
        if allocated:
            found.bindings.append(RoleBinding(role, name, allocated, how))
        cast = [s for s in sources if s.kind == CAST]
        if cast:  # a cast at the callee's boundary: what it takes, not checked
            found.bindings.append(RoleBinding(role, name, cast, how, checked=False))

    class Visitor(cst.CSTVisitor):
        def __init__(self) -> None:
            # The functions entered, each with its key and its asserted parameters.
            self.functions: list[tuple[cst.FunctionDef, str, _Asserted]] = []

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            parent = context.parent(context.parent(node) or node)
            if self.functions:
                key = ""  # a nested function: not a helper of the project
            elif isinstance(parent, cst.ClassDef):
                key = f"{parent.name.value}.{node.name.value}"
            else:
                key = node.name.value
            self.functions.append((node, key, _Asserted(node, context)))

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            _, key, asserted = self.functions.pop()
            requirements = asserted.requirements()
            if requirements and key:
                found.requirements[key] = requirements

        def visit_Assert(self, node: cst.Assert) -> None:
            if self.functions:
                for test in _conjuncts(node.test):
                    self.functions[-1][2].note(_dtype_test(test, negated=False), node)

        def visit_If(self, node: cst.If) -> None:
            body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
            raises = any(
                isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Raise)
                for s in body
            )
            if raises and self.functions:
                self.functions[-1][2].note(_dtype_test(node.test, negated=True), node)

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                bind(target.target, node.value, node)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None:
                bind(node.target, node.value, node)

        def visit_Arg(self, node: cst.Arg) -> None:
            keyword = node.keyword.value if node.keyword is not None else None
            role = role_of(keyword, names) if keyword else None
            if keyword and role:
                sources = values.sources(node.value)
                if sources:
                    found.bindings.append(RoleBinding(role, keyword, sources))

        def visit_DictElement(self, node: cst.DictElement) -> None:
            if isinstance(node.key, cst.SimpleString):
                key = node.key.evaluated_value
                role = role_of(key, names) if isinstance(key, str) else None
                if isinstance(key, str) and role:
                    sources = values.sources(node.value)
                    if sources:
                        found.bindings.append(RoleBinding(role, key, sources))

        def visit_Return(self, node: cst.Return) -> None:
            if node.value is None or not self.functions:
                return
            function, key, _ = self.functions[-1]
            if not key:
                return
            sources = values.sources(node.value)
            if not sources:
                return
            if names.is_translate(function.name.value):
                found.translate_returns.extend((function.name.value, s) for s in sources)
            else:
                found.helpers.setdefault(key, []).extend(sources)

    walk(context.module, Visitor())
    return found


class _Asserted:
    """The parameters one function asserts the dtype of (``assert p.dtype == torch.int32``,
    ``if p.dtype != torch.int32: raise``) or annotates (``p: torch.IntTensor``), gathered
    as the file's walk passes its statements."""

    def __init__(self, function: cst.FunctionDef, context: FileContext) -> None:
        self.function = function
        self.context = context
        params = [*function.params.posonly_params, *function.params.params]
        skip = 1 if params and params[0].name.value in ("self", "cls") else 0
        self.positions = {p.name.value: i - skip for i, p in enumerate(params)}
        self.positions.update({p.name.value: -1 for p in function.params.kwonly_params})
        self.found: dict[str, tuple[frozenset[str], int]] = {}
        for param in [*params, *function.params.kwonly_params]:
            if param.annotation is not None:
                dtype = literal_dtype(param.annotation.annotation)
                if dtype is not None:
                    self.note((param.name.value, frozenset({dtype})), param)

    def note(self, checked: tuple[str, frozenset[str]] | None, node: cst.CSTNode) -> None:
        if checked is None:
            return
        name, dtypes = checked
        if name in self.positions and dtypes and name not in self.found:
            self.found[name] = (dtypes, self.context.start(node).row)

    def requirements(self) -> tuple[Requirement, ...]:
        # A parameter the function binds again: its asserts are about another value.
        return tuple(
            Requirement(name, self.positions[name], dtypes, row)
            for name, (dtypes, row) in self.found.items()
            if not assignments(self.function, name)
        )


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _dtype_test(test: cst.BaseExpression, negated: bool) -> tuple[str, frozenset[str]] | None:
    """``p.dtype == torch.int32`` (or ``!=`` when ``negated``, ``in``/``not in`` a tuple)
    -> ``(p, {int32})``."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    left = test.left
    if not (
        isinstance(left, cst.Attribute)
        and left.attr.value == "dtype"
        and isinstance(left.value, cst.Name)
    ):
        return None
    target = test.comparisons[0]
    wanted = (cst.NotEqual, cst.IsNot, cst.NotIn) if negated else (cst.Equal, cst.Is, cst.In)
    if not isinstance(target.operator, wanted):
        return None
    right = target.comparator
    items = (
        [e.value for e in right.elements] if isinstance(right, cst.Tuple | cst.List) else [right]
    )
    dtypes = {literal_dtype(item) for item in items}
    if None in dtypes:
        return None
    return left.value.value, frozenset(d for d in dtypes if d is not None)


@dataclass(frozen=True)
class Resolved:
    """A dtype a source resolves to, of a kind (see ``ASSERTED``), and where it is
    decided (``path:row``)."""

    dtype: str
    kind: str
    where: str


@dataclass(frozen=True)
class Convention:
    """A role's dtype for a file, and why (a clause for the message). ``known``: read
    off the code that consumes or produces the role's values (so its consumers are known
    to take ``dtype``), not configured nor the default."""

    dtype: str
    why: str
    known: bool = True


def _noun(role: str) -> str:
    return "SWA write locations" if role == WRITE else "SWA page tables and window indices"


def _why(scope: str, evidence: Resolved, noun: str) -> str:
    """Why ``noun`` are ``evidence.dtype`` in this ``scope`` (``file`` or ``project``)."""
    dtype = f"torch.{evidence.dtype}"
    if scope == "file":
        verb = {ASSERTED: "asserts", ALLOCATION: "allocates", DEFAULT: "allocates"}.get(
            evidence.kind, "casts"
        )
        return f"this file {verb} its {noun} as {dtype} ({evidence.where})"
    what = {
        TRANSLATION: f"its translation returns {dtype}",
        ASSERTED: f"its KV store asserts {dtype}",
    }.get(evidence.kind, f"it casts them to {dtype}")
    return f"{noun} are {dtype} in this project: {what} ({evidence.where})"


def _unanimous(items: Iterable[Resolved]) -> Resolved | None:
    items = list(items)
    dtypes = {r.dtype for r in items}
    return items[0] if len(dtypes) == 1 else None


class Conventions:
    """The project's facts, aggregated (one per audit's project index and configuration)."""

    def __init__(self, project: ProjectIndex, config: Config, code: str) -> None:
        self.project = project
        self.config = config
        self.files: dict[str, DtypeFacts] = {
            path: facts for path, facts in project.rule_facts(code) if isinstance(facts, DtypeFacts)
        }
        self.names = Names(config)
        self._mapping: list[Resolved] | None = None
        self._translation: list[Resolved] | None = None
        # Helper key -> the files defining it (module-level functions are found by name).
        self._holders: dict[str, list[str]] | None = None
        # (role, slot, dtype) -> the files binding that slot to a deliberate value of it.
        self._deliberate: dict[tuple[str, str, str], set[str]] | None = None
        self._requirements_by_name: dict[str, list[tuple[str, Requirement]]] | None = None

    @classmethod
    def of(cls, context: FileContext, code: str) -> Conventions:
        return context.project.memo(
            ("swa-conventions", code, context.config.fingerprint()),
            lambda: cls(context.project, context.config, code),
        )

    # -- resolving sources -----------------------------------------------------------------

    def resolve(self, source: FactSource, path: str, depth: int = 0) -> list[Resolved]:
        """The dtypes ``source`` (of the file ``path``) may have, with their kinds."""
        where = f"{path}:{source.row}"
        if source.kind in (ALLOCATION, DEFAULT, CAST):
            assert source.dtype is not None
            return [Resolved(source.dtype, source.kind, where)]
        if source.kind == GATHER:
            return [Resolved(r.dtype, TRANSLATION, r.where) for r in self.mapping_dtype()]
        if source.kind == TRANSLATION:
            return list(self.translation())
        if source.kind == HELPER and depth < _HELPER_DEPTH:
            return self._helper(source, path, depth)
        return []

    def mapping_dtype(self) -> list[Resolved]:
        """How the mapping tables are built; int64 (SGLang's table) where none is seen or
        the constructions disagree."""
        if self._mapping is None:
            built = [
                r
                for path, facts in self.files.items()
                for s in facts.mapping
                for r in self.resolve(s, path)
            ]
            self._mapping = built[:1] if _unanimous(built) else [Resolved("int64", ALLOCATION, "")]
        return self._mapping

    def translation(self) -> list[Resolved]:
        """What the project's translate methods return: the dtypes of their gathers and
        casts (a translation handing on to another translate adds nothing; while this
        is being worked out, a translation resolves to nothing)."""
        if self._translation is None:
            self._translation = []
            self._translation = [
                Resolved(r.dtype, TRANSLATION, f"{path}:{s.row}")
                for path, facts in self.files.items()
                for s in facts.translations
                for r in self.resolve(s, path)
            ]
        return self._translation

    def _helper(self, source: FactSource, path: str, depth: int) -> list[Resolved]:
        located = self._locate_helper(source.ref, path)
        if located is None:
            return []
        helper_path, key = located
        passed = dict(source.passes)
        resolved: list[Resolved] = []
        for returned in self.files[helper_path].helpers[key]:
            # A dtype from a parameter's default: the caller may pass another.
            override = None
            if returned.kind != HELPER and "@" in returned.ref:
                param, _, position = returned.ref.partition("@")
                override = passed.get(param) or passed.get(position)
            if override is not None:
                resolved.append(Resolved(override, ALLOCATION, f"{path}:{source.row}"))
            else:  # pointing at the helper's return
                where = f"{helper_path}:{returned.row}"
                resolved.extend(
                    Resolved(r.dtype, r.kind, where)
                    for r in self.resolve(returned, helper_path, depth + 1)
                )
        return resolved

    def _locate_helper(self, ref: str, path: str) -> tuple[str, str] | None:
        if not ref or ref.startswith("."):
            return None
        own = self.files.get(path)
        if own is not None and ref in own.helpers:
            return path, ref
        cls_name, _, method = ref.rpartition(".")
        if cls_name:
            info = self.project.resolve_class(cls_name, near=path)
            if info is None:
                return None
            for base in self.project.mro(info)[1:]:
                facts = self.files.get(base.path)
                key = f"{base.name}.{method}"
                if facts is not None and key in facts.helpers:
                    return base.path, key
            return None
        if self._holders is None:
            self._holders = {}
            for holder, facts in self.files.items():
                for key in facts.helpers:
                    self._holders.setdefault(key, []).append(holder)
        holders = self._holders.get(ref, [])
        return (holders[0], ref) if len(holders) == 1 else None

    # -- requirements ----------------------------------------------------------------------

    def requirements_of(self, function: str) -> list[tuple[str, Requirement]]:
        """What the project's functions called ``function`` (last name) assert, with paths."""
        if self._requirements_by_name is None:
            by_name: dict[str, list[tuple[str, Requirement]]] = {}
            for path, facts in self.files.items():
                for key, requirements in facts.requirements.items():
                    name = key.rsplit(".", 1)[-1]
                    by_name.setdefault(name, []).extend((path, r) for r in requirements)
            self._requirements_by_name = by_name
        return self._requirements_by_name.get(function, [])

    # -- conventions -----------------------------------------------------------------------

    def resolved_bindings(
        self, path: str, role: str, bindings: Iterable[RoleFact] | None = None
    ) -> list[Resolved]:
        facts = self.files.get(path)
        if bindings is None:
            bindings = facts.bindings if facts is not None else ()
        return [
            r for b in bindings if b.role == role for s in b.sources for r in self.resolve(s, path)
        ]

    def convention(
        self, path: str, role: str, bindings: Iterable[RoleFact] | None = None
    ) -> Convention | None:
        """``role``'s dtype in the file ``path`` (whose role bindings are ``bindings``, when
        the caller has them fresher than the project's facts) and why."""
        configured = self.config.swa_dtype_for(role)
        if configured != AUTO:
            why = f"`swa-loc-dtype` sets torch.{configured} for {_noun(role)}"
            return Convention(configured, why, known=False)
        items = self.resolved_bindings(path, role, bindings)
        levels: list[tuple[str, list[Resolved]]] = [
            ("file", [r for r in items if r.kind == CAST] + self._asserted(path, role))
        ]
        if role == WRITE:
            levels.append(("project", self.translation() + self._store_requirements()))
        else:
            levels.append(("file", [r for r in items if r.kind in (ALLOCATION, DEFAULT)]))
            levels.append(("project", self._project_casts(role)))
        for scope, evidence in levels:
            first = _unanimous(evidence)
            if first is not None:
                return Convention(first.dtype, _why(scope, first, _noun(role)))
        if any(evidence for _, evidence in levels):
            return None  # the code holds both dtypes for the role: no one convention
        return Convention(
            DEFAULT_DTYPE,
            f"{_noun(role)} are torch.{DEFAULT_DTYPE} unless the project shows otherwise "
            "(the seed design; no translation, cast or assert here says otherwise)",
            known=False,
        )

    def _asserted(self, path: str, role: str) -> list[Resolved]:
        facts = self.files.get(path)
        if facts is None:
            return []
        found = []
        for key, requirements in facts.requirements.items():
            for r in requirements:
                if len(r.dtypes) == 1 and role_of(r.param, self.names) == role:
                    found.append(
                        Resolved(next(iter(r.dtypes)), ASSERTED, f"{path}:{r.row}, `{key}()`")
                    )
        return found

    def _store_requirements(self) -> list[Resolved]:
        """What the KV stores (``kv-write-methods``) assert on their SWA locations."""
        found = []
        for method in self.config.kv_write_methods:
            for path, r in self.requirements_of(method):
                if len(r.dtypes) == 1 and role_of(r.param, self.names) == WRITE:
                    found.append(
                        Resolved(next(iter(r.dtypes)), ASSERTED, f"{path}:{r.row}, `{method}()`")
                    )
        return found

    def _project_casts(self, role: str) -> list[Resolved]:
        return [
            r for path in self.files for r in self.resolved_bindings(path, role) if r.kind == CAST
        ]

    def slot_takes(
        self, path: str, role: str, slot: str, dtype: str, bindings: Iterable[RoleFact]
    ) -> bool:
        """Whether the consumer of ``slot`` is known to take ``dtype``: the file binds
        that slot to a value of it, or some file binds it to a deliberate one (a
        translation, a cast)."""
        for b in bindings:
            if (
                b.role == role
                and b.slot == slot
                and any(r.dtype == dtype for s in b.sources for r in self.resolve(s, path))
            ):
                return True
        return any(other != path for other in self._deliberate_binders(role, slot, dtype))

    def _deliberate_binders(self, role: str, slot: str, dtype: str) -> set[str]:
        """The files binding ``slot`` (in ``role``) to a deliberate value of ``dtype``:
        indexed once per project, not searched per finding (a search of every file for
        each finding made an audit of N flagged files quadratic: 20,000 took hours)."""
        if self._deliberate is None:
            self._deliberate = {}
            for path, facts in self.files.items():
                for b in facts.bindings:
                    for s in b.sources:
                        for r in self.resolve(s, path):
                            if r.kind in _DELIBERATE:
                                key = (b.role, b.slot, r.dtype)
                                self._deliberate.setdefault(key, set()).add(path)
        return self._deliberate.get((role, slot, dtype), set())
