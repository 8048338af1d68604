"""Code that teaches: what each rung of a ladder adds, as the marked regions of its artifact's sources.

The regions are the rung markers (`// kwiki:rung NAME` ... `// /kwiki:rung NAME`, kwiki.wiki.rungs), read at
build time from the sources the ladder ran, so an excerpt is never a stored copy that could go stale: a
region that is removed takes its excerpt with it, and a marker that names no variant (or a variant without a
rung) fails `kwiki check` at its line. Each rung with regions gets one collapsed block (`excerpts`), in rung
order, on the artifact's own page (kwiki.site.render.artifact_page, out of the first view's weight): its
number, its name, what it adds (the manifest's `adds`) over the rung below it, then each region with its file
and lines. A region longer than `MAX_LINES` is cut there, and says how many lines it left out. The page that
owns the ladder lists the rungs with what each adds and a link to its code (`rung_index`).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING

from kwiki.core.errors import ManifestError
from kwiki.site.render import fence, md_text

if TYPE_CHECKING:
    from kwiki.wiki.manifest import Manifest
    from kwiki.wiki.rungs import RungRegion

MAX_LINES = 60


def _title(text: str) -> str:
    """Text for an admonition's quoted title: HTML escaped (quotes too), Markdown syntax backslashed."""
    one_line = " ".join(text.split())
    return re.sub(r"([\\`*_\[\]{}|!~])", r"\\\1", html.escape(one_line, quote=False)).replace('"', "&quot;")


def rung_anchor(variant: str) -> str:
    return "rung-" + re.sub(r"[^A-Za-z0-9_-]+", "-", variant)


def _regions(root: Path, rel: str, manifest: Manifest) -> dict[str, list[RungRegion]]:
    from kwiki.wiki.manifest import rung_regions

    try:
        regions = rung_regions(manifest, root / rel, root)
    except ManifestError:
        return {}  # `kwiki check` reports the broken marker; the artifact section shows the problem
    by_variant: dict[str, list[RungRegion]] = {}
    for region in regions:
        by_variant.setdefault(region.variant, []).append(region)
    return by_variant


def rung_index(root: Path, rel: str, manifest: Manifest, code_page: str) -> str:
    """For the page that owns the ladder: a link to each marked rung's code on the artifact's page (`code_page`,
    relative), in rung order, on one line; '' when no region is marked. What each rung adds is the ladder's list
    just above it: said once (a page's weight is read on a phone before anything else)."""
    by_variant = _regions(root, rel, manifest)
    rungs = sorted((v for v in manifest.variants if v.rung is not None and v.name in by_variant),
                   key=lambda v: (v.rung or 0, v.name))
    if not rungs:
        return ""
    # plain link text: code inside a link fails the dark scheme's contrast (axe-core)
    items = [f"rung {v.rung} [{md_text(v.name)}]({code_page}#{rung_anchor(v.name)})" for v in rungs]
    # a paragraph, not a heading: a heading is listed again in both tables of contents of every page view
    return f"**The code of each rung** ({md_text(manifest.name)}): " + " · ".join(items) + "\n"


def excerpts(root: Path, rel: str, manifest: Manifest) -> str:
    """The rungs' excerpts of one artifact as Markdown ('' when its sources mark no region)."""
    by_variant = _regions(root, rel, manifest)
    rungs = sorted((v for v in manifest.variants if v.rung is not None), key=lambda v: (v.rung or 0, v.name))
    out = []
    for i, v in enumerate(rungs):
        if v.name not in by_variant:
            continue
        below = next((b for b in reversed(rungs[:i]) if (b.rung or 0) < (v.rung or 0)), None)
        title = f"rung {v.rung} {v.name}" + (f": {v.adds}" if v.adds else "")
        lines = [f'<span id="{rung_anchor(v.name)}"></span>', "", f'??? example "{_title(title)}"', ""]
        if below is not None:
            lines += [f"    Over rung {below.rung} `{below.name}`" + (f" ({md_text(below.adds)})" if below.adds else "")
                      + ", this rung adds the code below.", ""]
        for region in by_variant[v.name]:
            code = region.text.split("\n")
            shown = code[:MAX_LINES]
            lang = "text"  # unhighlighted: a highlighted line weighs 5 times as much, and a page carries many
            where = f"{region.path}, lines {region.first}–{region.last}"
            lines += [f"    `{where}`" if "`" not in where else f"    {md_text(where)}", ""]
            lines.append(fence("\n".join(shown), lang, "    ").rstrip("\n"))
            if len(code) > MAX_LINES:
                lines += ["", f"    ({len(code) - MAX_LINES} more lines in the file)"]
            lines.append("")
        out.append("\n".join(lines))
    if not out:
        return ""
    return f"#### What each rung adds: {md_text(manifest.name)}\n\n" + "\n".join(out) + "\n"
