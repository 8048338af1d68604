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
from collections.abc import Callable

from kwiki import __version__
from kwiki.core.errors import KwikiError

# command -> "module:function(args) -> int"
HANDLERS = {
    "new": "kwiki.cli.new:run",
    "check": "kwiki.cli.check:run",
    "schema": "kwiki.cli.schema:run",
    "verify": "kwiki.cli.verify:run",
    "show": "kwiki.cli.show:run",
    "query": "kwiki.cli.query:run",
    "tags": "kwiki.cli.query:run_tags",
    "mcp": "kwiki.cli.mcp:run",
    "build": "kwiki.cli.site:run_build",
    "serve": "kwiki.cli.site:run_serve",
    "export": "kwiki.cli.export:run",
    "results": "kwiki.cli.results:run",
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
    p.add_argument("--other-gpu", action="store_true",
                   help="write pages whose measurements are another GPU model's (by default such a page is left "
                        "as it is, and this run's figures go to the results store only)")
    p.add_argument("--jobs", type=_jobs, default=0, help="parallel builds (default: CPU count)")
    p.add_argument("--until-runs", type=_runs, metavar="N",
                   help="run only the artifacts whose series have fewer than N runs in results/ (any session), "
                        "and those whose figures their claims compare")
    p.add_argument("--require-gpu", action="store_true",
                   help="exit 2 when no GPU is found (CI on GPU runners); without it a GPU-less machine only builds")
    p.add_argument("--require-disassembler", action="store_true",
                   help="exit 2 when no cuobjdump is found to check the SASS expectations (the default under CI); "
                        "without it they are skipped with a warning")
    p.add_argument("--profile", action="store_true",
                   help="build, then profile each artifact once under Nsight Compute (ncu) instead of timing it: "
                        "declared bytes or FLOPs above the profiled ones fail the profile gate; the audits are "
                        "committed to results/audits/, and a later timed run gives its records the (cached) "
                        "counters as figures")
    p.add_argument("--profile-tolerance", type=_tolerance, default=None, metavar="T",
                   help="the profile gate fails declared work above profiled x (1 + T) (default: each level's, set "
                        "from evidence: DRAM and L2 bytes 0.02, FLOPs 0.01)")
    p.add_argument("--no-audit", action="store_true",
                   help="do not run the profile audits the run's records lack (where ncu is found, a timed run runs "
                        "them: a page is verified only when every record its claims use passed one)")
    p.add_argument("--list-audits", action="store_true",
                   help="only list the profile audits the selected pages' records lack (nothing is built or run)")
    p.add_argument("--sanitize", nargs="?", const="memcheck,racecheck,synccheck", type=_tools, metavar="TOOLS",
                   help="build, then run each variant, small, under compute-sanitizer's tools instead of timing "
                        "it (default: memcheck,racecheck,synccheck); errors the manifest does not expect fail the "
                        "sanitize gate")
    p.add_argument("--variants", type=_names, metavar="A,B",
                   help="with --profile or --sanitize: only these variants (of the selected pages' artifacts)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run on the Ray cluster at ADDRESS (HOST:PORT of its head), one run per GPU model there "
                        "(the 'fleet' extra)")
    p.add_argument("--task-timeout", type=_seconds, metavar="S",
                   help="with --ray: every run task's time limit (default: its manifests' timeouts + 120 s)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    _json_arg(p)
    _root_arg(p)


def _tolerance(text: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a number, got {text!r}") from None
    if not 0 <= t < 10:
        raise argparse.ArgumentTypeError(f"wants a number from 0 to 10, got {text!r}")
    return t


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"wants variant names separated by commas, got {text!r}")
    return names


def _tools(text: str) -> list[str]:
    from kwiki.wiki.manifest import SANITIZE_TOOLS

    tools = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in tools if t not in SANITIZE_TOOLS]
    if bad or not tools:
        raise argparse.ArgumentTypeError(f"wants tools among {', '.join(SANITIZE_TOOLS)}, got {text!r} (page ids go "
                                         "before --sanitize, or write --sanitize=TOOLS)")
    return tools


def _seconds(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants seconds, got {text!r}") from None
    if not 0 < s <= 86400:
        raise argparse.ArgumentTypeError(f"wants seconds from 0 to 86400, got {text!r}")
    return s


def _at_least_one(text: str, what: str, hint: str = "") -> int:
    """A whole number of at least 1 (argparse's message names `what` otherwise)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} {what}: give at least 1{hint}")
    return n


def _jobs(text: str) -> int:
    return _at_least_one(text, "parallel builds", " (leave it out for one per CPU)")


def _runs(text: str) -> int:
    return _at_least_one(text, "runs")


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", metavar="ID")
    p.add_argument("--ladder", action="store_true",
                   help="the page's ladders as data instead (each variant's time, rate, ratio to the baseline)")
    p.add_argument("--shape", help="with --ladder: only shapes whose label contains this, e.g. 8192x8192")
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
    p.add_argument("--detail", choices=["brief", "full"], default="brief",
                   help="JSON: brief hits (id, title, type, evidence, summary, matching claims; the default) or full")
    _json_arg(p)
    _root_arg(p)


def _tags_args(p: argparse.ArgumentParser) -> None:
    _json_arg(p)
    _root_arg(p)


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["skills"], help="skills: one Agent Skill per page, and a router skill")
    p.add_argument("dir", metavar="DIR", help="directory to write (created; kwiki's skills in it are replaced)")
    _root_arg(p)


def _build_args(p: argparse.ArgumentParser) -> None:
    _root_arg(p)
    p.add_argument("--site-dir", default="site", help="output directory (default: site/)")


def _serve_args(p: argparse.ArgumentParser) -> None:
    _root_arg(p)
    p.add_argument("--dev-addr", default="127.0.0.1:8000", type=_dev_addr)


def _dev_addr(text: str) -> str:
    port = text.rpartition(":")[2]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT with a port from 1 to 65535, "
                                         "such as 127.0.0.1:8000")
    return text


# command -> (help, options); the order is `kwiki --help`'s
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "new": ("write a skeleton page or artifact that passes kwiki check",
            lambda p: importlib.import_module("kwiki.cli.new").options(p)),
    "check": ("validate pages: schema, ids, references, links, artifact paths", _check_args),
    "schema": ("write the JSON Schema files generated from the models", _schema_args),
    "verify": ("build, run, check and time artifacts; write measured numbers back", _verify_args),
    "show": ("one page with its claims and latest measurements", _show_args),
    "query": ("find pages by tag, architecture, type, evidence, text", _query_args),
    "tags": ("tags with their page counts", _tags_args),
    "mcp": ("serve the wiki to coding agents over MCP (stdio)", _root_arg),
    "build": ("build the static site (strict)", _build_args),
    "serve": ("serve the site with live reload", _serve_args),
    "export": ("write the wiki as Agent Skills (export skills DIR)", _export_args),
    "results": ("the results store: merge another lab's results", lambda p: importlib.import_module(
        "kwiki.cli.results").options(p)),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (for a known `command`) one with that command's options only:
    building every subcommand's options costs a quick `kwiki query` a few milliseconds."""
    parser = argparse.ArgumentParser(prog="kwiki",
                                     description="KernelWiki: GPU kernel techniques with re-measured numbers.")
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
        print(f"kwiki {args.command}: {_missing(exc.name)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kwiki {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # the machine, not kwiki: a file where a folder should be, a full disk, a busy port
        if os.environ.get("KWIKI_DEBUG"):
            raise
        print(f"kwiki {args.command}: {_os_problem(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # the last line of defence: one line, never a traceback
        if os.environ.get("KWIKI_DEBUG"):
            raise
        print(f"kwiki {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(set KWIKI_DEBUG=1 for a traceback)", file=sys.stderr)
        return 2


# top-level package of a module an optional extra installs -> that extra (pyproject.toml)
EXTRAS = {"mkdocs": "site", "material": "site", "nh3": "site", "pymdownx": "site", "markdown": "site",
          "mcp": "mcp", "ray": "fleet"}


def _missing(name: str | None) -> str:
    top = (name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return f"needs {name or 'a module'!r}, which is not installed"
    return (f"needs {name!r}, which comes with kwiki's '{extra}' extra: "
            f"pip install -e '.[{extra}]' (from a checkout) or pip install 'kwiki[{extra}]'")


def _os_problem(exc: OSError) -> str:
    """One line for an error of the operating system, naming the path that is in the way."""
    why = exc.strerror or str(exc)
    if exc.filename is None:
        return why
    path = os.fsdecode(exc.filename)
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        # the nearest existing part of the path that is not a folder is what blocks it
        part = path
        while part and part != os.path.dirname(part):
            if os.path.lexists(part) and not os.path.isdir(part):
                if part != path or isinstance(exc, NotADirectoryError):
                    return f"{part} is a file where kwiki needs a directory (move it away)"
                break
            part = os.path.dirname(part)
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a directory where kwiki needs a file (move it away)"
    return f"{path}: {why}"
