"""The ``inject_bug=`` switches: one name per historical SGLang bug (see DESIGN.md).

Each switch re-creates its seed bug in the real code path of this package; the
owning module says where. A single ``inject_bug: str | None`` travels from the
model runner into the pool, the attention backend and the graph runner.
"""

from __future__ import annotations

BUG_NAMES: tuple[str, ...] = (
    "padding-not-zeroed",  # graph_runner: the padded SWA loc tail keeps stale slots (padding fix)
    "swa-loc-int64",  # graph_runner + pool: SWA locations in int64 (#23552 review)
    "missing-invalidation",  # pool.free_swa: mapping write without invalidation (#25824)
    "storage-pointer-key",  # pool: cache keyed on untyped_storage().data_ptr() (#25824)
    "capture-without-invalidation",  # graph_runner.run_once: warm-up pollutes capture (#25824)
    "invalidate-after-dispatch",  # model_runner.forward: only eager invalidates (#26152)
    "fresh-translation-without-flush",  # update_sliding_window_buffer unbracketed (#26152)
)


def validate_bug(name: str | None) -> str | None:
    """Return ``name`` if it is ``None`` or a known switch; raise ``ValueError`` otherwise."""
    if name is None or name in BUG_NAMES:
        return name
    raise ValueError(f"unknown inject_bug {name!r}; valid names: {', '.join(BUG_NAMES)}")
