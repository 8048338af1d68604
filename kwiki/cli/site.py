"""`kwiki build` and `kwiki serve`: the static site."""

from __future__ import annotations

import argparse
import logging
import shutil
import sys

from kwiki.core.errors import UsageError
from kwiki.site.stage import SERVE_DIR, SiteError, build_site, live_server, output_dir
from kwiki.wiki.catalog import find_root

log = logging.getLogger("kwiki.site")


def run_build(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    site_dir = output_dir(root, args.site_dir)  # UsageError (exit 2) for a folder a build must not empty
    try:
        report = build_site(root, site_dir, strict=True)
    except SiteError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"kwiki build: FAILED: {exc.message}", file=sys.stderr)
        return exc.exit_code
    for warning in report.warnings:
        print(f"kwiki build: warning: {warning}", file=sys.stderr)
    s = report.seconds
    print(f"kwiki build: ok: {report.pages} pages, {report.charts} charts -> {site_dir} "
          f"(generate {s['generate']:.1f} s, mkdocs {s['mkdocs']:.1f} s, agent files {s['export']:.1f} s)")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    host, _, port = args.dev_addr.rpartition(":")
    if not port.isdigit():
        raise UsageError(f"--dev-addr {args.dev_addr!r}: expected HOST:PORT, such as 127.0.0.1:8000")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)-7s - %(message)s"))
    for name in ("mkdocs", "kwiki"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
    server = live_server(root, host or "127.0.0.1", int(port))
    try:
        server.serve()  # type: ignore[no-untyped-call]  # mkdocs leaves LiveReloadServer.serve unannotated
    except KeyboardInterrupt:
        log.info("kwiki serve: stopped")
    finally:
        server.shutdown()
        shutil.rmtree(root / SERVE_DIR, ignore_errors=True)
    return 0
