"""Which functions of a project may hand an SWA location of a role on: read off the
functions' indexes, so a scan of the project for its role uses reads a few bodies.

A function has a role use (:func:`swacheck.semantics.uses.role_uses`) where it hands a
value to an SWA location named for a role (a binding, a fill, a dict entry, a keyword),
or calls a *carrier*: a function with a parameter that may reach such a location (one
named for a role, one it hands to such a location, one it hands to a carrier's such
parameter, by position or keyword, as :meth:`Values.callees` binds them). Calls are
resolved by name (:meth:`Project.callers`), so the functions found are a superset of
those with a role use, and a call whose name no carrier has runs none.
"""

from __future__ import annotations

from dataclasses import dataclass

from swacheck.semantics.model import Model
from swacheck.semantics.project import Project
from swacheck.semantics.values import Values


@dataclass(frozen=True)
class Roles:
    # The functions that may have a role use (qualified names).
    functions: frozenset[str]
    # Per carrier, the parameters that may reach a location of a role.
    carriers: dict[str, frozenset[str]]
    # The names the carriers are called by (``super().<name>`` through ``super()``).
    called: frozenset[str]


def project_roles(values: Values) -> Roles:
    """The :class:`Roles` of the project ``values`` reads (once per analysis)."""
    return values.once("roles", lambda: roles_of(values.project, values.model))


def roles_of(project: Project, model: Model) -> Roles:
    """The project's :class:`Roles` (its bodies stay unread)."""
    found: set[str] = set()
    carrying: dict[str, set[str]] = {}
    for qual, function in project.functions.items():
        named = {p for name, p in function.facts.index.slots if model.location_role(name)}
        if named:
            found.add(qual)
        named |= {p.lstrip("*") for p in function.facts.params if model.swa_role(p.lstrip("*"))}
        named -= {"", function.self_param}
        if named:
            carrying[qual] = named
    called: set[str] = set()
    todo = list(carrying)
    while todo:
        carrier = project.functions[todo.pop()]
        params = carrying[carrier.qual]
        slots = params | {str(i) for i, p in enumerate(carrier.facts.positional) if p in params}
        for name, caller in project.callers(carrier):
            called.add(name)
            found.add(caller.qual)
            handed = {p for n, slot, p in caller.facts.index.hands if n == name and slot in slots}
            if handed - carrying.get(caller.qual, set()):
                carrying.setdefault(caller.qual, set()).update(handed)
                todo.append(caller.qual)
    carriers = {qual: frozenset(params) for qual, params in carrying.items()}
    return Roles(frozenset(found), carriers, frozenset(called))
