"""Instance-level method patching that can be undone.

The sanitizer never edits a class: it shadows a bound method with a wrapper in the
instance's ``__dict__``, so the reference implementation and foreign engine classes
are wrapped the same way, other instances are untouched, and undoing restores the
exact previous state. Classes named for wrap-on-construction get their ``__init__``
patched, again reversibly.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

_MISSING = object()

# Marks a wrapper with what it wraps, so the original can be found (``original_of``).
WRAPPED_ATTR = "__swacheck_wrapped__"


class WrapError(TypeError):
    """The object cannot carry instance-level wrappers (no ``__dict__``, e.g. ``__slots__``)."""


def public_methods(obj: object, skip_modules: tuple[str, ...] = ("torch.",)) -> list[str]:
    """Names of the plain methods an instance's class defines (not properties, not dunder,
    not inherited from torch such as ``nn.Module.to``)."""
    names = []
    for name in dir(type(obj)):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(type(obj), name, None)
        if not inspect.isfunction(attr):
            continue
        if (attr.__module__ or "").startswith(skip_modules):
            continue
        names.append(name)
    return names


class Wrapped:
    """One wrapper in place. It can step aside (what it shadowed shows through, so calls
    skip it entirely) and step back in; neither happens over an attribute that someone
    bound after it (theirs wins: undoing leaves it, and the wrapper stays as it was)."""

    __slots__ = ("name", "namespace", "previous", "wrapper")

    def __init__(
        self, namespace: dict[str, Any], name: str, wrapper: Callable[..., Any], previous: Any
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.wrapper = wrapper
        self.previous = previous

    def step_aside(self) -> None:
        if self.namespace.get(self.name) is not self.wrapper:
            return  # aside already, or re-bound after us
        if self.previous is _MISSING:
            del self.namespace[self.name]
        else:
            self.namespace[self.name] = self.previous

    def step_in(self) -> None:
        if self.namespace.get(self.name, _MISSING) is self.previous:
            self.namespace[self.name] = self.wrapper


class Patcher:
    """Applies wrappers and remembers how to take each one off, last first."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def wrap_method(
        self, obj: object, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
    ) -> Wrapped:
        """Shadow ``obj.name`` with ``make(current_bound_method)``; wrappers stack."""
        try:
            namespace = vars(obj)
        except TypeError:
            raise WrapError(
                f"cannot wrap {type(obj).__qualname__}: instances have no __dict__"
            ) from None
        current = getattr(obj, name)
        previous = namespace.get(name, _MISSING)
        wrapper = make(current)
        if inspect.isfunction(wrapper):
            functools.update_wrapper(wrapper, current)
            setattr(wrapper, WRAPPED_ATTR, current)
        namespace[name] = wrapper
        wrapped = Wrapped(namespace, name, wrapper, previous)
        self._undo.append(wrapped.step_aside)
        return wrapped

    def hook_init(self, cls: type, on_new: Callable[[object], None]) -> None:
        """Call ``on_new(instance)`` after every construction of ``cls`` or a subclass."""
        previous = cls.__dict__.get("__init__", _MISSING)
        original = cls.__init__

        @functools.wraps(original)
        def __init__(self: object, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            on_new(self)

        cls.__init__ = __init__  # type: ignore[misc]

        def undo() -> None:
            if previous is _MISSING:
                del cls.__init__  # type: ignore[misc]
            else:
                cls.__init__ = previous  # type: ignore[misc]

        self._undo.append(undo)

    def undo_all(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __len__(self) -> int:
        """Wrappers and hooks applied and not yet undone."""
        return len(self._undo)


def original_of(method: Callable[..., Any]) -> Callable[..., Any]:
    """The method under every swacheck wrapper."""
    while hasattr(method, WRAPPED_ATTR):
        method = getattr(method, WRAPPED_ATTR)
    return method
