"""SWA006 storage-pointer-cache-key."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.buffers import local_bindings
from swacheck.analysis.caches import is_cache_decorator
from swacheck.analysis.names import call_name, dotted_name, target_name
from swacheck.analysis.padding import is_location_name
from swacheck.analysis.walk import walk
from swacheck.config import Config
from swacheck.finding import Applicability
from swacheck.fix_safety import safe_fix
from swacheck.rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from swacheck.context import FileContext

_STORAGE_METHODS = ("untyped_storage", "storage", "_typed_storage")
# What carries a tensor's whole extent into a key (``size()`` without a dimension).
_EXTENT_CALLS = {"numel", "nelement", "size"}
# What carries its first dimension only: ``len(x)``, ``x.size(0)``, ``x.shape[0]``.
_ROWS_CALLS = {"len", "size"}
# Methods of a cache object (a dict, a helper object) whose first argument is the key.
_KEYED_METHODS = {"get", "put", "set", "setdefault", "pop", "lookup", "insert", "store"}
_LOOKUPS = {"get", "pop", "lookup"}


def _storage_pointer(call: cst.Call) -> cst.Call | None:
    """The ``x.untyped_storage()`` part of ``x.untyped_storage().data_ptr()``, else ``None``."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "data_ptr" and not call.args):
        return None
    inner = func.value
    if (
        isinstance(inner, cst.Call)
        and not inner.args
        and isinstance(inner.func, cst.Attribute)
        and inner.func.attr.value in _STORAGE_METHODS
    ):
        return inner
    return None


def _is_keyish(expr: cst.BaseExpression) -> bool:
    """A name or attribute that holds a cache key (``key``, ``self._cached_loc_key``)."""
    if not isinstance(expr, cst.Name | cst.Attribute):
        return False
    name = (target_name(expr) or "").lower()
    return "key" in name or "cached" in name


