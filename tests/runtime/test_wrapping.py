"""Instance-level wrapping: other instances untouched, undone exactly, foreign classes too."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch

from swacheck.runtime import Sanitizer, StaleTranslationError
from swacheck.runtime.wrapping import Patcher, WrapError, forwarding, original_of


def test_only_the_watched_instance_is_wrapped(toy: SimpleNamespace) -> None:
    watched, other = toy.Pool(), toy.Pool()
    san = Sanitizer()
    san.watch(watched)
    assert "translate_loc_from_full_to_swa" in vars(watched)
    assert "translate_loc_from_full_to_swa" not in vars(other)
    assert "alloc" in vars(watched)  # any public method may write the mapping
    assert original_of(watched.alloc).__func__ is toy.Pool.alloc
    san.close()
    assert not {k for k in vars(watched) if callable(vars(watched)[k])}
    assert (
        watched.translate_loc_from_full_to_swa.__func__ is toy.Pool.translate_loc_from_full_to_swa
    )


def test_closed_sanitizer_checks_nothing(toy: SimpleNamespace) -> None:
    pool = toy.Pool()
    locs = pool.alloc(4)
    san = Sanitizer()
    san.watch(pool)
    pool.translate_loc_from_full_to_swa(locs)
    san.close()
    locs.add_(1)
    pool.translate_loc_from_full_to_swa(locs)  # stale, but nobody is watching any more
    assert san.report().ok
    with pytest.raises(RuntimeError, match="closed"):
        san.watch(pool)


def test_undo_keeps_a_user_attribute_set_later(toy: SimpleNamespace) -> None:
    pool = toy.Pool()
    patcher = Patcher()
    patcher.wrap_method(pool, "alloc", lambda original: original)
    mine = lambda n: None  # noqa: E731
    pool.alloc = mine
    patcher.undo_all()
    assert pool.alloc is mine


def test_wrappers_stack_and_unstack_in_order(toy: SimpleNamespace) -> None:
    pool = toy.Pool()
    calls: list[str] = []

    def tracer(name: str):
        def make(original):
            def wrapper(*args, **kwargs):
                calls.append(name)
                return original(*args, **kwargs)

            return wrapper

        return make

    patcher = Patcher()
    patcher.wrap_method(pool, "alloc", tracer("inner"))
    patcher.wrap_method(pool, "alloc", tracer("outer"))
    pool.alloc(1)
    assert calls == ["outer", "inner"]
    patcher.undo_all()
    assert "alloc" not in vars(pool)


def test_slots_objects_cannot_be_wrapped() -> None:
    class Slotted:
        __slots__ = ("full_to_swa_index_mapping",)

        def __init__(self) -> None:
            self.full_to_swa_index_mapping = torch.zeros(3, dtype=torch.int64)

        def translate_loc_from_full_to_swa(self, kv_indices):
            return kv_indices

    with Sanitizer() as san, pytest.raises(WrapError, match="no __dict__"):
        san.watch(Slotted())


def test_nn_module_pool(toy: SimpleNamespace) -> None:
    """Engines often make pools nn.Modules: wrapping must not trip Module.__setattr__ and
    must leave Module's own methods alone."""

    class ModulePool(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.full_to_swa_index_mapping = torch.tensor([0, 1, 2, -1])
            self._cache: torch.Tensor | None = None

        def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
            if self._cache is None:
                self._cache = self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
            return self._cache

    pool = ModulePool()
    with Sanitizer() as san:
        san.watch(pool)
        assert "to" not in vars(pool) and "forward" not in vars(pool)
        key = torch.tensor([1, 2])
        pool.translate_loc_from_full_to_swa(key)
        key.add_(0)
        with pytest.raises(StaleTranslationError):
            pool.translate_loc_from_full_to_swa(key)


def test_watch_class_wraps_new_instances_until_close(toy: SimpleNamespace) -> None:
    before = toy.Pool()
    san = Sanitizer(action="log")
    san.watch_class(toy.Pool)
    during = toy.Pool()
    assert "translate_loc_from_full_to_swa" in vars(during)
    assert "translate_loc_from_full_to_swa" not in vars(before)
    san.close()
    after = toy.Pool()
    assert "translate_loc_from_full_to_swa" not in vars(after)
    assert "__init__" not in toy.Pool.__dict__ or toy.Pool.__init__.__name__ == "__init__"
    assert not hasattr(toy.Pool.__init__, "__wrapped__")


class _Signatures:
    """Methods with every kind of parameter, each returning what it received."""

    def plain(self, a: object, b: object = 2) -> object:
        return (a, b)

    def positional_only(self, a: object, /, b: object, *, c: object = 3) -> object:
        return (a, b, c)

    def variadic(self, a: object, *rest: object, key: object = None, **extra: object) -> object:
        return (a, rest, key, extra)

    def nothing(self) -> object:
        return ()


BODY = """\
    _sw_calls.append(1)
    return CALL
"""


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("plain", (1,), {}),
        ("plain", (1,), {"b": 5}),
        ("plain", (), {"a": 1, "b": 5}),
        ("positional_only", (1, 2), {"c": 9}),
        ("positional_only", (1,), {"b": 2}),
        ("variadic", (1, 2, 3), {"key": 4, "z": 5}),
        ("variadic", (1,), {}),
        ("nothing", (), {}),
    ],
)
def test_forwarding_wrappers_take_exactly_the_originals_arguments(
    name: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    original = getattr(_Signatures(), name)
    calls: list[int] = []
    wrapper = forwarding(original, BODY, {"_sw_calls": calls})
    assert wrapper is not None
    assert wrapper(*args, **kwargs) == original(*args, **kwargs)
    assert calls == [1]
    assert _shape(wrapper) == _shape(original)


def _shape(fn: Callable[..., object]) -> list[tuple[str, object, object]]:
    """Parameters as names, kinds and defaults (annotations are not copied)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_forwarding_refuses_what_it_cannot_spell() -> None:
    def clash(_sw_calls: object) -> object:  # a parameter named like the body's own
        return _sw_calls

    assert forwarding(clash, BODY, {"_sw_calls": []}) is None
    calls: list[int] = []
    wrapper = forwarding(_Signatures().positional_only, BODY, {"_sw_calls": calls})
    assert wrapper is not None
    with pytest.raises(TypeError):
        wrapper(a=1, b=2)  # positional-only stays positional-only
    assert calls == []
