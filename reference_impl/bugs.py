"""The ``inject_bug=`` switches: one name per historical SGLang bug (see DESIGN.md).

Each switch re-creates its seed bug in the real code path of this package; the
owning module says where. A single ``inject_bug: str | None`` travels from the
model runner into the pool, the attention backend and the graph runner.
"""

from __future__ import annotations

# Each switch and the bug it re-creates (where, and the SGLang PR or review it comes from).
BUGS: dict[str, str] = {
    "padding-not-zeroed": "graph runner: a padded batch's SWA location tail keeps stale slots",
    "swa-loc-int64": "graph runner and pool: SWA locations in int64 (#23552 review)",
    "missing-invalidation": "pool.free_swa: a mapping write without invalidation (#25824)",
    "storage-pointer-key": "pool: translation cache keyed on untyped_storage().data_ptr() (#25824)",
    "capture-without-invalidation": "graph runner: a warm-up's cached translation is captured "
    "(#25824)",
    "invalidate-after-dispatch": "model runner: only the eager path invalidates (#26152)",
    "fresh-translation-without-flush": "attention backend: a fresh index tensor translated "
    "without flushing (#26152)",
}
BUG_NAMES: tuple[str, ...] = tuple(BUGS)


def validate_bug(name: str | None) -> str | None:
    """Return ``name`` if it is ``None`` or a known switch; raise ``ValueError`` otherwise."""
    if name is None or name in BUG_NAMES:
        return name
    raise ValueError(f"unknown inject_bug {name!r}; valid names: {', '.join(BUG_NAMES)}")