class _Nodes(cst.CSTVisitor):
    """Calls and attribute reads inside one expression (nested scopes excluded)."""

    def __init__(self) -> None:
        self.calls: list[cst.Call] = []
        self.names: list[cst.Name] = []
        self.attributes: list[str] = []
        self.indexed_shapes = 0  # ``x.shape[i]``

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.attributes.append(node.attr.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape":
            self.indexed_shapes += 1


def _nodes(expr: cst.CSTNode) -> _Nodes:
    found = _Nodes()
    walk(expr, found)
    return found


def _extent(parts: Sequence[cst.CSTNode], calls: Sequence[cst.Call]) -> str | None:
    """How much of a tensor's extent a key's ``parts`` carry: ``whole`` (``numel()``,
    ``size()``, ``shape``), ``rows`` (``len()``, ``size(0)``, ``shape[0]``), or none."""
    if any(call_name(c) in _EXTENT_CALLS and not c.args for c in calls):
        return "whole"
    nodes = [_nodes(part) for part in parts]
    if sum(n.attributes.count("shape") for n in nodes) > sum(n.indexed_shapes for n in nodes):
        return "whole"
    if any(call_name(c) in _ROWS_CALLS for c in calls) or any(n.indexed_shapes for n in nodes):
        return "rows"
    return None


class StoragePointerCacheKey(Rule):
    """
    ## What it does
    Checks the keys of the location-translation cache (I2). Within a translation
    context — a `translate-methods` method, or a function of a class that has one, or
    a function that calls one — it flags:

    - a key built from `x.untyped_storage().data_ptr()` or `x.storage().data_ptr()`;
    - a key built from `x.data_ptr()` that omits the tensor's whole extent (`numel()`,
      `shape` or `size()`): without a length, or with the first dimension only
      (`len(x)`, `x.shape[0]`, `x.size(0)`);
    - a key that is the tensor object itself: `kv_indices is self._cached_loc`, a bare
      tensor parameter compared with a cached key, or a tensor parameter of a function
      under a `functools` cache (`@functools.lru_cache` on the translate, or on a gather
      it calls as a method of its class: the cache keys on the argument's hash, which
      for a tensor is its identity) (these forms only where the file itself shows the
      translation context, not through a base class elsewhere).

    A key is the value assigned to a name or attribute holding `key`, an operand
    compared with a name or attribute holding `key` or `cached`, the index of a
    subscript of an attribute holding `cache`, the first argument of a lookup or store
    on such an object (`self._loc_cache.get(key)`, `self.loc_cache.put(key, out)`), or
    an argument of a call of a `functools`-cached method of the class
    (`self._gather(key)`); a local it refers to is followed one assignment back
    (`ptr = x.untyped_storage().data_ptr(); key = (ptr, n)`). Inside a translate
    method every storage-pointer read is flagged. Storage pointers elsewhere (weight
    sharing checks, allocator bookkeeping) are out of scope, and so are keys built
    inside a helper object's own class.

    ## Why is this bad?
    A cached translation must be returned only for the very tensor that produced it
    (invariant I2). Every view of one allocation shares its storage, so
    `untyped_storage().data_ptr()` is the same for `loc[0:5]` and `loc[5:10]`: the
    second lookup returns the first view's SWA slots and the layer writes K/V into the
    wrong slots. `data_ptr()` includes the view's offset, and `numel()` tells apart two
    views that start at the same element (`loc[:4]` and `loc[:8]`); the first dimension
    alone does not tell apart column slices of a page table (`table[:, :4]` and
    `table[:, :8]` share the pointer and the rows). Comparing tensor
    objects with `is` misses every fresh view of the same slots (a new gather, and the
    "loc tensor changed mid-forward" warning, per layer) and hits a reused static
    buffer whose contents changed. SGLang PR #25824 chose `(kv_indices.data_ptr(),
    kv_indices.numel())` after finding that `untyped_storage().data_ptr()` collides
    for views at different offsets, and tests exactly that.

    ## Fix safety
    Replacing `x.untyped_storage().data_ptr()` (or `x.storage().data_ptr()`) by
    `x.data_ptr()` is safe: it makes the key strictly finer (equal only when the old
    key was equal and the offset is too), so it can only turn a wrong cache hit into a
    correct miss. A missing `numel()` and an identity key are reported without a fix:
    the key's shape is the author's choice.
    """

    code = "SWA006"
    name = "storage-pointer-cache-key"
    summary = "Translation cache key from a storage pointer, without numel(), or by identity"
    fixes = (safe_fix(),)
    config_keys = ("translate-methods",)
    invariant = "I2"
    origin = "SGLang PR #25824"

    VALID = [
        Valid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.data_ptr(), kv_indices.numel())
        if key != self._cached_loc_key:
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
            self._cached_loc_key = key
        return self._cached_swa_loc
"""
        ),
        # Storage pointers outside a translation cache (weight sharing checks) are fine.
        Valid(
            """
def shares_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()

class WeightLoader:
    def load(self, tensors):
        seen = {}
        for name, tensor in tensors.items():
            key = tensor.untyped_storage().data_ptr()
            seen.setdefault(key, []).append(name)
        return seen
"""
        ),
        # The extent through `shape`, the pointer through a local.
        Valid(
            """
class Pool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        ptr = kv_indices.data_ptr()
        key = (ptr, tuple(kv_indices.shape))
        if key == self._cached_loc_key:
            return self._cached_swa_loc
        return self._fill(kv_indices, key)
"""
        ),
        # Identity against None is not an identity key.
        Valid(
            """
class Pool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        if self._cached_loc_key is None:
            self._cached_loc_key = (kv_indices.data_ptr(), kv_indices.numel())
        return self.full_to_swa_index_mapping[kv_indices]
"""
        ),
        # A helper object keyed on the pointer and the length, spread over its arguments.
        Valid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        hit = self.loc_cache.get(kv_indices.data_ptr(), kv_indices.numel())
        if hit is None:
            hit = self.full_to_swa_index_mapping[kv_indices]
            self.loc_cache.put(kv_indices.data_ptr(), kv_indices.numel(), hit)
        return hit
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.untyped_storage().data_ptr(), kv_indices.numel())
        if key != self._cached_loc_key:
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
            self._cached_loc_key = key
        return self._cached_swa_loc
""",
            line=4,
            fixed="""
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.data_ptr(), kv_indices.numel())
        if key != self._cached_loc_key:
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
            self._cached_loc_key = key
        return self._cached_swa_loc
""",
        ),
        # `storage()` through a local, in a helper of a class that translates.
        Invalid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self._lookup(kv_indices)

    def _lookup(self, loc):
        base = loc.storage().data_ptr()
        if (base, loc.numel()) == self._cached_loc_key:
            return self._cached_swa_loc
        return None
""",
            line=7,
            fixed="""
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self._lookup(kv_indices)

    def _lookup(self, loc):
        base = loc.data_ptr()
        if (base, loc.numel()) == self._cached_loc_key:
            return self._cached_swa_loc
        return None
