"""Type contracts: the tensor annotations on a watched object's methods, enforced by
typeguard while the sanitizer is on.

Annotations are jaxtyping tensor types (``Int32[Tensor, "n"]``); the values of one call
are checked inside one jaxtyping dimension memo, so a shape named ``n`` must agree
across arguments and result. A failure on an SWA location (an argument whose name is
one, or a translate method's result) of the wrong dtype is an ``swa-loc-dtype``
violation; any other failure is a programming error and raises typeguard's
``TypeCheckError``.

What each level checks, and what that costs:

- ``full`` checks every call. A check's outcome depends only on the dtype and shape of
  each annotated tensor (and on which values are ``None``), so the first
  ``MAX_SIGNATURES`` passing signatures of each method are remembered and the same
  signature again is not re-checked: the same guarantee as running typeguard on every
  call, for the price of building the signature (typeguard and jaxtyping cost some
  100 µs a call).
- ``fast`` checks each method's first ``WARMUP_CALLS`` calls; then the contract's
  wrapper steps aside (the method is called directly, at no cost) and steps back in
  for one call after every ``checks.SAMPLE_EVERY`` forwards (ends of forwards and capture
  runs) on average, at random strides from a fixed seed, so that no periodic pattern
  of the engine lines up with the gaps; a checked call goes through the same
  signature memo. A contract broken on every call, or on any of the first calls, is
  caught at once; one broken intermittently, when a sample lands on a breaking call
  (for a method called ``k`` times a forward, a breaking fraction ``p`` of its calls
  is caught after about ``SAMPLE_EVERY / p`` forwards, whatever ``k``). The SWA dtype
  (I3) of what matters most, the translate method's result, ``set_kv_buffer``'s SWA
  arguments, the batch's SWA locations at every forward and the graph runners' static
  buffers, is checked by name on every call at both levels, contracts or not.

Contracts are installed over the sanitizer's other wrappers, so that stepping aside
leaves those in place. A method that someone else wraps while its contract stands
aside keeps the contract aside (their wrapper is never replaced).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import jaxtyping
import torch
from typeguard import TypeCheckError, check_type

from . import violations as V
from .checks import Checks
from .dtype_roles import WRITE, role_of_name
from .locations import parameters
from .wrapping import Wrapped, public_methods

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback

RETURN = "return"
# ``fast``: the first calls of each method are all checked; after that, one call each
# per ``checks.SAMPLE_EVERY`` forwards on average.
WARMUP_CALLS = 16
# Passing signatures remembered per method; later ones are checked every time.
MAX_SIGNATURES = 64

# A value whose signature cannot stand for it (not a tensor or None): always checked.
_UNCACHEABLE = object()
_ABSENT = object()


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


def install_contracts(checks: Checks, obj: object) -> list[Contract]:
    """Wrap each annotated public method of ``obj``; the contracts installed."""
    installed = []
    for name in public_methods(obj):
        function = inspect.getattr_static(type(obj), name)
        hints = tensor_hints(function)
        if hints:
            contract = Contract(checks, name, hints)
            contract.install(obj)
            installed.append(contract)
    return installed


def declared_dtype(hint: object) -> torch.dtype | None:
    """The one integer dtype a jaxtyping annotation (or its ``| None``) states, if it
    states exactly one (``Int32[Tensor, "n"]``; not ``Int[...]``)."""
    form = _fast_form(hint)
    names = getattr(form[0], "dtypes", ()) if form is not None else ()
    if len(names) == 1 and names[0] in ("int32", "int64"):
        return getattr(torch, names[0])  # type: ignore[no-any-return]
    return None


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


def _signature_of(value: object) -> object:
    """What a contract check of ``value`` depends on (any tensor passes as a ``Tensor``)."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.shape)
    if value is None or value is _ABSENT:
        return value
    return _UNCACHEABLE


def _passed(args: tuple[Any, ...], kwargs: dict[str, Any], index: int | None, name: str) -> Any:
    """The value passed for a parameter, or ``_ABSENT`` (its default is not checked)."""
    if name in kwargs:
        return kwargs[name]
    if index is not None and index < len(args):
        return args[index]
    return _ABSENT


# Failures of one memo: (parameter, value, annotation, error).
Failure = tuple[str, object, object, TypeCheckError]


