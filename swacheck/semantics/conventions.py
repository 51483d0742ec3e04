"""Each SWA role's dtype convention, per file and per project (I3 by role).

``swa-loc-dtype = "auto"`` (the default) reads each role's convention off the code, the
nearest evidence first:

* ``write`` (the KV stores' scatter targets): the file's own casts of its write
  locations (a cast is a choice made for a consumer: ``translate(loc).to(torch.int32)``
  before a KV store of its own) or its asserts on them; else what the project's
  translation returns (the producer every path hands to the KV stores) and what its KV
  stores assert; else int32, the design's dtype where nothing says otherwise;
* ``page-table`` (what kernels read; kernels differ per backend, so the file decides
  first): the file's casts or asserts; else its own allocations; else the project's
  casts; else int32.

A level whose evidence disagrees with itself decides nothing; the next one does. Where no
level decides and one disagreed (translations returning both dtypes, as 0.5.16's unified
pool beside the SWA pool), the role has no convention and nothing is reported against
one. ``swa-loc-dtype`` set for a role replaces the inference.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from swacheck.places import cite
from swacheck.semantics.dtypes import (
    ALLOCATION,
    ASSERTED,
    CAST,
    DEFAULT,
    TRANSLATION,
    Decision,
    Dtypes,
    asserted_parameters,
)
from swacheck.semantics.function import BIND
from swacheck.semantics.model import WRITE, Era, words
from swacheck.semantics.module import ModuleFacts
from swacheck.semantics.project import Function
from swacheck.semantics.roles import project_roles
from swacheck.semantics.uses import Use, role_uses, target_name
from swacheck.semantics.values import Ctx

DEFAULT_DTYPE = "int32"
INTEGERS = frozenset({"int32", "int64"})


@dataclass(frozen=True)
class Convention:
    """A role's dtype for a file, and why (a clause of the message). ``known``: read off
    code that consumes or produces the role's values, not configured nor the default."""

    dtype: str
    why: str
    known: bool = True


@dataclass(frozen=True)
class Evidence:
    dtype: str
    kind: str
    path: str
    within: str  # the function or method, as a message names it
    row: int = 0  # the value's, where it is one (0: the function's)

    @property
    def place(self) -> tuple[str, int]:
        return self.path, self.row

    def cited(self, here: str) -> str:
        return cite(self.path, self.row, here, self.within)


def noun(role: str) -> str:
    return "SWA write locations" if role == WRITE else "SWA page tables and window indices"