""",
        ),
        # A key without the length: `loc[:4]` and `loc[:8]` collide.
        Invalid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        key = kv_indices.data_ptr()
        if key != self._cached_loc_key:
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices]
            self._cached_loc_key = key
        return self._cached_swa_loc
""",
            line=4,
        ),
        # The first dimension only: a page table's column slices share the pointer and rows.
        Invalid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.data_ptr(), kv_indices.shape[0])
        if key != self._cached_loc_key:
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices]
            self._cached_loc_key = key
        return self._cached_swa_loc
""",
            line=4,
        ),
        # The tensor object itself as the key.
        Invalid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        if kv_indices is not self._cached_loc:
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices]
            self._cached_loc = kv_indices
        return self._cached_swa_loc
""",
            line=4,
        ),
        # functools caches the translation on the tensor argument: keyed by identity.
        Invalid(
            """
import functools

class SWAKVPool:
    @functools.lru_cache(maxsize=1)
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]
""",
            line=5,
        ),
        # A dict memo looked up by the storage pointer in a helper of the translate.
        Invalid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self._lookup(kv_indices)

    def _lookup(self, loc):
        key = (loc.untyped_storage().data_ptr(), loc.numel())
        out = self._loc_cache.get(key)
        if out is None:
            out = self._loc_cache.setdefault(key, self.full_to_swa_index_mapping[loc])
        return out
""",
            line=7,
            fixed="""
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self._lookup(kv_indices)

    def _lookup(self, loc):
        key = (loc.data_ptr(), loc.numel())
        out = self._loc_cache.get(key)
        if out is None:
            out = self._loc_cache.setdefault(key, self.full_to_swa_index_mapping[loc])
        return out
""",
        ),
        # A helper object's entries stored under the pointer alone.
        Invalid(
            """
class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        out = self.loc_cache.get(kv_indices.data_ptr())
        if out is None:
            out = self.full_to_swa_index_mapping[kv_indices]
            self.loc_cache.put(kv_indices.data_ptr(), out)
        return out
""",
            line=4,
        ),
        # A dict cache indexed by a storage pointer, in a function that translates.
        Invalid(
            """
def swa_slots(pool, loc, cache):
    if loc.untyped_storage().data_ptr() in cache:
        return cache[loc.untyped_storage().data_ptr()]
    return pool.translate_loc_from_full_to_swa(loc)
""",
            line=4,
            fixed="""
def swa_slots(pool, loc, cache):
    if loc.data_ptr() in cache:
        return cache[loc.data_ptr()]
    return pool.translate_loc_from_full_to_swa(loc)
