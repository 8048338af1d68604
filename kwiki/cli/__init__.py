"""The `kwiki` command line: parse arguments, call the library, map errors to exit codes.

Exit codes: 0 ok, 1 problems found (a failed check, a claim not reproduced), 2 usage or
environment error. Each command's handler is a module of this package (parsing and printing only),
imported only when its command runs, so `kwiki query` does not pay for what `kwiki verify` imports.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from kwiki import __version__
from kwiki.core.errors import KwikiError

# command -> "module:function(args) -> int"
HANDLERS = {
    "check": "kwiki.cli.check:run",
    "schema": "kwiki.cli.schema:run",
    "verify": "kwiki.cli.verify:run",
    "show": "kwiki.cli.show:run",
    "query": "kwiki.cli.query:run",
    "tags": "kwiki.cli.query:run_tags",
    "mcp": "kwiki.cli.mcp:run",
    "build": "kwiki.cli.site:run_build",
    "serve": "kwiki.cli.site:run_serve",
}


def _root_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", metavar="DIR", help="project root holding wiki/ (default: nearest from here)")


def _json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


def _check_args(p: argparse.ArgumentParser) -> None:
    _root_arg(p)
    _json_arg(p)
    p.add_argument("--strict", action="store_true", help="treat warnings (unknown fields, ...) as errors")


def _schema_args(p: argparse.ArgumentParser) -> None:
    _root_arg(p)
    p.add_argument("--check", action="store_true", help="exit 1 if schema/ is stale, write nothing")


def _verify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("pages", nargs="*", metavar="PAGE_ID", help="pages to verify (default: all)")
    p.add_argument("--tag", action="append", default=[], help="only pages with this tag (repeatable)")
    p.add_argument("--arch", help="only pages for this architecture")
    p.add_argument("--compile-only", action="store_true", help="build everything, run nothing")
    p.add_argument("--no-write", action="store_true", help="do not write pages or the results store")
    p.add_argument("--jobs", type=int, default=0, help="parallel builds (default: CPU count)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    _json_arg(p)
    _root_arg(p)


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", metavar="ID")
    _json_arg(p)
    _root_arg(p)


def _query_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tag", action="append", default=[], help="pages with this tag (repeatable; all must match)")
    p.add_argument("--any", action="store_true", help="any of the tags matches")
    p.add_argument("--arch", help="pages whose code runs on this architecture")
    p.add_argument("--type", help="page type (technique, kernel, ...)")
    p.add_argument("--evidence", help="at least this evidence level")
    p.add_argument("--op", help="operation the page applies to (gemm, gemv, ...)")
    p.add_argument("--text", help="full-text search over titles and bodies")
    p.add_argument("--verified-on", metavar="GPU", help="pages verified on this GPU")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N results (default 50; 0: all)")
    _json_arg(p)
    _root_arg(p)


def _tags_args(p: argparse.ArgumentParser) -> None:
    _json_arg(p)
    _root_arg(p)


def _build_args(p: argparse.ArgumentParser) -> None:
    _root_arg(p)
    p.add_argument("--site-dir", default="site", help="output directory (default: site/)")


def _serve_args(p: argparse.ArgumentParser) -> None:
    _root_arg(p)
    p.add_argument("--dev-addr", default="127.0.0.1:8000")


# command -> (help, options); the order is `kwiki --help`'s
COMMANDS = {
    "check": ("validate pages: schema, ids, references, links, artifact paths", _check_args),
    "schema": ("write the JSON Schema files generated from the models", _schema_args),
    "verify": ("build, run, check and time artifacts; write measured numbers back", _verify_args),
    "show": ("one page with its claims and latest measurements", _show_args),
    "query": ("find pages by tag, architecture, type, evidence, text", _query_args),
    "tags": ("tags with their page counts", _tags_args),
    "mcp": ("serve the wiki to coding agents over MCP (stdio)", _root_arg),
    "build": ("build the static site (strict)", _build_args),
    "serve": ("serve the site with live reload", _serve_args),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (for a known `command`) one with that command's options only:
    building every subcommand's options costs a quick `kwiki query` a few milliseconds."""
    parser = argparse.ArgumentParser(prog="kwiki", description="KernelWiki: GPU kernel techniques with re-measured numbers.")
    parser.add_argument("--version", action="version", version=f"kwiki {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (help_text, add_options) in COMMANDS.items():
        if command is None or name == command:
            add_options(sub.add_parser(name, help=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = argv[0] if argv else None
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    module, func = HANDLERS[args.command].split(":")
    try:
        handler = getattr(importlib.import_module(module), func)
        return int(handler(args) or 0)
    except KwikiError as exc:
        print(f"kwiki {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except ModuleNotFoundError as exc:
        missing = exc.name or "a module"
        print(f"kwiki {args.command}: needs {missing!r}, which is not installed", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kwiki {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the last line of defence: one line, never a traceback
        if os.environ.get("KWIKI_DEBUG"):
            raise
        print(f"kwiki {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(set KWIKI_DEBUG=1 for a traceback)", file=sys.stderr)
        return 2
