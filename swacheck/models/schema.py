"""What an engine model may hold: the shape of ``swacheck/models/*.toml`` and of a
project's ``[tool.swacheck.model]``, checked before either is used.

Plain data and one checker, importing nothing of swacheck: the configuration checks a
project's table with it (a bad entry is a configuration error naming its key), the
model files are checked by a test, and :mod:`swacheck.semantics.model` reads both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SPACES = ("full", "swa")
ROLES = ("write", "page-table")
DTYPES = ("int32", "int64")

# A field: (type, required, the values it may take or None). Types: "str", "int",
# "bool", "strings" (a list of strings), "ints" (a list of integers), "regex".
_Field = tuple[str, bool, tuple[str, ...] | None]

# Sections holding a list of entries (``[[sources]]``): each entry's fields.
ENTRIES: dict[str, dict[str, _Field]] = {
    "sources": {
        "attribute": ("str", True, None),
        "space": ("str", True, SPACES),
        "role": ("str", False, ROLES),
        "table": ("bool", False, None),
    },
    "translators": {
        "method": ("str", True, None),
        "to": ("str", False, SPACES),
        "kind-argument": ("str", False, None),
        "kind-position": ("int", False, None),
        "default": ("str", False, SPACES),
        "role": ("str", False, ROLES),
        "of-receiver": ("bool", False, None),
    },
    "fills": {
        "method": ("str", True, None),
        "buffer": ("str", True, None),
        "kind-argument": ("str", False, None),
        "kind-position": ("int", False, None),
        "default": ("str", False, SPACES),
        "role": ("str", False, ROLES),
    },
    "pool-methods": {
        "method": ("str", True, None),
        "locations": ("ints", False, None),
        "keywords": ("strings", False, None),
    },
    "locations": {
        "name": ("str", True, None),
        "role": ("str", True, ROLES),
        "dtype": ("str", False, DTYPES),
    },
    "sinks": {
        "call": ("str", True, None),
        "argument": ("str", True, None),
        "position": ("int", False, None),
        "role": ("str", True, ROLES),
        "dtype": ("str", True, DTYPES),
    },
    "eras": {
        "name": ("str", True, None),
        "defines": ("str", True, None),
        "write-dtype": ("str", True, DTYPES),
    },
}
# Sections holding one table of named fields (``[padding]``).
TABLES: dict[str, dict[str, _Field]] = {
    "names": {"neutral-words": ("strings", False, None)},
    "modes": {
        "flag-pattern": ("regex", False, None),
        "classes": ("strings", False, None),
        "layer-tables": ("strings", False, None),
    },
    "padding": {
        "sentinel": ("int", False, None),
        "clamp-before-indexing": ("bool", False, None),
        "padded-objects": ("strings", False, None),
        "padded-parameters": ("strings", False, None),
    },
}
# Sections mapping any name to one of some values (``[dtypes] out_cache_loc = "int64"``).
MAPS: dict[str, tuple[str, ...]] = {"space-constants": SPACES, "dtypes": DTYPES}
# Which engine a model file describes: in swacheck's own files only (a project's
# ``[tool.swacheck.model]`` adds to the model of the engine its files belong to).
ENGINE_KEYS: dict[str, _Field] = {
    "engine": ("str", True, None),
    "packages": ("strings", True, None),
}


def model_problem(data: Mapping[str, Any], *, engine_file: bool = False) -> str | None:
    """The first problem of a model's table, as ``key: what is wrong``; ``None`` if it
    has the shape above. ``engine_file``: one of swacheck's model files (which says
    which engine it is), not a project's additions."""
    if not isinstance(data, Mapping):
        return f": expected a table, got {type(data).__name__}"
    known = [*ENTRIES, *TABLES, *MAPS, *(ENGINE_KEYS if engine_file else ())]
    for key, value in data.items():
        if key in ENTRIES:
            if not isinstance(value, list):
                return f"{key}: expected a list of tables ([[{key}]])"
            for n, entry in enumerate(value):
                found = _fields(f"{key}[{n}]", entry, ENTRIES[key])
                if found:
                    return found
        elif key in TABLES:
            found = _fields(key, value, TABLES[key])
            if found:
                return found
        elif key in MAPS:
            if not isinstance(value, Mapping):
                return f"{key}: expected a table of name = value"
            for name, item in value.items():
                found = _value(f"{key}.{name}", item, ("str", True, MAPS[key]))
                if found:
                    return found
        elif engine_file and key in ENGINE_KEYS:
            found = _value(key, value, ENGINE_KEYS[key])
            if found:
                return found
        else:
            return f"{key}: unknown model section (known: {', '.join(sorted(known))})"
    if engine_file:
        for key in ENGINE_KEYS:
            if key not in data:
                return f"{key}: missing"
    return None


def _fields(where: str, entry: Any, spec: Mapping[str, _Field]) -> str | None:
    if not isinstance(entry, Mapping):
        return f"{where}: expected a table, got {type(entry).__name__}"
    for name, value in entry.items():
        if name not in spec:
            return f"{where}.{name}: unknown field (known: {', '.join(spec)})"
        found = _value(f"{where}.{name}", value, spec[name])
        if found:
            return found
    for name, (_, required, _) in spec.items():
        if required and name not in entry:
            return f"{where}.{name}: missing"
    return None


def _value(where: str, value: Any, spec: _Field) -> str | None:
    kind, _, choices = spec
    if kind in ("str", "regex") and not isinstance(value, str):
        return f"{where}: expected a string, got {value!r}"
    if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        return f"{where}: expected an integer, got {value!r}"
    if kind == "bool" and not isinstance(value, bool):
        return f"{where}: expected true or false, got {value!r}"
    if kind in ("strings", "ints"):
        wanted = str if kind == "strings" else int
        if not isinstance(value, list) or any(
            not isinstance(item, wanted) or isinstance(item, bool) for item in value
        ):
            what = "strings" if kind == "strings" else "integers"
            return f"{where}: expected a list of {what}, got {value!r}"
    if kind == "regex":
        try:
            re.compile(value)
        except (re.error, RecursionError, OverflowError) as exc:
            return f"{where}: not a valid regular expression: {exc}"
    if choices is not None and value not in choices:
        return f"{where}: expected one of {', '.join(choices)}, got {value!r}"
    return None
