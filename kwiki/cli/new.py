"""`kwiki new page|artifact`: write a skeleton that passes `kwiki check --strict`, and say what was written."""

from __future__ import annotations

import argparse


def options(p: argparse.ArgumentParser) -> None:
    """The options of `kwiki new` (two subcommands); kept here so `kwiki --help` imports nothing heavy."""
    sub = p.add_subparsers(dest="kind", metavar="KIND")
    sub.required = True
    page = sub.add_parser("page", help="a page skeleton under wiki/, in the folder of its type")
    page.add_argument("id", metavar="ID", help="page id, a slug such as technique-vectorized-loads")
    page.add_argument("--type", metavar="TYPE", help="page type: technique, kernel, pattern, algorithm, ... "
                      "(default: the id's prefix, kernel-x is a kernel; else technique)")
    page.add_argument("--title", metavar="TEXT", help="title (default: from the id)")
    page.add_argument("--arch", default="sm_90a", metavar="ARCH", help="architecture (default sm_90a)")
    page.add_argument("--artifact", metavar="NAME",
                      help="with a claim measured by artifacts/NAME (written as a skeleton if it does not exist)")
    page.add_argument("--root", metavar="DIR", help="project root holding wiki/ (default: nearest from here)")
    artifact = sub.add_parser("artifact", help="an artifact skeleton: artifacts/NAME/artifact.yaml and NAME.cu "
                              "(--kind python: NAME.py for kwiki's harness and a Triton kernels.py)")
    artifact.add_argument("name", metavar="NAME", help="artifact name, a slug such as scale_f32_sm90a")
    artifact.add_argument("--arch", default="sm_90a", metavar="ARCH", help="build target (default sm_90a)")
    artifact.add_argument("--kind", default="cuda", choices=["cuda", "python"],
                          help="cuda (default): a .cu on the shared main; python: a module for kwiki's harness")
    artifact.add_argument("--page", metavar="ID",
                          help="add it to page ID (written as a skeleton measuring it if no page has that id)")
    artifact.add_argument("--root", metavar="DIR", help="project root holding wiki/ (default: nearest from here)")


def run(args: argparse.Namespace) -> int:
    from kwiki.wiki.catalog import find_root
    from kwiki.wiki.new import plan_artifact, plan_page, write

    root = find_root(args.root)
    if args.kind == "page":
        skeleton = plan_page(root, args.id, page_type=args.type, title=args.title, arch=args.arch,
                             artifact=args.artifact)
    else:
        skeleton = plan_artifact(root, args.name, arch=args.arch, page=args.page, kind=args.kind)
    for change in write(root, skeleton):
        verb = "wrote" if change.action == "create" else "edited"
        print(f"{verb} {change.path} ({change.what})")
    pages = f" {skeleton.page_id}" if skeleton.page_id else ""
    print("next: fill in the skeleton, then run")
    print("  kwiki check --strict")
    if skeleton.artifact and skeleton.page_id:
        print(f"  kwiki verify --compile-only{pages}    # on a GPU machine: kwiki verify{pages}")
    elif skeleton.artifact:
        print(f"  kwiki new page ID --artifact {skeleton.artifact}    # or add it to a page's artifacts: "
              "kwiki builds and checks only the artifacts a page names")
    return 0