""",
        ),
    ]

    # The key and the translate method it serves each sit in a trigger block.
    region_safe = True

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        """``data_ptr`` and the configured translate-method names.

        The storage-pointer and missing-length findings are about a key built from a
        ``.data_ptr()`` call in the reported file, so the file holds ``data_ptr``. An
        identity key is reported only where the file itself names a translate method
        (the enclosing function is one, calls one, or its class defines one), so the
        file holds that name. (For the first two forms the translation context may come
        from a base class in another file; that file names the translate method, so it
        stays in the audit.)
        """
        return frozenset({"data_ptr", *config.translate_methods})

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._reported: set[tuple[int, str]] = set()

    # -- context ----------------------------------------------------------------------

    def _in_translate_method(self, func: cst.FunctionDef) -> bool:
        return self.context.names.is_translate(func.name.value)

    def _translate_context(self, func: cst.FunctionDef) -> bool:
        ctx = self.context
        return ctx.memo(("swa006-context", func), lambda: self._compute_context(func))

    def _compute_context(self, func: cst.FunctionDef) -> bool:
        ctx = self.context
        names = ctx.names
        if names.is_translate(func.name.value):
            return True
        cls = ctx.enclosing(func, cst.ClassDef)
        if cls is not None:
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            if any(
                isinstance(s, cst.FunctionDef) and names.is_translate(s.name.value) for s in body
            ):
                return True
            info = ctx.project.resolve_class(cls.name.value, near=ctx.path)
            if info is not None and any(
                ctx.project.find_method(info, m) for m in ctx.config.translate_methods
            ):
                return True
        return any(names.is_translate(call_name(c) or "") for c in _nodes(func.body).calls)

    def _local_context(self, func: cst.FunctionDef) -> bool:
        """A translation context visible in this file alone (no base class elsewhere)."""
        names = self.context.names
        if names.is_translate(func.name.value):
            return True
        cls = self.context.enclosing(func, cst.ClassDef)
        body = cls.body.body if cls is not None and isinstance(cls.body, cst.IndentedBlock) else ()
        if any(isinstance(s, cst.FunctionDef) and names.is_translate(s.name.value) for s in body):
            return True
        return any(names.is_translate(call_name(c) or "") for c in _nodes(func.body).calls)

    def _function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        func = self.context.enclosing(node, cst.FunctionDef)
        if func is None or not self._translate_context(func):
            return None
        return func

    def _locals(self, func: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
        return local_bindings(self.context, func)

    def _expand(self, expr: cst.BaseExpression, func: cst.FunctionDef) -> list[cst.CSTNode]:
        """``expr`` and the values of the locals it names, one assignment back (twice)."""
        locals_ = self._locals(func)
        out: list[cst.CSTNode] = [expr]
        frontier: list[cst.CSTNode] = [expr]
        for _ in range(2):
            nxt: list[cst.CSTNode] = []
            for node in frontier:
                for name in _nodes(node).names:
                    value = locals_.get(name.value)
                    if value is not None and value not in out:
                        out.append(value)
                        nxt.append(value)
            frontier = nxt
        return out

    # -- the three forms ----------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        inner = _storage_pointer(node)
        if inner is not None:
            func = self._function(node)
            if func is not None and self._in_translate_method(func):
                self._report_storage(node, inner)
            return
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        if not positional:
            return
        callee = node.func
        if isinstance(callee, cst.Attribute) and callee.attr.value in _KEYED_METHODS:
            holder = (
                target_name(callee.value)
                if isinstance(callee.value, cst.Name | cst.Attribute)
                else None
            )
            if holder and "cache" in holder.lower():
                # a store's last argument is the value; a lookup's are all key
                stores = callee.attr.value not in _LOOKUPS and len(positional) > 1
                key = positional[:-1] if stores else positional
                self._check_key(key[0], identity=False, parts=key[1:])
                return
        if self._cached_callee(node):
            self._check_key(positional[0], identity=False, parts=positional[1:])

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """A tensor parameter of a ``functools``-cached translate, or of a cached method
        of a class that translates, is keyed by identity."""
        if not any(is_cache_decorator(name) for name in _decorator_names(node)):
            return
        if not self._local_context(node):
            return
        for param in _params(node):
            name = param.name.value
            if name in ("self", "cls"):
                continue
            kind = _param_kind(param)
            if kind == "tensor" or (kind == "unknown" and self._is_location_reference(param.name)):
                self._report_once(
                    node.decorators[0],
                    f"translation cached by `functools` on the tensor `{name}`: a tensor "
                    "hashes by identity, so a fresh view of the same slots misses and a "
                    "reused buffer with new contents hits; key on "
                    "`(t.data_ptr(), t.numel())` (I2)",
                )
                return

    def _cached_callee(self, call: cst.Call) -> bool:
        """``call`` is ``self.<method>(...)`` of a ``functools``-cached method of the
        enclosing class."""
        func = call.func
        if not (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            return False
        cls = self.context.enclosing(call, cst.ClassDef)
        if cls is None or not isinstance(cls.body, cst.IndentedBlock):
            return False
        return any(
            isinstance(stmt, cst.FunctionDef)
            and stmt.name.value == func.attr.value
            and any(is_cache_decorator(name) for name in _decorator_names(stmt))
            for stmt in cls.body.body
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(_is_keyish(t.target) for t in node.targets):
            self._check_key(node.value, identity=False)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and _is_keyish(node.target):
            self._check_key(node.value, identity=False)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        for i, comparison in enumerate(node.comparisons):
            left, right = operands[i], operands[i + 1]
            identity = isinstance(comparison.operator, cst.Is | cst.IsNot)
            if isinstance(comparison.operator, cst.In | cst.NotIn):
                # ``ptr in self._loc_cache``: a lookup with ``left`` as the key
                cache = target_name(right) if isinstance(right, cst.Name | cst.Attribute) else None
                if cache and "cache" in cache.lower():
                    self._check_key(left, identity=False)
                continue
            if _is_keyish(right) and not _is_keyish(left):
                self._check_key(left, identity=identity, compared=node)
            elif _is_keyish(left) and not _is_keyish(right):
                self._check_key(right, identity=identity, compared=node)
            elif isinstance(left, cst.Name) and _is_keyish(right):
                # ``key != self._cached_loc_key``: the local key, followed to its value
                self._check_key(left, identity=identity, compared=node)
            elif isinstance(right, cst.Name) and _is_keyish(left):
                self._check_key(right, identity=identity, compared=node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        name = (
            (target_name(node.value) or "")
            if isinstance(node.value, cst.Attribute | cst.Name)
            else ""
        )
        if "cache" not in name.lower() or len(node.slice) != 1:
            return
        index = node.slice[0].slice
        if isinstance(index, cst.Index):
            self._check_key(index.value, identity=False)

    def _check_key(
        self,
        key: cst.BaseExpression,
        *,
        identity: bool,
        compared: cst.Comparison | None = None,
        parts: Sequence[cst.BaseExpression] = (),
    ) -> None:
        """Check ``key`` (with ``parts``: the other arguments a key is spread over)."""
        func = self._function(key)
        if func is None:
            return
        if isinstance(key, cst.Name) and key.value == "None":
            return
        expanded = [n for part in (key, *parts) for n in self._expand(part, func)]
        calls = [c for node in expanded for c in _nodes(node).calls]
        for call in calls:
            inner = _storage_pointer(call)
            if inner is not None:
                self._report_storage(call, inner)
        pointers = [c for c in calls if call_name(c) == "data_ptr"]
        if pointers:
            extent = _extent(expanded, calls)
            if extent != "whole":
                node = expanded[-1] if isinstance(key, cst.Name) else key
                self._report_once(
                    node,
                    "translation cache key built from `data_ptr()` with the first dimension "
                    "only: a column slice of a page table (the same pointer and rows) shares "
                    "the key; key on `numel()` (I2)"
                    if extent == "rows"
                    else "translation cache key built from `data_ptr()` without `numel()`: "
                    "views that start at the same element but differ in length share the key "
                    "(I2)",
                )
            return
        if compared is None:
            return
        params = {p.name.value: p for p in _params(func) if p.name.value not in ("self", "cls")}
        root = key
        if isinstance(root, cst.Name) and root.value not in params:
            value = self._locals(func).get(root.value)
            if isinstance(value, cst.Name | cst.Attribute):
                root = value
        if isinstance(root, cst.Name) and root.value in params:
            kind = _param_kind(params[root.value])
            flagged = kind == "tensor" or (identity and kind == "unknown")
        else:
            flagged = identity and self._is_location_reference(root)
        if flagged and self._local_context(func):
            self._report_once(
                compared,
                "translation cache keyed by the tensor object itself: a fresh view of the "
                "same slots misses and a reused buffer with new contents hits; key on "
                "`(t.data_ptr(), t.numel())` (I2)",
            )

    def _is_location_reference(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Name | cst.Attribute):
            return False
        name = target_name(expr) or ""
        return (
            is_location_name(name)
            or self.context.names.is_swa_loc(name)
            or "indices" in name.lower()
        )

    def _report_storage(self, call: cst.Call, inner: cst.Call) -> None:
        receiver = inner.func.value if isinstance(inner.func, cst.Attribute) else None
        if receiver is None:
            return
        ctx = self.context
        code = ctx.module.code_for_node(receiver)
        method = inner.func.attr.value  # type: ignore[union-attr]
        fix = ctx.replace(inner, code, f"Use `{code}.data_ptr()`", applicability=Applicability.SAFE)
        self._report_once(
            call,
            f"translation cache key from `{code}.{method}().data_ptr()`: every view of one "
            f"allocation shares it, so views at different offsets collide; use "
            f"`{code}.data_ptr()` (I2)",
            fix=fix,
        )

    def _report_once(self, node: cst.CSTNode, message: str, fix=None) -> None:  # type: ignore[no-untyped-def]
        key = (id(node), message.split(":", 1)[0])
        if key in self._reported:
            return
        self._reported.add(key)
        self.report(node, message, fix=fix)


def _decorator_names(func: cst.FunctionDef) -> list[str]:
    names = []
    for decorator in func.decorators:
        expr = decorator.decorator
        name = dotted_name(expr.func if isinstance(expr, cst.Call) else expr)
        if name:
            names.append(name)
    return names


def _params(func: cst.FunctionDef) -> Iterator[cst.Param]:
    params = func.params
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params


def _param_kind(param: cst.Param) -> str:
    """``tensor`` (annotated as one), ``unknown`` (no annotation) or ``other``."""
    if param.annotation is None:
        return "unknown"
    text = cst.Module([]).code_for_node(param.annotation.annotation)
    return "tensor" if "Tensor" in text else "other"
