"""Engine knowledge as data: the models in ``swacheck/models/*.toml``, read once.

A model says what an engine's code does with KV locations — sources of full-pool
values, translators and the space each produces, calls that fill a buffer with a space's
ids, constants naming a space, tests stating the hybrid-SWA mode, the dtypes of the
engine's own tensors, the padding sentinel — so that the analyses
(:mod:`swacheck.semantics.values`) are about meaning and the engine's vocabulary stays
data. The configured names (``mapping-attributes``, ``translate-methods``,
``invalidate-methods``, ``swa-loc-pattern``) join the model's, and
``[tool.swacheck.model]`` adds entries of the same shape as the files.

Names are read as words (``_``-separated): ``swa_out_cache_loc`` is an SWA *write*
location, ``swa_page_table``/``window_kv_indices`` an SWA *page table or window index*,
``full_to_swa_index_mapping`` the translation table, ``full_loc`` a full-pool location.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Any

from swacheck.triggers import Trigger, all_of, exact, word

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

FULL = "full"
SWA = "swa"
SPACES = (FULL, SWA)

WRITE = "write"
PAGE_TABLE = "page-table"

_LOC_WORDS = frozenset({"loc", "locs", "slot", "slots"})
_INDEX_WORDS = frozenset({"indices", "index"})
_TABLE_KINDS = frozenset({"page", "block"})


def words(name: str) -> frozenset[str]:
    return frozenset(w for w in name.lower().split("_") if w)


@dataclass(frozen=True)
class Source:
    attribute: str
    space: str
    role: str | None = None
    # Its rows gathered are locations (``req_to_token[rows, cols]``), not itself one.
    table: bool = False


@dataclass(frozen=True)
class Translator:
    method: str
    to: str | None = None  # a fixed space, or None: the ``kind`` argument's
    kind_argument: str | None = None
    kind_position: int = -1
    default: str | None = None
    role: str | None = None
    # The ids of the sub-pool it is called on (``swa_attn_allocator.translate_kv_loc``),
    # where the receiver names one; ``to`` elsewhere.
    of_receiver: bool = False

    def space(self, kind: str | None) -> str | None:
        return self.to if self.to is not None else (kind or self.default)


@dataclass(frozen=True)
class BufferFill:
    method: str
    buffer: str
    kind_argument: str | None = None
    kind_position: int = -1
    default: str | None = None
    role: str | None = None


@dataclass(frozen=True)
class PoolMethod:
    method: str
    locations: tuple[int, ...] = ()
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class Location:
    """A location an engine names without the word ``swa`` (vLLM's ``slot_mapping``):
    its role, the dtype its consumers take."""

    name: str
    role: str
    dtype: str | None = None


@dataclass(frozen=True)
class Sink:
    """An argument of a call whose consumer (a kernel) reads it with one dtype, as the
    engine's source states it (``build_kv_read_table(out=...)`` asserts int32)."""

    call: str  # the function or class called, by its last name
    argument: str  # the keyword
    position: int  # or the position (-1: by keyword only)
    role: str
    dtype: str


@dataclass(frozen=True)
class Era:
    """A design era the code does not state its conventions in: recognised by what the
    project defines (``defines``: a configured name list, such as ``invalidate-methods``),
    with the write locations' dtype of that era."""

    name: str
    defines: str
    write_dtype: str


@dataclass(frozen=True)
class Model:
    """Every model file merged, with the configuration's names (see the module docstring)."""

    engines: tuple[str, ...] = ()
    sources: Mapping[str, Source] = field(default_factory=dict)
    translators: Mapping[str, Translator] = field(default_factory=dict)
    fills: Mapping[str, BufferFill] = field(default_factory=dict)
    pool_methods: Mapping[str, PoolMethod] = field(default_factory=dict)
    eras: tuple[Era, ...] = ()
    locations: Mapping[str, Location] = field(default_factory=dict)
    # The arguments kernels read with a fixed dtype, by the name called.
    sinks: Mapping[str, tuple[Sink, ...]] = field(default_factory=dict)
    # Python indexing with a padded location wraps its negative sentinel: clamp first.
    clamp_before_indexing: bool = False
    # Where the forward's padded locations are read: objects whose location fields hold
    # them (by a word of their name), methods whose location parameters are handed them.
    padded_objects: frozenset[str] = frozenset()
    padded_parameters: frozenset[str] = frozenset()
    space_constants: Mapping[str, str] = field(default_factory=dict)
    mode_flag_pattern: str = r"(?!)"
    mode_classes: frozenset[str] = frozenset()
    # Per-layer tables whose entry's element 1 is true exactly for an SWA layer
    # (``pool.layers_mapping[layer_id] == (index, is_swa)``).
    layer_tables: frozenset[str] = frozenset()
    dtypes: Mapping[str, str] = field(default_factory=dict)
    neutral_words: frozenset[str] = frozenset()
    sentinel: int = 0
    mapping_attributes: frozenset[str] = frozenset()
    invalidate_methods: frozenset[str] = frozenset()
    translate_methods: frozenset[str] = frozenset()
    swa_loc_pattern: str = r"(?!)"

    # -- names ----------------------------------------------------------------------------

    @cached_property
    def _swa_loc(self) -> re.Pattern[str]:
        return re.compile(self.swa_loc_pattern, re.IGNORECASE)

    @cached_property
    def _mode_flag(self) -> re.Pattern[str]:
        return re.compile(self.mode_flag_pattern, re.IGNORECASE)

    def is_mapping_name(self, name: str) -> bool:
        """The full->SWA table by name: a configured mapping attribute, or a name that
        says so (``full_to_swa``, ``swa_mapping``, ``full_to_swa_mapping``; not
        ``full_to_swa_loc``, a location)."""
        if name in self.mapping_attributes:
            return True
        found = words(name)
        if found & _LOC_WORDS:
            return False
        return "full_to_swa" in name.lower() or {"swa", "mapping"} <= found

    @cached_property
    def _roles(self) -> dict[str, str | None]:
        """:meth:`swa_role` by name: asked of every name of a project's indexes."""
        return {}

    def swa_role(self, name: str) -> str | None:
        """``write``, ``page-table`` or ``None`` (not an SWA location), by name."""
        roles = self._roles
        if name not in roles:
            roles[name] = self._swa_role(name)
        return roles[name]

    def _swa_role(self, name: str) -> str | None:
        found = words(name)
        if "mapping" in name.lower() or "full" in found:
            return None
        if self._swa_loc.search(name) is not None:
            return WRITE if found & _LOC_WORDS else PAGE_TABLE
        swa_space = "swa" in found or "window" in found
        if swa_space and "table" in found and found & _TABLE_KINDS:
            return PAGE_TABLE
        if "window" in found and found & _INDEX_WORDS:
            return PAGE_TABLE
        return None

    def location_role(self, name: str) -> str | None:
        """The role of any location by name: an SWA one's (:meth:`swa_role`), or one the
        model names (``slot_mapping``)."""
        if not self.locations:
            return self.swa_role(name)
        known = self.locations.get(name) or self._named_location(name)
        return known.role if known is not None else self.swa_role(name)

    def _named_location(self, name: str) -> Location | None:
        """A location the model names, qualified (``_context_slot_mappings``,
        ``draft_slot_mapping``: the engine's ``slot_mappings``, ``slot_mapping``)."""
        for known, location in self.locations.items():
            if name.endswith(f"_{known}"):
                return location
        return None

    def full_role(self, name: str) -> str | None:
        """The role of a full-pool location by name (``full_loc``, ``full_indices``,
        ``window_kv_indices_full``), or ``None``."""
        found = words(name)
        if "mapping" in name.lower() or "swa" in found or "full" not in found:
            return None
        if found & _LOC_WORDS:
            return WRITE
        if found & (_INDEX_WORDS | {"table"}):
            return PAGE_TABLE
        return None

    def name_space(self, name: str) -> str | None:
        """The space a location's name states, if it states one."""
        if self.swa_role(name) is not None:
            return SWA
        if self.full_role(name) is not None:
            return FULL
        return None

    @cached_property
    def relevance(self) -> re.Pattern[str]:
        """Text of a function worth executing: it names the SWA side, a space, the table,
        a translation, an invalidation or a per-kind call."""
        names = {
            *self.mapping_attributes,
            *self.translate_methods,
            *self.invalidate_methods,
            *self.translators,
            *self.fills,
            *(c.split(".", 1)[0] for c in self.space_constants),
            *self.locations,
        }
        # whole names only: ``space`` (a translator's method) is no reason to execute
        # every function whose text says "namespace"
        return re.compile(
            r"(?<![A-Za-z0-9])swa(?![a-z0-9])|_swa|SWA|sliding_window|window_kv|full_to_swa|"
            r"(?<![A-Za-z0-9_])(?:"
            + "|".join(re.escape(n) for n in sorted(names) if len(n) > 4)
            + r")(?![A-Za-z0-9_])"
        )

    def is_neutral(self, name: str) -> bool:
        """A name of ids both halves share (``out_cache_loc_virtual``: the unified pool's
        virtual ids, which each half maps itself)."""
        return bool(words(name) & self.neutral_words)

    def is_location_name(self, name: str) -> bool:
        """A name with a location word (``loc``, ``indices``, ``slot``...)."""
        return bool(words(name) & (_LOC_WORDS | _INDEX_WORDS))

    def is_swa_word(self, name: str) -> bool:
        return "swa" in words(name) or name.startswith("SWA") or "SWA" in name

    def is_mode_flag(self, name: str) -> bool:
        return self._mode_flag.fullmatch(name) is not None

    def constant_space(self, dotted: str) -> str | None:
        tail = ".".join(dotted.rsplit(".", 2)[-2:])
        return self.space_constants.get(tail)

    def names(self, key: str) -> frozenset[str]:
        """A configured name list by its key (``invalidate-methods``)."""
        return {
            "invalidate-methods": self.invalidate_methods,
            "translate-methods": self.translate_methods,
            "mapping-attributes": self.mapping_attributes,
        }.get(key, frozenset())

    def translator(self, method: str) -> Translator | None:
        if method in self.translate_methods:
            return self.translators.get(method) or Translator(method, to=SWA)
        return self.translators.get(method)


def location_triggers(model: Model | list[Model]) -> frozenset[Trigger]:
    """Text a file must hold to name a location of either side or a space: the word
    ``swa`` (``swa_out_cache_loc``, ``SWAKVPool``), ``window`` with an index or table
    word (``window_kv_indices``; not ``window_size``), the full->SWA table
    (``full_to_swa``), a configured mapping or translate name, a space constant's class
    (``IdSpaceKind``), a call of a translator or a fill. A file without any names none
    of the values the semantic rules follow, so its analysis is left out
    (``--no-prefilter`` included)."""
    found: set[Trigger] = {
        word("swa"),
        exact("SWA"),
        "full_to_swa",
        all_of({word("window")}, {"_index", "index_", "_indices", "indices_", "_table", "table_"}),
    }
    for each in model if isinstance(model, list) else [model]:
        found.update(each.mapping_attributes)
        found.update(each.translate_methods)
        found.update(name.split(".", 1)[0] for name in each.space_constants)
        found.update(word(name) for name in each.locations)
        # a translator's or fill's call (``.write_ids(``; ``space`` alone is too common)
        found.update(f".{name}(" for name in (*each.translators, *each.fills))
        found.update(f"{name}(" for name in each.sinks)
    return frozenset(found)


def _load(files: Iterable[Mapping[str, Any]], config: Any) -> Model:
    sources: dict[str, Source] = {}
    translators: dict[str, Translator] = {}
    fills: dict[str, BufferFill] = {}
    pool_methods: dict[str, PoolMethod] = {}
    eras: list[Era] = []
    locations: dict[str, Location] = {}
    sinks: dict[str, list[Sink]] = {}
    clamp = False
    padded_objects: set[str] = set()
    padded_parameters: set[str] = set()
    constants: dict[str, str] = {}
    classes: set[str] = set()
    layer_tables: set[str] = set()
    flags: list[str] = []
    dtypes: dict[str, str] = {}
    neutral: set[str] = set()
    engines: list[str] = []
    sentinel = 0
    for data in files:
        if "engine" in data:
            engines.append(data["engine"])
        for entry in data.get("sources", []):
            sources[entry["attribute"]] = Source(
                entry["attribute"], entry["space"], entry.get("role"), entry.get("table", False)
            )
        for entry in data.get("translators", []):
            translators[entry["method"]] = Translator(
                entry["method"],
                entry.get("to"),
                entry.get("kind-argument"),
                entry.get("kind-position", -1),
                entry.get("default"),
                entry.get("role"),
                entry.get("of-receiver", False),
            )
        for entry in data.get("fills", []):
            fills[entry["method"]] = BufferFill(
                entry["method"],
                entry["buffer"],
                entry.get("kind-argument"),
                entry.get("kind-position", -1),
                entry.get("default"),
                entry.get("role"),
            )
        for entry in data.get("pool-methods", []):
            pool_methods[entry["method"]] = PoolMethod(
                entry["method"], tuple(entry.get("locations", ())), tuple(entry.get("keywords", ()))
            )
        for entry in data.get("locations", []):
            locations[entry["name"]] = Location(entry["name"], entry["role"], entry.get("dtype"))
        for entry in data.get("sinks", []):
            sinks.setdefault(entry["call"], []).append(
                Sink(
                    entry["call"],
                    entry["argument"],
                    entry.get("position", -1),
                    entry["role"],
                    entry["dtype"],
                )
            )
        padding = data.get("padding", {})
        clamp = clamp or padding.get("clamp-before-indexing", False)
        padded_objects.update(padding.get("padded-objects", ()))
        padded_parameters.update(padding.get("padded-parameters", ()))
        for entry in data.get("eras", []):
            eras.append(Era(entry["name"], entry["defines"], entry["write-dtype"]))
        constants.update(data.get("space-constants", {}))
        modes = data.get("modes", {})
        if "flag-pattern" in modes:
            flags.append(modes["flag-pattern"])
        classes.update(modes.get("classes", ()))
        layer_tables.update(modes.get("layer-tables", ()))
        dtypes.update(data.get("dtypes", {}))
        neutral.update(data.get("names", {}).get("neutral-words", ()))
        sentinel = data.get("padding", {}).get("sentinel", sentinel)
    return Model(
        engines=tuple(engines),
        sources=sources,
        translators=translators,
        fills=fills,
        pool_methods=pool_methods,
        eras=tuple(eras),
        locations=locations,
        sinks={call: tuple(found) for call, found in sinks.items()},
        clamp_before_indexing=clamp,
        padded_objects=frozenset(padded_objects),
        padded_parameters=frozenset(padded_parameters),
        space_constants=constants,
        mode_flag_pattern="|".join(f"(?:{f})" for f in flags) or r"(?!)",
        mode_classes=frozenset(classes),
        layer_tables=frozenset(layer_tables),
        dtypes=dtypes,
        neutral_words=frozenset(neutral),
        sentinel=sentinel,
        mapping_attributes=frozenset(config.mapping_attributes),
        invalidate_methods=frozenset(config.invalidate_methods),
        translate_methods=frozenset(config.translate_methods),
        swa_loc_pattern=config.swa_loc_pattern,
    )


_BUILTIN: list[dict[str, Any]] | None = None


def builtin_models() -> list[dict[str, Any]]:
    """The model files shipped with swacheck, parsed once per process."""
    global _BUILTIN
    if _BUILTIN is None:
        folder = resources.files("swacheck") / "models"
        _BUILTIN = [
            tomllib.loads(entry.read_text(encoding="utf-8"))
            for entry in sorted(folder.iterdir(), key=lambda e: e.name)
            if entry.name.endswith(".toml")
        ]
    return _BUILTIN


_MODELS: dict[Any, Model] = {}
DEFAULT_ENGINE = "sglang"


def engines() -> dict[str, list[str]]:
    """Each engine's top-level packages, from the model files."""
    return {data["engine"]: list(data.get("packages", ())) for data in builtin_models()}


def engine_of(path: str) -> str:
    """The engine a file belongs to: the model whose package a folder of its path is
    (``vllm/v1/...``, ``../vllm-0.33.0/vllm/v1/...``: the nearest such folder to the
    file), else the default engine's. The path is as the audit names the file, relative
    to the working directory or the project's root, or absolute."""
    folders = path.replace("\\", "/").split("/")[:-1]
    owner = {package: engine for engine, packages in engines().items() for package in packages}
    for folder in reversed(folders):
        if folder in owner:
            return owner[folder]
    return DEFAULT_ENGINE


def model_for(config: Any, engine: str = DEFAULT_ENGINE) -> Model:
    """The model of ``engine`` an audit under ``config`` uses (memoised)."""
    added = getattr(config, "model", None) or {}
    key = (
        engine,
        tuple(config.mapping_attributes),
        tuple(config.invalidate_methods),
        tuple(config.translate_methods),
        config.swa_loc_pattern,
        json.dumps(added, sort_keys=True),
    )
    model = _MODELS.get(key)
    if model is None:
        files = [d for d in builtin_models() if d.get("engine", DEFAULT_ENGINE) == engine]
        # the project's own entries (``[tool.swacheck.model]``) extend every engine's
        model = _MODELS[key] = _load([*(files or builtin_models()[:1]), added], config)
    return model


def all_models(config: Any) -> list[Model]:
    """Every engine's model (a prefilter must hold for any of them)."""
    return [model_for(config, engine) for engine in engines()]
