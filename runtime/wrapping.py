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
import keyword
import os
from collections.abc import Callable
from typing import Any

from .violations import hide_from_traceback

_MISSING = object()

_HERE = os.path.dirname(os.path.abspath(__file__))

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


def forwarding(
    original: Callable[..., Any], body: str, env: dict[str, Any]
) -> Callable[..., Any] | None:
    """A function taking exactly ``original``'s parameters, whose body is ``body`` (Python
    source, indented by four spaces), where ``CALL`` stands for the call of ``original``
    with the arguments received: a wrapper without the packing and unpacking of
    ``*args, **kwargs``, which is a third of what a small wrapper costs. The body's own
    names start with ``_sw_`` and come from ``env``. ``None`` if the signature cannot be
    read or spelled (then wrap the generic way).

    The code is compiled under a file name in this directory, so that the frames of the
    wrapper count as the sanitizer's own when a violation's call site is looked for."""
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        return None
    params: list[str] = []
    passed: list[str] = []
    namespace = {**env, "__tracebackhide__": hide_from_traceback}
    star = slash = False
    for index, p in enumerate(signature.parameters.values()):
        name = p.name
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_sw_"):
            return None
        default = ""
        if p.default is not p.empty:
            namespace[f"_sw_default_{index}"] = p.default
            default = f"=_sw_default_{index}"
        if p.kind is p.POSITIONAL_ONLY:
            slash = True
            params.append(name + default)
            passed.append(name)
            continue
        if slash:
            params.append("/")
            slash = False
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            params.append(name + default)
            passed.append(name)
        elif p.kind is p.VAR_POSITIONAL:
            star = True
            params.append("*" + name)
            passed.append("*" + name)
        elif p.kind is p.KEYWORD_ONLY:
            if not star:
                star = True
                params.append("*")
            params.append(name + default)
            passed.append(f"{name}={name}")
        else:  # VAR_KEYWORD
            params.append("**" + name)
            passed.append("**" + name)
    if slash:
        params.append("/")
    namespace["_sw_original"] = original
    call = f"_sw_original({', '.join(passed)})"
    source = f"def _sw_wrapper({', '.join(params)}):\n{body.replace('CALL', call)}"
    filename = os.path.join(_HERE, f"<wrapper of {_name(original)}>")
    exec(compile(source, filename, "exec"), namespace)
    return namespace["_sw_wrapper"]  # type: ignore[no-any-return]


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))


class Wrapped:
    """One wrapper in place. It can step aside (what it shadowed shows through, so calls
    skip it entirely) and step back in; neither happens over an attribute that someone
    bound after it (theirs wins: undoing leaves it, and the wrapper stays as it was)."""

    __slots__ = ("name", "namespace", "previous", "retired", "wrapper")

    def __init__(
        self, namespace: dict[str, Any], name: str, wrapper: Callable[..., Any], previous: Any
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.wrapper = wrapper
        self.previous = previous
        self.retired = False  # taken off for good (the sanitizer closed): never steps in again

    def step_aside(self) -> None:
        if self.namespace.get(self.name) is not self.wrapper:
            return  # aside already, or re-bound after us
        if self.previous is _MISSING:
            del self.namespace[self.name]
        else:
            self.namespace[self.name] = self.previous

    def step_in(self) -> None:
        if not self.retired and self.namespace.get(self.name, _MISSING) is self.previous:
            self.namespace[self.name] = self.wrapper

    def retire(self) -> None:
        """Step aside for good."""
        self.retired = True
        self.step_aside()


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
        self._undo.append(wrapped.retire)
        return wrapped

    def hook_init(
        self,
        cls: type,
        on_new: Callable[[object], None],
        before: Callable[[object], None] | None = None,
    ) -> None:
        """Call ``on_new(instance)`` after every construction of ``cls`` or a subclass, and
        ``before(instance)`` (if given) before its ``__init__`` runs."""
        previous = cls.__dict__.get("__init__", _MISSING)
        original = cls.__init__

        @functools.wraps(original)
        def __init__(self: object, *args: Any, **kwargs: Any) -> None:
            if before is not None:
                before(self)
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
