"""The semantic core: one value analysis per function over CPython's ``ast``, shared by
every rule, with the engine's knowledge kept as data.

Layers, each importing only those above it:

* ``cfg``, ``terms``, ``guards`` — control-flow graphs, symbolic values and the branch
  literals that choose between them;
* ``function``, ``module`` — the first pass: each function executed symbolically into
  its values and events, each file into its facts (plain, picklable, cached per version);
* ``model`` — the engine's knowledge (``swacheck/models/*.toml``): sources, translators,
  per-kind calls, space constants, mode tests, the engine's own dtypes, eras;
* ``project`` — every file's facts and the lookups across files;
* ``values``, ``modes``, ``dtypes`` — the queries: which class, callee, space, dtype a
  value has, where it is decided, which branches state the hybrid mode;
* ``uses``, ``conventions`` — where a location is consumed and in which space and role,
  and each role's dtype convention;
* ``unit`` — what the engine calls: a file's facts, the project's analysis, one file's
  view of it for the rules (``swacheck/rules/*``, the queries the invariants are).
"""
