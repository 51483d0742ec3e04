"""Type contracts: the tensor annotations on a watched object's methods, enforced by
typeguard while the sanitizer is on.

Annotations are jaxtyping tensor types (``Int32[Tensor, "n"]``); each call of an
annotated method is checked inside one jaxtyping dimension memo, so a shape named
``n`` must agree across arguments and result. A failure on an SWA location (an
argument whose name is one, or a translate method's result) of the wrong dtype is an
``swa-loc-dtype`` violation; any other failure is a programming error and raises
typeguard's ``TypeCheckError``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jaxtyping
import torch
from typeguard import TypeCheckError, check_type

from .violations import SWASanitizerError
from .wrapping import public_methods

if TYPE_CHECKING:
    from .sanitizer import Sanitizer

RETURN = "return"


def _is_tensor_hint(hint: object) -> bool:
    if isinstance(hint, type) and issubclass(hint, jaxtyping.AbstractArray):
        return True
    return any(_is_tensor_hint(arg) for arg in typing.get_args(hint))


def tensor_hints(fn: Callable[..., Any]) -> dict[str, object]:
    """The jaxtyping annotations of ``fn`` (parameters and ``return``); ``{}`` if none or
    if they cannot be resolved."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return {}
    return {name: hint for name, hint in hints.items() if _is_tensor_hint(hint)}


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__qualname__}"


def install_contracts(san: Sanitizer, obj: object) -> None:
    for name in public_methods(obj):
        function = inspect.getattr_static(type(obj), name)
        hints = tensor_hints(function)
        if hints:
            san.patcher.wrap_method(obj, name, _checker(san, name, hints))


def _fast_form(hint: object) -> tuple[type, bool] | None:
    """``(array type, None allowed)`` for ``Int32[...]`` and ``Int32[...] | None``, which an
    ``isinstance`` settles without typeguard's dispatch; ``None`` for anything else."""
    if isinstance(hint, type) and issubclass(hint, jaxtyping.AbstractArray):
        return hint, False
    args = typing.get_args(hint)
    arrays = [a for a in args if a is not type(None)]
    if len(args) == 2 and len(arrays) == 1 and _fast_form(arrays[0]) is not None:
        return arrays[0], True
    return None


def _checker(
    san: Sanitizer, name: str, hints: dict[str, object]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    swa_result = name in san.config.translate_methods
    fast_forms = {param: _fast_form(hint) for param, hint in hints.items()}

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        qualname = getattr(original, "__qualname__", name)
        params = [
            (index, p.name)
            for index, p in enumerate(inspect.signature(original).parameters.values())
            if p.name in hints
        ]

        def check(param: str, value: object) -> None:
            form = fast_forms[param]
            if form is not None and (isinstance(value, form[0]) or (form[1] and value is None)):
                return  # the common, passing case; typeguard explains failures below
            hint = hints[param]
            try:
                check_type(value, hint)
            except TypeCheckError as exc:
                what = "result" if param == RETURN else f"argument {param!r}"
                message = f"{qualname}: {what} is {_describe(value)}, annotated {hint}"
                swa_loc = san.names.is_swa(param) or (param == RETURN and swa_result)
                if swa_loc and isinstance(value, torch.Tensor) and value.dtype != san.swa_dtype:
                    san.check_dtype(value, f"contract: {message}")
                    return
                raise TypeCheckError(message) from exc

        @jaxtyping.jaxtyped(typechecker=None)
        def in_memo(*args: Any, **kwargs: Any) -> Any:
            for index, param in params:
                if param in kwargs:
                    check(param, kwargs[param])
                elif index < len(args):
                    check(param, args[index])
            result = original(*args, **kwargs)
            if RETURN in hints:
                check(RETURN, result)
            return result

        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return in_memo(*args, **kwargs)
            except SWASanitizerError as exc:
                # jaxtyping notes "may be due to a typecheck error" on whatever crosses its
                # scope; a sanitizer violation is not one.
                notes = getattr(exc, "__notes__", [])
                notes[:] = [n for n in notes if "jaxtyping" not in n]
                raise

        return checked

    return make