class Conventions:
    """The conventions of one audit (built once per analysis and configuration)."""

    def __init__(self, dtypes: Dtypes, config: object) -> None:
        self.dtypes = dtypes
        self.values = dtypes.values
        self.project = dtypes.project
        self.model = dtypes.model
        self.config = config
        self._uses: dict[str, list[tuple[Function, Use]]] = {}
        self._conventions: dict[
            tuple[str, str], Convention | list[tuple[str, list[Evidence]]] | None
        ] = {}
        self._translation: list[Evidence] | None = None
        self._casts: dict[str, list[Evidence]] = {}
        self._slots: dict[tuple[str, str], list[tuple[str, str, str]]] | None = None

    def uses(self, module: ModuleFacts) -> list[tuple[Function, Use]]:
        """The role uses of every analysed function of ``module`` (memoised). Only the
        functions that may have one are read (:mod:`~swacheck.semantics.roles`): the project's
        casts and bindings are every file's uses, and most files have none."""
        found = self._uses.get(module.module)
        if found is None:
            scanned = project_roles(self.values).functions
            found = self._uses[module.module] = [
                (function, use)
                for function in self._functions(module)
                if function.qual in scanned
                for use in role_uses(function, self.values)
            ]
        return found

    def _functions(self, module: ModuleFacts) -> Iterable[Function]:
        for key, facts in module.functions.items():
            if facts.analysed:
                found = self.project.functions.get(f"{module.module}.{key}")
                if found is not None:
                    yield found
        top = self.project.functions.get(f"{module.module}.<module>")
        if top is not None:
            yield top

    def decisions(self, function: Function, use: Use) -> tuple[Decision, ...]:
        """Every dtype the use's value may have (a float one too: an index buffer made
        by a factory left at its default dtype)."""
        return self.dtypes.of(use.value, Ctx(function))

    # -- evidence -----------------------------------------------------------------------

    def _file(self, module: ModuleFacts, role: str, kinds: frozenset[str]) -> list[Evidence]:
        out = []
        for function, use in self.uses(module):
            if use.role != role:
                continue
            for d in self.decisions(function, use):
                # an allocation is evidence where its dtype is written there, not taken
                # from another value (``dtype=x.dtype``) nor left to the factory's default
                # (``torch.full(shape, 0)``: nobody chose it)
                if d.dtype not in INTEGERS or d.kind == DEFAULT:
                    continue
                if d.kind in kinds and (d.literal or d.kind != ALLOCATION):
                    out.append(_evidence(d.dtype, d.kind, function, use.place.line))
        if role != WRITE and ALLOCATION in kinds:
            out += self._full_tables(module)
        if ASSERTED in kinds:
            for function in self._functions(module):
                for param, dtype in asserted_parameters(function.facts).items():
                    if dtype in INTEGERS and self.model.swa_role(param) == role:
                        out.append(_evidence(dtype, ASSERTED, function))
        return out

    def _full_tables(self, module: ModuleFacts) -> list[Evidence]:
        """The file's full page tables' allocations: its kernels read both kinds with one
        dtype (a backend's `page_table` and `swa_page_table`)."""
        out = []
        for function in self._functions(module):
            for event in function.facts.events:
                name = target_name(event.target) if event.kind == BIND else None
                if name is None or event.value is None:
                    continue
                found = words(name)
                if "swa" in found or "table" not in found or not found & {"page", "block"}:
                    continue
                for d in self.dtypes.of(event.value, Ctx(function)):
                    if d.kind == ALLOCATION and d.literal and d.dtype in INTEGERS:
                        out.append(_evidence(d.dtype, ALLOCATION, function, event.span.line))
        return out

    def translation(self) -> list[Evidence]:
        """What the project's translate methods return."""
        if self._translation is None:
            self._translation = []
            found = []
            for function in self.dtypes.translate_methods():
                for d in self.dtypes.of(function.facts.returns, Ctx(function)):
                    if d.dtype in INTEGERS:
                        found.append(_evidence(d.dtype, TRANSLATION, function))
            self._translation = found
        return self._translation

    def _stores(self) -> list[Evidence]:
        """What the KV stores (``kv-write-methods``) assert on their SWA write locations."""
        out = []
        for method in getattr(self.config, "kv_write_methods", ()):
            for function in self.project.methods_named(method):
                for param, dtype in asserted_parameters(function.facts).items():
                    if dtype in INTEGERS and self.model.swa_role(param) == WRITE:
                        out.append(_evidence(dtype, ASSERTED, function))
        return out

    def _project_casts(self, role: str) -> list[Evidence]:
        """Every file's casts for ``role`` (memoised: each file's convention asks)."""
        found = self._casts.get(role)
        if found is None:
            found = self._casts[role] = [
                e
                for module in self.project.modules.values()
                for e in self._file(module, role, frozenset({CAST}))
            ]
        return found

    # -- conventions ---------------------------------------------------------------------

    def convention(
        self, module: ModuleFacts, role: str, judged: tuple[str, int] | None = None
    ) -> Convention | None:
        """``role``'s convention in ``module``; ``judged``: the place (path, row) of
        the value being judged, whose own dtype is no evidence of the convention it is
        judged by (one int64 page table among the file's int32 ones is the odd one out,
        not a reason to find no convention)."""
        key = (module.module, role)
        if key not in self._conventions:
            self._conventions[key] = self._convention(module, role)
        found = self._conventions[key]
        if not isinstance(found, list):
            return found
        return self._from_levels(role, found, judged, module.path)

    def _convention(
        self, module: ModuleFacts, role: str
    ) -> Convention | list[tuple[str, list[Evidence]]] | None:
        """A convention the configuration, the era or the model sets, else the levels
        of evidence it is read from (nearest first)."""
        configured = _configured(self.config, role)
        if configured is not None:
            why = f"`swa-loc-dtype` sets torch.{configured} for {noun(role)}"
            return Convention(configured, why, known=False)
        era = self.era() if role == WRITE else None
        if era is not None:
            why = f"{noun(role)} are torch.{era.write_dtype} in {era.name}"
            return Convention(era.write_dtype, why)
        named = sorted(
            (loc.name, loc.dtype)
            for loc in self.model.locations.values()
            if loc.role == role and loc.dtype
        )
        if named and len({dtype for _, dtype in named}) == 1:
            names = ", ".join(f"`{name}`" for name, _ in named)
            why = f"{self.model.engines[0]}'s kernels take torch.{named[0][1]} for {names}"
            return Convention(named[0][1], why)
        levels: list[tuple[str, list[Evidence]]] = [
            ("file", self._file(module, role, frozenset({CAST, ASSERTED})))
        ]
        if role == WRITE:
            levels.append(("project", self.translation() + self._stores()))
        else:
            levels.append(("file", self._file(module, role, frozenset({ALLOCATION}))))
            levels.append(("project", self._project_casts(role)))
        return levels

    @staticmethod
    def _from_levels(
        role: str,
        levels: list[tuple[str, list[Evidence]]],
        judged: tuple[str, int] | None,
        here: str,
    ) -> Convention | None:
        held = [(scope, _without(found, judged)) for scope, found in levels]
        for scope, evidence in held:
            if len({e.dtype for e in evidence}) == 1:
                why = _why(scope, evidence[0], noun(role), here)
                return Convention(evidence[0].dtype, why)
        if any(evidence for _, evidence in held):
            return None  # the code holds both dtypes for the role: no one convention
        return Convention(
            DEFAULT_DTYPE,
            f"{noun(role)} are torch.{DEFAULT_DTYPE} unless the project shows otherwise "
            "(the seed design; no translation, cast or assert here says otherwise)",
            known=False,
        )

    def era(self) -> Era | None:
        """The model's era this project is of, where one applies (memoised)."""
        if not hasattr(self, "_era"):
            self._era = next(
                (
                    era
                    for era in self.model.eras
                    if any(
                        not f.facts.trivial
                        for name in self.model.names(era.defines)
                        for f in self.project.functions_named(name)
                    )
                ),
                None,
            )
        return self._era

    def checks_translations(self) -> Convention | None:
        """The write convention a translation's own result is checked against: one the
        configuration or the era sets (else the translation sets it)."""
        if _configured(self.config, WRITE) is None and self.era() is None:
            return None
        return self._convention_for_translations()

    def _convention_for_translations(self) -> Convention | None:
        configured = _configured(self.config, WRITE)
        if configured is not None:
            return Convention(
                configured,
                f"`swa-loc-dtype` sets torch.{configured} for {noun(WRITE)}",
                known=False,
            )
        era = self.era()
        assert era is not None
        return Convention(
            era.write_dtype, f"{noun(WRITE)} are torch.{era.write_dtype} in {era.name}"
        )

    def slot_takes(self, module: ModuleFacts, role: str, slot: str, dtype: str) -> bool:
        """Whether the consumer of ``slot`` is known to take ``dtype``: this file binds
        that slot to a value of it, or some file binds it to a deliberate one (a
        translation, a cast)."""
        return any(
            found == dtype and (where == module.module or kind in (TRANSLATION, CAST))
            for where, found, kind in self._bindings().get((role, slot), ())
        )

    def _bindings(self) -> dict[tuple[str, str], list[tuple[str, str, str]]]:
        """Every file's bindings of each slot, by role and slot: (module, dtype, how).
        Indexed once per audit; searching every file for each flagged one made N
        flagged files cost N² resolutions."""
        if self._slots is None:
            self._slots = {}
            for other in self.project.modules.values():
                for function, use in self.uses(other):
                    entries = self._slots.setdefault((use.role, use.slot), [])
                    for d in self.decisions(function, use):
                        entries.append((other.module, d.dtype, d.kind))
        return self._slots


