"""``swacheck`` command line: ``audit``, ``rule``, ``rules``, ``server``, ``demo``.

Exit status: 0 no findings, 1 findings, 2 usage, configuration or internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from swacheck import __version__
from swacheck.catalogue import RuleSpec, catalogue
from swacheck.config import ConfigError, resolve_config
from swacheck.engine.cache import result_cache
from swacheck.engine.result import AuditResult
from swacheck.engine.selection import select
from swacheck.engine.workspace import Workspace
from swacheck.report import FORMATS

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its message format
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _codes(value: str) -> list[str]:
    return [code.strip().upper() for code in value.split(",") if code.strip()]


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="swacheck", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"swacheck {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    audit = commands.add_parser("audit", help="lint files and folders (default: .)")
    audit.add_argument("paths", nargs="*", type=Path, default=[Path(".")])
    audit.add_argument("--select", type=_codes, help="comma-separated codes or prefixes to run")
    audit.add_argument("--ignore", type=_codes, help="comma-separated codes or prefixes to skip")
    audit.add_argument("--output-format", choices=sorted(FORMATS), default="text")
    audit.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    audit.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    audit.add_argument("--diff", action="store_true", help="print fixes as a diff; write nothing")
    audit.add_argument("--statistics", action="store_true", help="print counts per rule")
    audit.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    audit.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    audit.add_argument(
        "--no-prefilter", action="store_true", help="parse every file (same findings, slower)"
    )
    audit.add_argument("--jobs", type=int, default=0, help="worker processes (0: one per core)")
    audit.add_argument("--config", type=Path, help="a pyproject.toml (or TOML) to read")

    rule = commands.add_parser("rule", help="explain a rule")
    rule.add_argument("code")
    commands.add_parser("rules", help="list the rules")
    commands.add_parser("server", help="run the language server (LSP over stdio) for editors")

    demo = commands.add_parser(
        "demo", help="serve a mixed batch through the reference model", add_help=False
    )
    demo.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _print_statistics(result: AuditResult, specs: Sequence[RuleSpec]) -> None:
    names = {spec.code: spec.name for spec in specs}
    counts = Counter(f.code for f in result.findings)
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        name = names.get(code, "parse-error")
        fixable = sum(1 for f in result.findings if f.code == code and f.fix)
        marker = " [*]" if fixable else ""
        print(f"{count:>5}\t{code}\t{name}{marker}")
    for code, reason in sorted(result.inactive.items()):
        print(f"    -\t{code}\tinactive: {reason}")
    print(f"{result.files_seen} files seen, {result.files_parsed} parsed")


def _audit(args: argparse.Namespace) -> int:
    if args.jobs < 0:
        raise ConfigError("--jobs must be 0 (one per core) or a positive number")
    config = resolve_config(args.config, args.paths)
    specs = catalogue(config, None if args.no_cache else result_cache(config))
    selection = select(specs, config, args.select, args.ignore)
    workspace = Workspace.for_paths(
        args.paths,
        config,
        selection.rules,
        engine_codes=selection.engine_codes,
        known_codes=[spec.code for spec in specs],
        cache=not args.no_cache,
        jobs=args.jobs or os.cpu_count() or 1,
        prefilter=not args.no_prefilter,
    )
    result = workspace.audit(
        args.paths, fix=args.fix and not args.diff, unsafe_fixes=args.unsafe_fixes, diff=args.diff
    )
    if args.diff:
        sys.stdout.write("".join(result.diffs))
    else:
        sys.stdout.write(FORMATS[args.output_format](result.findings))
    if args.statistics:
        _print_statistics(result, specs)
    if args.fix and result.fixes_applied:
        print(f"Fixed {result.fixes_applied} finding(s).", file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    if any("internal error" in e for e in result.errors):
        return EXIT_ERROR
    if args.exit_zero:
        return EXIT_CLEAN
    if args.diff:
        return EXIT_FINDINGS if result.diffs else EXIT_CLEAN
    return EXIT_FINDINGS if result.findings else EXIT_CLEAN


def _rule(code: str) -> int:
    from swacheck.docs import render_rule
    from swacheck.rules import rule_by_code

    rule = rule_by_code(code)
    if rule is None:
        print(f"swacheck: unknown rule {code!r} (see `swacheck rules`)", file=sys.stderr)
        return EXIT_ERROR
    print(render_rule(rule))
    return EXIT_CLEAN


def _rules() -> int:
    from swacheck.rule import FixSafety
    from swacheck.rules import all_rules

    for rule in all_rules():
        fix = "" if rule.fix_safety is FixSafety.NONE else f" [fix: {rule.fix_safety.value}]"
        print(f"{rule.code}  {rule.name:<42} {rule.summary}{fix}")
    return EXIT_CLEAN


def _demo(argv: Sequence[str]) -> int:
    try:
        from swacheck.reference_impl.demo import main as demo_main
    except ImportError as exc:
        print(
            f"swacheck demo needs the runtime extra (pip install 'swacheck[runtime]'): {exc}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return demo_main(list(argv))


def _server() -> int:
    try:
        from swacheck.server.app import serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("pygls", "lsprotocol"):
            raise
        print(
            f"swacheck server needs the lsp extra (pip install 'swacheck[lsp]'): {exc}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return serve()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        return _demo(argv[1:])
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "audit":
            return _audit(args)
        if args.command == "rule":
            return _rule(args.code)
        if args.command == "server":
            return _server()
        return _rules()
    except ConfigError as exc:
        print(f"swacheck: configuration error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())
