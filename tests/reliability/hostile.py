"""Hostile files: the shapes known to crash, stall or exhaust libcst's native parser
(issue 28), generated at any size, each behind an SWA location so the prefilter lets it
through. Shared by the reliability tests and ``benchmarks/hostile_files.py``.

``GUARDED`` shapes are recognised before libcst sees them (``engine/guards.py``);
``BOUNDED`` ones are not, and are what the worker processes and the operating system's
limits are tested on: a real segmentation fault of libcst's parser, a native parse past
the CPU-time limit, an allocation past the memory limit.
"""

from __future__ import annotations

from collections.abc import Callable

# The prefilter lets a file naming an SWA location through to the parser.
SWA = b"swa_loc = None\n"
# Separators put before each dot of an attribute chain: every layout Python allows.
CHAIN_LAYOUTS = {
    "space": (b"", b" ", b""),
    "tab": (b"", b"\t", b""),
    "newline": (b"(", b"\n", b")"),
    "comment": (b"(", b"  # link\n", b")"),
    "backslash": (b"", b" \\\n", b""),
}


def attribute_chain(links: int, layout: str = "space") -> bytes:
    """``y = a .b .b …`` with ``links`` links, laid out as ``CHAIN_LAYOUTS`` says."""
    opening, separator, closing = CHAIN_LAYOUTS[layout]
    return SWA + b"y = " + opening + b"a" + (separator + b".b") * links + closing + b"\n"


Shape = Callable[[int], bytes]

CHAINS = (201, 2000, 6000)
# name -> (the file at size n, sizes that must be refused, the largest as the issue
# found it, and what its SWA999 says)
GUARDED: dict[str, tuple[Shape, tuple[int, ...], str]] = {
    **{
        f"attribute_chain_{layout}": (
            lambda n, layout=layout: attribute_chain(n, layout),
            CHAINS,
            "chain",
        )
        for layout in CHAIN_LAYOUTS
    },
    "operator_chain_lines": (
        lambda n: SWA + b"x = (a*\n" + b"a*\n" * n + b"a)\n",
        (201, 2000, 16_000),
        "chain",
    ),
    "sum": (lambda n: SWA + b"x = " + b" + ".join([b"a"] * n) + b"\n", (202, 5000), "chain"),
    "boolean_chain": (
        lambda n: SWA + b"x = " + b" or ".join([b"a"] * n) + b"\n",
        (202, 5000),
        "chain",
    ),
    "not_chain": (lambda n: SWA + b"x = " + b"not " * n + b"x\n", (201, 5000), "chain"),
    "unary_minus": (lambda n: SWA + b"x = " + b"- " * n + b"x\n", (201, 5000), "chain"),
    "conditional_expressions": (
        lambda n: SWA + b"x = " + b"a if b else " * n + b"c\n",
        (101, 3000),
        "chain",
    ),
    "list_literal": (
        lambda n: SWA + b"x = [" + b"1, " * n + b"]\n",
        (50_001, 300_000),
        "elements",
    ),
    "call_arguments": (
        lambda n: SWA + b"x = f(" + b"a," * n + b")\n",
        (50_001, 490_000),
        "elements",
    ),
    "huge_integer": (
        lambda n: SWA + b"x = " + b"9" * n + b"\n",
        (4301, 500_000),
        "Exceeds the limit (4300 digits)",
    ),
}

# name -> (the file, the configuration it needs to be refused fast, what its SWA999 says)
BOUNDED: dict[str, tuple[bytes, str, str]] = {
    # libcst's parser recurses per `elif`, and per nested `lambda`: the C stack overflows.
    "elif_chain": (
        SWA + b"if a:\n    pass\n" + b"elif a:\n    pass\n" * 10_000,
        "",
        "parser crashed (SIGSEGV)",
    ),
    "nested_lambdas": (SWA + b"x = " + b"lambda: " * 6000 + b"0\n", "", "parser crashed"),
    # Quadratic in libcst (1,000 links: ~8 s of CPU), under CPython's nesting limit.
    "call_chain_with_arguments": (
        SWA + b"y = f" + b"(a, b)" * 1000 + b"\n",
        "max-file-time = 1",
        "too slow to analyse",
    ),
    # 40,000 tuples: ~700 MiB in libcst.
    "tuples": (
        SWA + b"x = [" + b"(1, 2), " * 40_000 + b"]\n",
        "max-file-memory = 128",
        "over the memory limit of 128 MiB",
    ),
}

# Bytes no parser gets to: each is its file's SWA999 before or while it is decoded.
UNREADABLE: dict[str, tuple[bytes, str]] = {
    "nul_byte": (SWA + b"x = 1\x00\n", "NUL byte"),
    "lone_surrogate": (SWA + b"name = '\xed\xa0\x80'\n", "decode"),
}
