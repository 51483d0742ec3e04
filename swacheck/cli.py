"""``swacheck`` command line: ``audit``, ``rule``, ``rules``, ``server``, ``demo``.

Options of ``audit`` are spelled as ruff's, and mean what ruff's mean. Exit status: 0 no
findings, 1 findings, 2 usage, configuration or internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, NoReturn, TextIO

from swacheck import __version__
from swacheck.catalogue import RuleSpec, catalogue
from swacheck.config import Config, ConfigError, parse_override, resolve_config
from swacheck.engine.cache import result_cache
from swacheck.engine.codes import ENGINE_CODES, engine_code
from swacheck.engine.project import find_root
from swacheck.engine.result import AuditResult
from swacheck.engine.selection import Selection, select
from swacheck.engine.workspace import Workspace
from swacheck.report import FORMATS
from swacheck.report.style import Style, wants_colour
from swacheck.report.summary import (
    closing,
    show_fixes,
    statistics_json,
    statistics_text,
    would_fix,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
STDIN = "-"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its message format
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _codes(value: str) -> list[str]:
    return [code.strip().upper() for code in value.split(",") if code.strip()]


def _audit_parser(commands: Any) -> None:
    audit = commands.add_parser("audit", help="lint files and folders (default: .)")
    audit.add_argument(
        "paths", nargs="*", type=Path, default=[Path(".")], help="files, folders, or - for stdin"
    )
    rules = audit.add_argument_group("rule selection")
    rules.add_argument("--select", type=_codes, help="comma-separated codes or prefixes to run")
    rules.add_argument(
        "--extend-select", type=_codes, help="like --select, but adds to the selection"
    )
    rules.add_argument("--ignore", type=_codes, help="comma-separated codes or prefixes to skip")
    fixing = audit.add_argument_group("fixes")
    fixing.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    fixing.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    fixing.add_argument(
        "--show-fixes", action="store_true", help="list what --fix fixed, per file and code"
    )
    fixing.add_argument(
        "--diff", action="store_true", help="print fixes as a diff and write nothing"
    )
    out = audit.add_argument_group("output")
    out.add_argument("--output-format", choices=sorted(FORMATS), default="text")
    out.add_argument("-o", "--output-file", type=Path, help="write the report to this file")
    out.add_argument("--statistics", action="store_true", help="print counts per code only")
    out.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="colour text output"
    )
    out.add_argument("-q", "--quiet", action="store_true", help="print findings, nothing else")
    out.add_argument(
        "-s", "--silent", action="store_true", help="print nothing (the exit status stays)"
    )
    out.add_argument(
        "--show-settings", action="store_true", help="print the resolved settings and exit"
    )
    status = audit.add_argument_group("exit status")
    status.add_argument("-e", "--exit-zero", action="store_true", help="exit 0 despite findings")
    status.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="exit 1 when --fix changed a file, even if no finding is left",
    )
    files = audit.add_argument_group("files")
    files.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply exclude/extend-exclude and .gitignore to paths given explicitly too",
    )
    files.add_argument("--stdin-filename", type=Path, help="the name of the file read from stdin")
    config = audit.add_argument_group("configuration")
    config.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="CONFIG_OPTION",
        help="a TOML file, or a TOML `KEY = VALUE` pair overriding one option (repeatable)",
    )
    config.add_argument("-n", "--no-cache", action="store_true", help="neither read nor write it")
    config.add_argument(
        "--cache-dir",
        type=Path,
        default=os.environ.get("SWACHECK_CACHE_DIR") or None,
        help="the cache folder (default: cache-dir, .swacheck_cache) [env: SWACHECK_CACHE_DIR]",
    )
    config.add_argument(
        "--no-prefilter", action="store_true", help="parse every file (same findings, slower)"
    )
    config.add_argument("--jobs", type=int, default=0, help="worker processes (0: one per core)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="swacheck", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"swacheck {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _audit_parser(commands)
    rule = commands.add_parser("rule", help="explain a rule")
    rule.add_argument("code")
    rules = commands.add_parser("rules", help="list the rules")
    rules.add_argument("--output-format", choices=("text", "json"), default="text")
    commands.add_parser("server", help="run the language server (LSP over stdio) for editors")
    commands.add_parser(
        "demo", help="serve a mixed batch through the reference model", add_help=False
    )
    return parser


def _configuration(args: argparse.Namespace, paths: Sequence[Path]) -> Config:
    """``--config`` files and ``KEY = VALUE`` overrides, as ruff reads them."""
    files: list[Path] = []
    overrides: dict[str, Any] = {}
    for value in args.config:
        if value.endswith(".toml") or os.path.isfile(value):
            files.append(Path(value))
        else:
            overrides.update(parse_override(value))
    if len(files) > 1:
        raise ConfigError(f"--config: one configuration file at most, got {len(files)}")
    return resolve_config(files[0] if files else None, paths, overrides)


@contextlib.contextmanager
def _report_stream(target: Path | None) -> Iterator[TextIO]:
    if target is None:
        yield sys.stdout
        return
    try:
        handle = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ConfigError(f"--output-file {target}: cannot write: {exc.strerror}") from None
    with handle:
        yield handle


def _names(specs: Sequence[RuleSpec]) -> dict[str, str]:
    return {**{c.code: c.name for c in ENGINE_CODES}, **{s.code: s.name for s in specs}}


def _audit(args: argparse.Namespace) -> int:
    if args.jobs < 0:
        raise ConfigError("--jobs must be 0 (one per core) or a positive number")
    stdin = args.paths == [Path(STDIN)] or (args.stdin_filename and args.paths == [Path(".")])
    if not stdin and Path(STDIN) in args.paths:
        raise ConfigError("- (stdin) cannot be audited together with other paths")
    document = args.stdin_filename or Path(STDIN)
    paths = [document] if stdin else args.paths
    config = _configuration(args, paths)
    cache = None if args.no_cache else result_cache(config, args.cache_dir)
    specs = catalogue(config, cache)
    selection = select(specs, config, args.select, args.ignore, args.extend_select)
    if args.show_settings:
        return _show_settings(config, paths, selection, args.cache_dir)
    workspace = Workspace.for_paths(
        paths,
        config,
        selection.rules,
        engine_codes=selection.engine_codes,
        known_codes=[spec.code for spec in specs],
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        jobs=args.jobs or os.cpu_count() or 1,
        prefilter=not args.no_prefilter,
    )
    fix = args.fix and not args.diff
    options = {
        "fix": fix,
        "unsafe_fixes": args.unsafe_fixes,
        "diff": args.diff,
        "force_exclude": args.force_exclude,
    }
    if stdin:
        text = sys.stdin.buffer.read()
        result = workspace.audit(documents={document: text}, **options)
    else:
        result = workspace.audit(args.paths, **options)
    style = Style(unsafe_fixes=args.unsafe_fixes)
    with _report_stream(args.output_file) as out:
        if not args.silent:
            if stdin and fix:
                _write_fixed_source(result, document, text)
                out = sys.stderr
            colour = args.output_format == "text" and wants_colour(args.color, out)
            style = Style(colour=colour, unsafe_fixes=args.unsafe_fixes)
            _report(args, result, style, _names(specs), out)
    for warning in result.warnings:
        if not (args.quiet or args.silent):
            print(f"warning: {warning}", file=sys.stderr)
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    return _exit_status(args, result)


def _write_fixed_source(result: AuditResult, document: Path, text: bytes) -> None:
    """``--fix`` on stdin: the fixed source (or the source unchanged) goes to stdout."""
    fixed = next(iter(result.fixed_documents.values()), text)
    sys.stdout.buffer.write(fixed)
    sys.stdout.flush()


def _report(
    args: argparse.Namespace,
    result: AuditResult,
    style: Style,
    names: dict[str, str],
    out: TextIO,
) -> None:
    text = args.output_format == "text"
    summary = text and not args.quiet
    if args.diff:
        out.write("".join(result.diffs))
        if summary:
            out.write("".join(f"{line}\n" for line in would_fix(result, style)))
        return
    if args.statistics:
        if text:
            out.write(statistics_text(result, style, names, args.fix))
        else:
            out.write(statistics_json(result, style, names))
        return
    out.write(FORMATS[args.output_format](result.findings, style))
    if not text:
        return
    if args.fix and args.show_fixes and not args.quiet:
        out.write("".join(f"{line}\n" for line in show_fixes(result.fixed, names)))
    if summary:
        if result.files_seen == 0 and not result.findings:
            print("warning: No Python files found under the given path(s)", file=sys.stderr)
        out.write("".join(f"{line}\n" for line in closing(result, style, args.fix)))


def _exit_status(args: argparse.Namespace, result: AuditResult) -> int:
    if any("internal error" in e for e in result.errors):
        return EXIT_ERROR
    if args.exit_non_zero_on_fix and result.fixed and not args.diff:
        return EXIT_FINDINGS
    if args.exit_zero:
        return EXIT_CLEAN
    if args.diff:
        return EXIT_FINDINGS if result.diffs else EXIT_CLEAN
    return EXIT_FINDINGS if result.findings else EXIT_CLEAN


def _show_settings(
    config: Config, paths: Sequence[Path], selection: Selection[RuleSpec], cache_dir: Path | None
) -> int:
    """``--show-settings``: where the configuration came from and what it resolved to."""
    root = find_root(paths[0] if paths else Path("."))
    print(f"Settings path: {config.source or 'none (defaults)'}")
    print(f"Project root: {root or 'none (only the given files are the context)'}")
    print(f"Cache folder: {result_cache(config, cache_dir).folder}")
    print()
    print("[tool.swacheck]")
    for field in fields(config):
        if field.name == "source":
            continue
        value = getattr(config, field.name)
        if isinstance(value, tuple):
            value = list(value)
        elif not isinstance(value, str | bool | int | float):
            value = {k: v if isinstance(v, str) else list(v) for k, v in value.items()}
        print(f"{field.name.replace('_', '-')} = {json.dumps(value)}")
    print()
    enabled = [spec.code for spec in selection.rules] + sorted(selection.engine_codes)
    print(f"# enabled codes: {', '.join(sorted(enabled))}")
    return EXIT_CLEAN


def _rule(code: str) -> int:
    from swacheck.docs import render_rule
    from swacheck.rules import rule_by_code

    engine = engine_code(code)
    if engine is not None:
        print(engine.page())
        return EXIT_CLEAN
    rule = rule_by_code(code)
    if rule is None:
        print(f"swacheck: unknown rule {code!r} (see `swacheck rules`)", file=sys.stderr)
        return EXIT_ERROR
    print(render_rule(rule))
    return EXIT_CLEAN


def _rules(output_format: str) -> int:
    from swacheck.docs import render_rule
    from swacheck.report.urls import rule_url
    from swacheck.rule import FixSafety
    from swacheck.rules import all_rules

    if output_format == "json":
        described = [
            {
                "code": rule.code,
                "name": rule.name,
                "summary": rule.summary,
                # ruff's wording; whether each finding's fix is safe is its own.
                "fix": "Fix is not available."
                if rule.fix_safety is FixSafety.NONE
                else "Fix is sometimes available.",
                "fix_safety": rule.fix_safety.value,
                "explanation": render_rule(rule),
                "url": rule_url(rule.code),
            }
            for rule in all_rules()
        ]
        described += [
            {
                "code": c.code,
                "name": c.name,
                "summary": c.summary,
                "fix": c.fix,
                "fix_safety": "safe" if c.fix != "Fix is not available." else "none",
                "explanation": c.page(),
                "url": rule_url(c.code),
            }
            for c in ENGINE_CODES
        ]
        print(json.dumps(described, indent=2))
        return EXIT_CLEAN
    for rule in all_rules():
        fix = "" if rule.fix_safety is FixSafety.NONE else f" [fix: {rule.fix_safety.value}]"
        print(f"{rule.code}  {rule.name:<42} {rule.summary}{fix}")
    for c in ENGINE_CODES:
        note = "" if c.default else " [off unless selected]"
        print(f"{c.code}  {c.name:<42} {c.summary}{note}")
    return EXIT_CLEAN


# What the reference implementation imports: the `reference` extra of pyproject.toml.
DEMO_MODULES = ("torch", "triton", "numpy", "typeguard", "jaxtyping")
DEMO_NEEDS = (
    "swacheck demo runs the reference implementation, which needs the `reference` extra "
    "(torch, triton). From a clone: python -m pip install '.[reference]'; from the "
    "repository: python -m pip install "
    "'swacheck[reference] @ git+https://github.com/swacheck/swacheck'"
)


def _demo(argv: Sequence[str]) -> int:
    """``swacheck demo``: checked for its extra before anything is imported (``--help`` too)."""
    import importlib.util

    missing = [name for name in DEMO_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        print(f"swacheck: {DEMO_NEEDS} (not installed: {', '.join(missing)})", file=sys.stderr)
        return EXIT_ERROR
    from swacheck.reference_impl.demo import main as demo_main

    return demo_main(list(argv))


SERVER_MODULES = ("pygls", "lsprotocol")
SERVER_NEEDS = (
    "swacheck server needs the `lsp` extra (pygls, lsprotocol). From a clone: python -m pip "
    "install '.[lsp]'; from the repository: python -m pip install "
    "'swacheck[lsp] @ git+https://github.com/swacheck/swacheck'"
)


def _server() -> int:
    """``swacheck server``: checked for its extra before anything of it is imported."""
    import importlib.util

    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        print(f"swacheck: {SERVER_NEEDS} (not installed: {', '.join(missing)})", file=sys.stderr)
        return EXIT_ERROR
    from swacheck.server.app import serve

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
        return _rules(args.output_format)
    except ConfigError as exc:
        print(f"swacheck: configuration error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_CLEAN


def run() -> NoReturn:
    """The ``swacheck`` command (the console script and ``python -m swacheck``).

    An audit is a short-lived process whose data (the project's facts, the trees) is
    acyclic and freed on exit: the cyclic garbage collector is off for it, and the
    process ends without tearing down its objects (as mypy does). On SGLang's tree the
    two cost a pre-commit call 0.07 s and 0.05 s.
    """
    argv = sys.argv[1:]
    if argv[:1] != ["audit"]:
        sys.exit(main(argv))
    gc.disable()
    code = main(argv)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


if __name__ == "__main__":
    run()
