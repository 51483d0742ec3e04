"""Duck-typed recognition of what an object is, and of how a pool caches translations,
from the names the configuration gives (SGLang's by default).

Nothing here looks at a class name or a base class: a foreign engine's pool is a pool
because it carries a mapping attribute and a translate method of its own; an allocator
carries the mapping and hands translations to a pool it holds; a graph runner has a
replay method (``replay``, ``execute``) and a capture or populate method; an input
holder (a runner's static buffers) has only a populate method.
"""

from __future__ import annotations

from swacheck.config import Config

from .bytecode import class_functions, is_trivial, self_access
from .model import ATTRIBUTE, MEMOISING, NO_CACHE, CacheModel, Role

BACKEND_METHODS = ("init_forward_metadata", "update_sliding_window_buffer")
FORWARD_METHOD = "forward"


def _has_method(obj: object, name: str) -> bool:
    return callable(getattr(obj, name, None))


def first_present(obj: object, names: tuple[str, ...], *, method: bool) -> str | None:
    for name in names:
        if _has_method(obj, name) if method else hasattr(obj, name):
            return name
    return None


def is_pool(obj: object, config: Config) -> bool:
    """A mapping attribute and a translate method of its own (not one that hands the
    translation to a pool it holds: that is an allocator)."""
    return (
        first_present(obj, config.mapping_attributes, method=False) is not None
        and first_present(obj, config.translate_methods, method=True) is not None
        and held_pool(obj, config) is None
    )


def held_pool(obj: object, config: Config) -> object | None:
    """The pool ``obj`` holds and shares its mapping with, if any (an allocator's
    ``_kvcache``): an attribute value with the mapping and a translate method whose
    mapping is the very tensor ``obj`` holds, or either's is not set yet."""
    namespace = getattr(obj, "__dict__", None)
    if namespace is None:
        return None
    mine = _mapping(obj, config)
    for value in namespace.values():
        if value is obj or isinstance(value, type) or not hasattr(value, "__dict__"):
            continue
        if first_present(value, config.translate_methods, method=True) is None:
            continue
        if first_present(value, config.mapping_attributes, method=False) is None:
            continue
        theirs = _mapping(value, config)
        if theirs is mine or theirs is None or mine is None:
            return value
    return None


def _mapping(obj: object, config: Config) -> object | None:
    name = first_present(obj, config.mapping_attributes, method=False)
    return None if name is None else getattr(obj, name)


def role_of_class(cls: type, config: Config) -> Role | None:
    """The role an instance of ``cls`` plays when its methods alone tell (graph runners,
    input holders, attention backends): known before its ``__init__`` runs."""
    if first_present(cls, config.replay_methods, method=True) and (
        first_present(cls, config.capture_methods, method=True)
        or first_present(cls, config.populate_methods, method=True)
    ):
        return Role.GRAPH_RUNNER
    if first_present(cls, config.populate_methods, method=True):
        return Role.INPUT_BUFFERS
    if any(_has_method(cls, name) for name in BACKEND_METHODS):
        return Role.BACKEND
    return None


def detect_role(obj: object, config: Config) -> Role | None:
    """The role ``obj`` plays, or ``None`` if it looks like none of them."""
    if first_present(obj, config.mapping_attributes, method=False) is not None:
        if first_present(obj, config.translate_methods, method=True) and (
            held_pool(obj, config) is None
        ):
            return Role.POOL
        return Role.ALLOCATOR
    by_methods = role_of_class(type(obj), config)
    if by_methods is not None:
        return by_methods
    namespace = getattr(obj, "__dict__", {})
    if _has_method(obj, FORWARD_METHOD) and any(
        is_pool(value, config) for value in namespace.values() if not isinstance(value, type)
    ):
        return Role.MODEL_RUNNER
    return None


def describe_roles(config: Config) -> str:
    """What each role is recognised by, for an error or a warning."""

    def names(values: tuple[str, ...]) -> str:
        return "/".join(values)

    return (
        f"a pool (attribute {names(config.mapping_attributes)} and method "
        f"{names(config.translate_methods)}), an allocator (the attribute without a "
        f"translate method of its own), a graph runner ({names(config.replay_methods)} "
        f"with {names(config.capture_methods)} or {names(config.populate_methods)}), "
        f"its input buffers ({names(config.populate_methods)}), an attention backend "
        f"({names(BACKEND_METHODS)}) or a model runner ({FORWARD_METHOD}, holding a pool)"
    )


def detect_cache_model(pool: object, config: Config, declared: str | None = None) -> CacheModel:
    """How ``pool`` caches translations: ``declared`` (``none``/``memoising``/``attribute``)
    or the ``cache-model`` configuration if either says, else what its class shows:

    - memoising: its translate method assigns to its own attributes, or (when it keeps
      no attribute cache) the class defines an invalidation method that does something;
    - attribute cache: an attribute named in ``cache-attributes`` that the object has,
      or one a method other than translate assigns while calling translate
      (``self.cached_loc = self.translate_loc_from_full_to_swa(loc)``).

    Only what a cache does is checked, so a pool whose translate returns a fresh tensor
    every call and keeps nothing gets no cache checks."""
    choice = declared or (None if config.cache_model == "auto" else config.cache_model)
    attributes = _attribute_caches(pool, config)
    if choice == NO_CACHE:
        return CacheModel(False, (), "declared")
    if choice == MEMOISING:
        return CacheModel(True, (), "declared")
    if choice == ATTRIBUTE:
        return CacheModel(False, attributes or config.cache_attributes, "declared")
    cls = type(pool)
    translate = next(
        (getattr(cls, n) for n in config.translate_methods if callable(getattr(cls, n, None))),
        None,
    )
    if translate is not None and self_access(translate).stores:
        return CacheModel(
            True,
            attributes,
            f"{translate.__name__} assigns {sorted(self_access(translate).stores)}",
        )
    if attributes:
        return CacheModel(False, attributes, "a method keeps a translation in an attribute")
    invalidate = next(
        (getattr(cls, n) for n in config.invalidate_methods if callable(getattr(cls, n, None))),
        None,
    )
    if invalidate is not None and not is_trivial(invalidate):
        return CacheModel(True, (), f"defines {invalidate.__name__}")
    return CacheModel(False, (), "translate keeps nothing")


def _attribute_caches(pool: object, config: Config) -> tuple[str, ...]:
    """Attributes ``pool`` keeps translations in (see :func:`detect_cache_model`)."""
    namespace = getattr(pool, "__dict__", {})
    found = [name for name in config.cache_attributes if name in namespace]
    skip = {*config.translate_methods, *config.invalidate_methods}
    translate = set(config.translate_methods)
    for name, function in class_functions(type(pool)):
        if name in skip:
            continue
        access = self_access(function)
        if access.loads & translate:
            found += [
                a
                for a in sorted(access.stores)
                if a not in found and a not in config.mapping_attributes
            ]
    return tuple(found)


def readers(cls: type, attribute: str, config: Config) -> list[str]:
    """The methods of ``cls`` that read ``self.<attribute>`` (translate and invalidation
    methods aside)."""
    skip = {*config.translate_methods, *config.invalidate_methods}
    return [
        name
        for name, function in class_functions(cls)
        if name not in skip
        and not name.startswith("__")
        and attribute in self_access(function).loads
    ]