@jaxtyping.jaxtyped(typechecker=None)
def _failures(
    checks: list[tuple[str, object, object, tuple[type, bool] | None]],
) -> list[Failure]:
    """Check ``(parameter, value, annotation, fast form)`` in one dimension memo."""
    failed: list[Failure] = []
    for param, value, hint, form in checks:
        if form is not None and (isinstance(value, form[0]) or (form[1] and value is None)):
            continue  # the common, passing case; typeguard explains failures
        try:
            check_type(value, hint)
        except TypeCheckError as exc:
            failed.append((param, value, hint, exc))
    return failed


class Contract:
    """One annotated method of one watched object."""

    def __init__(self, checks: Checks, name: str, hints: dict[str, object]) -> None:
        self.checks = checks
        self.name = name
        self.hints = hints
        self.forms = {param: _fast_form(hint) for param, hint in hints.items()}
        self.swa_result = name in checks.config.translate_methods
        self.passed: set[tuple[object, ...]] = set()
        self.checked_calls = 0
        self.qualname = name
        self.params: list[tuple[int | None, str]] = []
        self.wrapped: Wrapped | None = None
        self._declare_conventions()

    def _declare_conventions(self) -> None:
        """An SWA location annotated with one integer dtype (the translate method's
        result, an SWA-named parameter) states the project's convention for its role:
        an auto role takes it (``dtype_roles``)."""
        for param, hint in self.hints.items():
            if param == RETURN:
                if not self.swa_result:
                    continue
                role = WRITE
            elif self.checks.names.is_swa(param):
                role = role_of_name(param)
            else:
                continue
            dtype = declared_dtype(hint)
            if dtype is not None:
                self.checks.dtypes.declare(role, dtype, f"the annotation of {self.name}")

    def install(self, obj: object) -> None:
        self.wrapped = self.checks.patcher.wrap_method(obj, self.name, self.wrap)

    def wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        self.qualname = getattr(original, "__qualname__", self.name)
        self.params = [(i, name) for i, name in parameters(original) if name in self.hints]
        check = self.check_call
        if self.checks.full:
            return lambda *args, **kwargs: check(original, args, kwargs)

        def sampled(*args: Any, **kwargs: Any) -> Any:
            try:
                return check(original, args, kwargs)
            finally:
                self.checked_calls += 1
                if self.checked_calls >= WARMUP_CALLS and self.wrapped is not None:
                    self.wrapped.step_aside()

        return sampled

    def step_in(self) -> None:
        """``fast``: check the next call (the wrapper steps aside again after it)."""
        if self.wrapped is not None:
            self.wrapped.step_in()

    def check_call(
        self, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Arguments before the call (so a bad one never reaches the engine), then arguments
        and result together; each part skipped when its signature passed before."""
        values = [(name, _passed(args, kwargs, index, name)) for index, name in self.params]
        key = tuple(_signature_of(value) for _, value in values)
        if key not in self.passed and self._check(values):
            self._remember(key)
        result = original(*args, **kwargs)
        if RETURN in self.hints:
            full_key = (*key, _signature_of(result))
            if full_key not in self.passed and self._check([*values, (RETURN, result)]):
                self._remember(full_key)
        return result

    def _remember(self, key: tuple[object, ...]) -> None:
        if len(self.passed) < MAX_SIGNATURES and _UNCACHEABLE not in key:
            self.passed.add(key)

    def _check(self, values: list[tuple[str, object]]) -> bool:
        """Whether every value passed; an SWA location of the wrong dtype is recorded (and
        raised per the action), any other failure raises ``TypeCheckError``."""
        hints, forms = self.hints, self.forms
        failures = _failures(
            [
                (param, value, hints[param], forms[param])
                for param, value in values
                if value is not _ABSENT
            ]
        )
        checks = self.checks
        for param, value, hint, exc in failures:
            what = "result" if param == RETURN else f"argument {param!r}"
            message = f"{self.qualname}: {what} is {_describe(value)}, annotated {hint}"
            swa_loc = checks.names.is_swa(param) or (param == RETURN and self.swa_result)
            role = WRITE if param == RETURN else role_of_name(param)
            # The annotation is the project's own statement of the convention: it stands
            # for a role whose auto convention is not known yet.
            if swa_loc and isinstance(value, torch.Tensor):
                allowed = checks.dtypes.allowed(role)
                if allowed is None or value.dtype not in allowed:
                    checks.dtype_checks += 1
                    checks.flag_dtype(value, f"contract: {message}", role)
                    continue
            raise TypeCheckError(message) from exc
        return not failures
