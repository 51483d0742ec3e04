"""What an SWA-space value is for, read off its name; and which values are full-pool side.

An SWA location plays one of two roles (I3), and each role has its own dtype convention:

* ``write``: a KV store's scatter target, the slots a forward writes its K/V into
  (``out_cache_loc_swa``, ``swa_out_cache_loc``, ``swa_loc=`` of ``KVWriteLoc``): a name
  that matches ``swa-loc-pattern`` and holds a location word (``loc``/``locs``,
  ``slot``/``slots``);
* ``page-table``: what attention kernels read (``swa_page_table``,
  ``window_kv_indices``, ``swa_kv_indices``): a name that matches ``swa-loc-pattern``
  with ``indices``/``index``, or that has the word ``swa`` or ``window`` with
  ``page``/``block`` and ``table``, or ``window`` with ``indices``.

Names with ``mapping`` are tables, and names with the word ``full`` are full-pool values,
in either role. Full-pool values (I9) are ``out_cache_loc``, ``req_to_token`` pages, the
full ``page_table``, and names with ``full`` and a location word (``full_loc``,
``window_kv_indices_full``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from swacheck.triggers import Trigger, all_of, word

if TYPE_CHECKING:
    from swacheck.analysis.names import Names

WRITE = "write"
PAGE_TABLE = "page-table"

_LOC_WORDS = frozenset({"loc", "locs", "slot", "slots"})
_INDEX_WORDS = frozenset({"indices", "index"})
_TABLE_KINDS = frozenset({"page", "block"})
# Full-pool values by their whole name: the batch's write locations, the request pages
# and the page table built from them.
_FULL_NAMES = frozenset({"out_cache_loc", "req_to_token", "page_table"})


# Text every SWA role's name holds (default ``swa-loc-pattern``), for a prefilter: the
# word ``swa``, or the word ``window`` with an index or table word (``window_kv_indices``,
# ``window_page_table``; not ``window_size``, nor a GUI's window).
ROLE_NAME_TRIGGERS: frozenset[Trigger] = frozenset(
    {
        word("swa"),
        all_of(
            {word("window")},
            {"_index", "index_", "_indices", "indices_", "_table", "table_"},
        ),
    }
)


def words(name: str) -> frozenset[str]:
    return frozenset(w for w in name.lower().split("_") if w)


def role_of(name: str, names: Names) -> str | None:
    """``write``, ``page-table`` or ``None`` (not an SWA location) for a name."""
    found = words(name)
    if "mapping" in name.lower() or "full" in found:
        return None
    if names.is_swa_loc(name):
        return WRITE if found & _LOC_WORDS else PAGE_TABLE
    swa_space = "swa" in found or "window" in found
    if swa_space and "table" in found and found & _TABLE_KINDS:
        return PAGE_TABLE
    if "window" in found and found & _INDEX_WORDS:
        return PAGE_TABLE
    return None


def is_translation_table(name: str, names: Names) -> bool:
    """The full->SWA table by name: a configured mapping attribute, or a name that says
    so whatever a kernel or a local calls it (``full_to_swa``, ``swa_mapping``,
    ``full_to_swa_mapping``; not ``full_to_swa_loc``, a location)."""
    if names.is_mapping(name):
        return True
    found = words(name)
    if found & _LOC_WORDS:
        return False
    return "full_to_swa" in name.lower() or {"swa", "mapping"} <= found


def is_full_side_name(name: str) -> bool:
    """``out_cache_loc``, ``req_to_token``, ``page_table``; ``full_loc``, ``full_indices``."""
    if name.lower() in _FULL_NAMES:
        return True
    found = words(name)
    if "mapping" in name.lower() or "swa" in found:  # the table, an SWA value
        return False
    return "full" in found and bool(found & (_LOC_WORDS | _INDEX_WORDS | {"table"}))
