"""Places in the source as facts and findings hold them: which fields of a file's facts
are positions (rows, columns), and how a finding names a place in another file.

A digest of a file's facts that leaves them out (:func:`swacheck.engine.cache.
shape_digest`) tells an edit that only moved code (a line inserted above it) from one
that changed what the code does: other files' findings depend on the second kind only,
so the first re-checks the edited file alone. A position left unmarked costs speed only
(the digest then changes with every shift); a field marked that is not a position would
hide a change, so mark positions and nothing else.
"""

from __future__ import annotations

from dataclasses import Field, field
from types import MappingProxyType
from typing import Any

_KEY = "swacheck.position"
_MARK = MappingProxyType({_KEY: True})


def position(**kwargs: Any) -> Any:
    """A dataclass field holding a row or a column (or a tuple of them)."""
    return field(metadata=_MARK, **kwargs)


def is_position(f: Field[Any]) -> bool:
    return bool(f.metadata.get(_KEY))


def cite(path: str, row: int, here: str, within: str = "") -> str:
    """A place as a finding's text names it: ``path:row`` in the reported file ``here``,
    and in another file its path alone, so that a file's findings depend on what other
    files' code does, not on the rows it falls on (``within``: the function, where
    known, named either way)."""
    where = f"{path}:{row}" if path == here and row else path
    return f"{where} in {within}" if within else where