def _without(evidence: list[Evidence], judged: tuple[str, int] | None) -> list[Evidence]:
    """``evidence`` without the judged value's own, where the rest agree and are two or
    more (it is the odd one out); one against one stays a disagreement."""
    rest = [e for e in evidence if e.place != judged]
    if len(rest) < len(evidence) and len(rest) >= 2 and len({e.dtype for e in rest}) == 1:
        return rest
    return evidence


def _evidence(dtype: str, kind: str, function: Function, row: int = 0) -> Evidence:
    return Evidence(dtype, kind, function.module.path, f"`{function.facts.key}()`", row)


def _why(scope: str, evidence: Evidence, what: str, here: str) -> str:
    dtype = f"torch.{evidence.dtype}"
    if scope == "file":
        verb = {ASSERTED: "asserts", ALLOCATION: "allocates"}.get(evidence.kind, "casts")
        return f"this file {verb} its {what} as {dtype} ({evidence.cited(here)})"
    how = {
        TRANSLATION: f"its translation returns {dtype}",
        ASSERTED: f"its KV store asserts {dtype}",
    }.get(evidence.kind, f"it casts them to {dtype}")
    return f"{what} are {dtype} in this project: {how} ({evidence.cited(here)})"


def _configured(config: object, role: str) -> str | None:
    dtype = config.swa_dtype_for(role) if hasattr(config, "swa_dtype_for") else "auto"
    return None if dtype == "auto" else dtype
