"""Duck-typed recognition of what an object is, from the names the linter is configured with.

Nothing here looks at a class name or a base class: a foreign engine's pool is a pool
because it carries a mapping attribute and a translate method.
"""

from __future__ import annotations

from swacheck.config import Config

from .model import Role

GRAPH_RUNNER_METHODS = ("populate_from_forward_batch", "replay", "capture")
BACKEND_METHODS = ("init_forward_metadata", "update_sliding_window_buffer")


def _has_method(obj: object, name: str) -> bool:
    return callable(getattr(obj, name, None))


def first_present(obj: object, names: tuple[str, ...], *, method: bool) -> str | None:
    for name in names:
        if _has_method(obj, name) if method else hasattr(obj, name):
            return name
    return None


def is_pool(obj: object, config: Config) -> bool:
    return (
        first_present(obj, config.mapping_attributes, method=False) is not None
        and first_present(obj, config.translate_methods, method=True) is not None
    )


def detect_role(obj: object, config: Config) -> Role | None:
    """The role ``obj`` plays, or ``None`` if it looks like none of them."""
    has_mapping = first_present(obj, config.mapping_attributes, method=False) is not None
    if has_mapping and first_present(obj, config.translate_methods, method=True):
        return Role.POOL
    if has_mapping:
        return Role.ALLOCATOR
    if _has_method(obj, "replay") and (
        _has_method(obj, "populate_from_forward_batch") or _has_method(obj, "capture")
    ):
        return Role.GRAPH_RUNNER
    if any(_has_method(obj, name) for name in BACKEND_METHODS):
        return Role.BACKEND
    if _has_method(obj, "forward") and any(
        is_pool(value, config) for value in vars(obj).values() if not isinstance(value, type)
    ):
        return Role.MODEL_RUNNER
    return None
