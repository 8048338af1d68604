"""Markdown fragments the site adds to a page: header, claims table, artifact sources, charts.

Every piece of author text (titles, statements, tags, file names, manifest fields) goes through
`md_text` or `html_text`, so a `<script>` in a title is shown as text and never runs. Links
are Markdown links, which MkDocs checks and rewrites; raw HTML carries no links.
"""

from __future__ import annotations

import html
import json
import posixpath
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from kwiki.core.errors import ManifestError, printable
from kwiki.core.tracked import artifact_entry_problem, unpublishable
from kwiki.results import tables
from kwiki.results.standing import Standing
from kwiki.results.states import claim_word
from kwiki.results.trace import PageTrace
from kwiki.wiki.catalog import ARTIFACTS_DIR
from kwiki.wiki.model import Claim, MeasuredClaim, PageMeta
from kwiki.wiki.verdict import NOT_REPRODUCED, OUT_OF_SCOPE, PASSING, Verdict

if TYPE_CHECKING:
    from kwiki.wiki.manifest import Manifest

MAX_SOURCE_BYTES = 256 * 1024
# a longer file is shown as plain text: highlighting wraps each token in a span, 7 to 9 times the file's bytes
# (the 55 KB of decode_mma.cu became 388 KB of its artifact's page, past a first view's budget)
HIGHLIGHT_BYTES = 4 * 1024
LANGUAGES = {".cu": "cuda", ".cuh": "cuda", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp",
             ".cxx": "cpp", ".py": "python", ".sh": "bash", ".yaml": "yaml", ".yml": "yaml", ".json": "json",
             ".ptx": "text", ".txt": "text", ".mk": "make", ".cmake": "cmake", ".toml": "toml"}
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}|#!~])")
VERDICT_CLASS = {**dict.fromkeys(PASSING, "pass"), **dict.fromkeys(NOT_REPRODUCED, "fail"),
                 Verdict.error: "error", Verdict.ambiguous: "warn"}


def html_text(text: object) -> str:
    """Text for HTML: every '<', '>', '&' and quote escaped."""
    return html.escape(str(text), quote=True)


def md_text(text: object) -> str:
    """Text for an inline Markdown context, shown literally: HTML escaped, Markdown syntax backslashed."""
    one_line = " ".join(str(text).split())
    return _MD_SPECIAL.sub(r"\\\1", html_text(one_line))


def badge(text: str, *classes: str) -> str:
    names = " ".join(["kw-badge", *classes])
    return f'<span class="{names}">{html_text(text)}</span>'


def arch_anchor(arch: str) -> str:
    """The anchor of an architecture's section in the architectures index."""
    return arch.replace("_", "-")


def relative(path: str, start: str) -> str:
    """The relative link from staged page `start` to staged file `path`."""
    return posixpath.relpath(path, posixpath.dirname(start) or ".")


# ---------------------------------------------------------------- header


def _drift(meta: PageMeta, ids: list[str]) -> list[str]:
    """'bw-16384 +8.4% (regressed)' for each drifted claim: the size of its move and whether it went the
    claim's better way (`standing` decided which claims drifted; this only reads their figures)."""
    claims = {c.id: c for c in meta.claims}
    measured = meta.measurements.claims if meta.measurements else {}
    out = []
    for cid in ids:
        mc, claim = measured.get(cid), claims.get(cid)
        if mc is not None and mc.drift is not None and claim is not None:
            better = claim.better or ("lower" if claim.metric.value == "time" else "higher")
            way = "improved" if (mc.drift > 0) == (better == "higher") else "regressed"
            out.append(f"{cid} {mc.drift * 100:+.1f}% vs its series ({way})")
        elif mc is not None and mc.change in ("faster", "slower"):
            out.append(f"{cid} {mc.change} than the run before")
        else:
            out.append(cid)
    return out


def state_line(meta: PageMeta, st: Standing) -> str:
    """One line: where the page stands (`Standing.summary`), then what was not reproduced, what a run could
    not settle, how many claims are cited figures this machine cannot test, and each drift with its size
    and direction."""
    measured = meta.measurements.claims if meta.measurements else {}
    unsettled = st.judged - st.passing - st.failing
    cited = sum(1 for c in meta.claims if (measured[c.id].verdict in OUT_OF_SCOPE if c.id in measured
                                           else c.measure is None))
    parts = [st.summary()]
    if unsettled > 0 and st.state.value != "untraceable":
        parts.append(f"{unsettled} too close to call or not run")
    if cited and st.state.value != "not-measured":
        parts.append(f"{cited} cited figure{'s' if cited != 1 else ''} not testable here")
    elif cited:
        parts.append(f"{cited} of {len(meta.claims)} cited figures not testable here")
    drift = _drift(meta, st.moved)
    if drift:
        parts.append("drifted: " + "; ".join(drift))
    better = _drift(meta, st.improved)  # said, never an alarm (kwiki.results.states)
    if better:
        parts.append("improved: " + "; ".join(better))
    return " · ".join(parts)


def header(meta: PageMeta, st: Standing, page_rel: str, arch_index: str) -> str:
    """The page's state badge and state line, its architectures (linked to their index), its summary; kept out
    of the search index (the summary reaches it as its own field, kwiki.site.searchindex)."""
    badges = [state_badge(st)]
    if st.state.value == "not-measured":  # nothing measured: what the figures rest on is the news
        badges.append(evidence_badge(st.evidence))
    to_index = relative(arch_index, page_rel)
    arches = " ".join(f"[{md_text(a)}]({to_index}#{arch_anchor(a)}){{ .kw-arch }}" for a in meta.architectures)
    lines = ['<div class="kw-header" markdown data-search-exclude>', "", " ".join(badges), "",
             f'<p class="kw-stateline">{html_text(state_line(meta, st))}</p>', ""]
    if arches:
        lines += [f"**Architectures:** {arches}", ""]
    if meta.summary:
        lines += [f"*{md_text(meta.summary)}*", ""]
    lines += ["</div>", ""]
    return "\n".join(lines)


def sources_section(meta: PageMeta) -> str:
    """The page's sources (front matter `sources`): title and link of each, and the claims that cite it with
    the hardware they were measured on. A source without a URL is named, not linked."""
    from kwiki.wiki.model import SourceEntry

    entries = [s if isinstance(s, SourceEntry) else SourceEntry(id=s) for s in meta.sources]
    if not entries:
        return ""
    cited: dict[str, list[str]] = {}
    for c in meta.claims:
        if c.source:
            cited.setdefault(c.source, []).append(c.id)
    out = ['<div class="kw-sources" markdown>', "", "## Sources", ""]
    for s in entries:
        title = md_text(s.title or s.id)
        url = s.url if s.url and s.url.startswith(("https://", "http://")) else None
        line = f"- <span id=\"source-{html_text(s.id)}\"></span>" + (f"[{title}](<{url}>)" if url else title)
        line += f" (`{s.id}`)" if "`" not in s.id else ""
        if s.note:
            line += f": {md_text(s.note)}"
        if cited.get(s.id):
            line += " · cited by " + ", ".join(f"`{cid}`" for cid in cited[s.id])
        out.append(line)
    out += ["", "</div>", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- claims


def _verdict_badge(claim: Claim, mc: MeasuredClaim | None, caught: str | None = None) -> str:
    """The claim's state in words (kwiki.results.states.claim_word) as a badge."""
    word, kind = claim_word(claim, mc, caught)
    return badge(word, "kw-verdict", f"kw-v-{kind}")


def claims_table(meta: PageMeta, trace: PageTrace | None = None) -> str:
    """The page's claims table (kwiki.results.tables) with escaped text and verdict badges; a figure that does
    not trace to the results store (`trace`) shows 'untraceable' where its verdict would be, and why below."""
    if not meta.claims:
        return ""
    measured = meta.measurements.claims if meta.measurements else {}
    untraceable = {id(mc): trace.untraceable(cid) for cid, mc in measured.items()} if trace is not None else {}

    caught = trace.caught() if trace is not None else {}

    def verdict(claim: Claim, mc: MeasuredClaim | None) -> str:
        why = untraceable.get(id(mc)) if mc is not None else None
        if why is not None and mc is not None:  # (a reason is looked up only for a measured claim)
            return badge(f"untraceable (says {mc.verdict.value})", "kw-verdict", "kw-v-untraceable")
        shown = _verdict_badge(claim, mc, caught.get(claim.id))
        if trace is not None and claim.id in trace.changed:  # kwiki.results.freshness: said why below the table
            shown += " " + badge("earlier code", "kw-verdict", "kw-v-none")
        return shown

    # one provenance for every measured claim (a full run): said once below the table, not on every row
    wheres = {tables.provenance_text(mc.provenance) for c in meta.claims
              if (mc := measured.get(c.id)) is not None and mc.provenance is not None}
    shared = next(iter(wheres)) if len(wheres) == 1 else None
    # measured claims first: cited figures no run measures (a page's legacy rows) do not open the table
    claims = sorted(meta.claims, key=lambda c: c.id not in measured)
    table = tables.claims_table(claims, measured, text=md_text, verdict=verdict, provenance=shared is None)
    titles = {e.id: e.title or e.id for e in meta.sources if not isinstance(e, str)}
    for source in sorted({c.source for c in meta.claims if c.source}, key=len, reverse=True):
        # each cited figure links to its entry in the page's sources section (`sources_section`)
        if source in titles or source in meta.sources:
            link = f"source: [{md_text(titles.get(source, source))}](#source-{html_text(source)})"
            table = table.replace(f"source: {md_text(source)}", link)
    out = ['<div class="kw-claims kw-wide" markdown data-search-exclude>', "", table]
    if shared is not None:
        out += ["", f"Every measured figure above: {md_text(shared)}.", ""]
    if trace is not None and trace.changed:
        why: dict[str, list[str]] = {}
        for cid, reason in sorted(trace.changed.items()):
            why.setdefault(reason, []).append(cid)
        out += [("**Earlier code:** the figures marked so were measured before their artifact last changed. They "
                 "describe the code that ran then, not the code this page links to now; `kwiki verify` measures "
                 "the current code:"), "",
                *[f"- {md_text(', '.join(ids))}: {md_text(reason)}" for reason, ids in sorted(why.items())], ""]
    if trace is not None and not trace.traceable:
        out += [("**Untraceable:** these figures do not trace to the results store, so none counts as verified "
                 "(re-run `kwiki verify`):"), "", *[f"- {md_text(reason)}" for reason in trace.reasons()], ""]
    return "\n".join([*out, "</div>", ""])


# ---------------------------------------------------------------- artifacts


def fence(text: str, lang: str, indent: str = "") -> str:
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, run + 1)
    body = text if text.endswith("\n") else text + "\n"
    lines = [f"{fence}{lang}", *body.split("\n")[:-1], fence]
    return "\n".join(indent + line if line else line for line in lines) + "\n"


def source_block(root: Path, path: Path, shown_as: str, files: frozenset[str] | None = None) -> str:
    """A collapsed admonition holding one file of the repository, highlighted by its extension up to
    HIGHLIGHT_BYTES.

    A file the site may not publish (kwiki.core.tracked: a dot-component, a link that leads out of
    artifacts/, a file git does not track; `files` is `tracked(root)`) is named, never read.
    """
    title = html_text(shown_as).replace('"', "&quot;")
    why = unpublishable(root, path, ARTIFACTS_DIR, files)
    if why is not None or not path.is_file():
        return f'!!! failure "{title}"\n\n    {md_text(why or "not a regular file")}.\n\n'
    data = path.read_bytes()
    if len(data) > MAX_SOURCE_BYTES:
        return f'??? warning "{title}"\n\n    {len(data)} bytes, too large to show here.\n\n'
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").expandtabs(4)
    lang = LANGUAGES.get(path.suffix.lower(), "text") if len(data) <= HIGHLIGHT_BYTES else "text"
    return f'??? abstract "{title}"\n\n{fence(text, lang, "    ")}\n'


def _utf8(name: str) -> bool:
    """Whether a file name (as os.fsdecode gave it) is UTF-8, so that a page can carry it."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def build_lines(manifest: Manifest, rel: str) -> list[str]:
    """The commands that build the artifact, one per target, run from the repository root."""
    from kwiki.core.arch import parse_arch
    from kwiki.wiki.buildline import BuildJob, command
    from kwiki.wiki.manifest import HOST

    out = []
    directory = Path(rel)
    for target in manifest.targets:
        b = manifest.build
        if b.script:
            gencode = "" if target == HOST else parse_arch(target).gencode()
            env = f"KWIKI_TARGET={target} KWIKI_GENCODE={shlex.quote(gencode)} KWIKI_OUT={manifest.name} " \
                  f"KWIKI_COMMON=../common NVCC=nvcc"
            out.append(f"(cd {shlex.quote(rel)} && {env} bash {shlex.quote(b.script)})")
            continue
        job = BuildJob(artifact=manifest.name, directory=directory, manifest=manifest, target=target)
        argv = command(job, Path(""), Path(manifest.name), "nvcc", "c++")
        out.append(shlex.join(argv) if isinstance(argv, list) else f"# {target}: {argv}")
    return out


def build_text(manifest: Manifest, rel: str) -> str:
    """How the artifact is built, as Markdown: the commands of a binary artifact (`build_lines`), or for a
    Python artifact that kwiki imports its module under its harness (no build line of nvcc's: there is none,
    except for the CUDA sources it loads, named as such)."""
    if manifest.kind != "python" or manifest.python is None:
        return "Build (from the repository root):\n\n" + fence("\n".join(build_lines(manifest, rel)), "sh")
    py = manifest.python
    text = (f"No build: `kwiki verify` imports `{rel}/{py.module}` and runs it under kwiki's harness "
            "(`artifacts/common/kwiki_harness.py`), which owns the inputs, the check and the clock.")
    if py.cuda:
        text += (" The CUDA sources it loads (" + ", ".join(f"`{c}`" for c in py.cuda) + ") are compiled by nvcc "
                 "into one shared library per target.")
    return text if "`" not in rel else md_text(text)


def _manifest_section(root: Path, rel: str, files: frozenset[str] | None) -> str:
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    directory = root / rel
    try:
        manifest = load_manifest(directory, root)
    except ManifestError as exc:
        return f'!!! failure "manifest problem"\n\n    {md_text(str(exc))}\n\n'
    lines = [f"**{md_text(manifest.title)}**: targets {md_text(', '.join(manifest.targets))}; "
             f"variants {md_text(', '.join(v.name for v in manifest.variants))}"
             + (f"; baseline {md_text(manifest.baseline)}" if manifest.baseline else "") + ".", ""]
    described = [v for v in manifest.variants if v.description]
    if described:
        lines += [f"- `{v.name}`: {md_text(v.description)}" for v in described] + [""]
    lines += [build_text(manifest, rel), ""]
    b = manifest.build
    named = [*b.sources, *b.headers, *([b.script] if b.script else [])]
    if manifest.python is not None:  # its module, the kernels beside it, the CUDA it loads
        named += [manifest.python.module, *sorted(p.name for p in directory.glob("*.py")), *manifest.python.cuda]
    blocks = [source_block(root, directory / f, f"{rel}/{f}", files) for f in dict.fromkeys(named)
              if (directory / f).is_file()]
    blocks.append(source_block(root, directory / MANIFEST, f"{rel}/{MANIFEST}", files))
    return "\n".join(lines) + "\n" + "".join(blocks)


def artifact_sources(root: Path, rel: str, files: frozenset[str] | None = None) -> str | None:
    """The Markdown of an artifact's own page (`artifact_page`): its manifest, build line and source files,
    collapsed; None when there is nothing to publish (refused by kwiki.core.tracked's rule, or missing).
    `files`: `tracked(root)`."""
    from kwiki.wiki.manifest import MANIFEST

    if artifact_entry_problem(root, rel, files, must_exist=False):  # before stripping: '/' must stay absolute
        return None
    rel = rel.rstrip("/")
    path = root / rel
    if (path / MANIFEST).is_file():
        return _manifest_section(root, rel, files)
    if path.is_file():
        return source_block(root, path, rel, files)
    if path.is_dir():
        listed = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in LANGUAGES
                        and not p.name.startswith("."))
        return "".join(source_block(root, p, f"{rel}/{p.name}", files) if _utf8(p.name) else
                       f'!!! failure "{md_text(printable(p.name))}"\n\n    Not published: the file name is not '
                       "UTF-8 (rename it).\n\n" for p in listed[:20])
    return None


def artifact_page(root: Path, rel: str, files: frozenset[str] | None = None) -> str | None:
    """A page of its own for an artifact's sources, shared by every page that names it: kept out of the
    navigation and the search index (the same file is indexed nowhere rather than on each page)."""
    body = artifact_sources(root, rel, files)
    if body is None:
        return None
    rel = rel.rstrip("/")
    front = {"title": html_text(f"Artifact {rel}"), "search": {"exclude": True}}
    lines = ["---", *[f"{k}: {json.dumps(v)}" for k, v in front.items()], "---", "",
             '<div class="kw-artifacts" markdown>', "",
             f"The sources of `{rel}`, as `kwiki verify` builds and runs them." if "`" not in rel else "", "",
             body, "</div>", ""]
    return "\n".join(lines)


def artifact_section(root: Path, meta: PageMeta, pages: dict[str, str] | None = None, page_rel: str = "",
                     files: frozenset[str] | None = None) -> str:
    """Each artifact the page names, and a link to the page of its sources (`pages`: artifact rel -> staged
    page); without `pages`, the sources themselves, collapsed."""
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    if not meta.artifacts:
        return ""
    out = ['<div class="kw-artifacts" markdown>', "", "## Artifact sources", ""]
    for key, rel in sorted(meta.artifacts.items()):
        why = artifact_entry_problem(root, rel, files, must_exist=False)  # before stripping: '/' stays absolute
        rel = rel.rstrip("/")
        path = root / rel
        out += [f"### {md_text(key)}: `{rel}`" if "`" not in rel else f"### {md_text(key)}", ""]
        if why:
            out.append(f'!!! failure "not published"\n\n    {md_text(why)}.\n')
        elif pages is None or rel not in pages:
            body = artifact_sources(root, rel, files)
            out.append(body if body is not None else f'!!! failure "missing artifact"\n\n    {md_text(rel)} does not '
                                                     "exist.\n")
        else:
            if (path / MANIFEST).is_file():
                try:
                    m = load_manifest(path, root)
                    out += [f"**{md_text(m.title)}**: targets {md_text(', '.join(m.targets))}"
                            + (f"; baseline `{m.baseline}`" if m.baseline and "`" not in m.baseline else "") + ".", "",
                            build_text(m, rel), ""]
                except ManifestError as exc:
                    out.append(f'!!! failure "manifest problem"\n\n    {md_text(str(exc))}\n')
            out += [f"[The artifact's sources, manifest and variants]({relative(pages[rel], page_rel)})", ""]
    out += ["</div>", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- charts and problems


def chart(image: str, page_rel: str, alt: str) -> str:
    """A chart's image, fetched only when it scrolls into view (charts are not part of a first view)."""
    return f"![{md_text(alt)}]({relative(image, page_rel)}){{ .kw-chart loading=lazy }}\n"


def problems_note(messages: list[str]) -> str:
    items = "\n".join(f"    - {md_text(m)}" for m in messages)
    return f'!!! failure "This page does not pass kwiki check"\n\n{items}\n\n'


def state_badge(st: Standing) -> str:
    return badge(st.state.label, "kw-state", f"kw-state-{st.state.value}")


def evidence_badge(level: str) -> str:
    return badge(level, "kw-ev", f"kw-ev-{level}")


STYLESHEET = """\
/* kwiki: badges, header, claims, ladders, charts, home page (generated; no web fonts, no remote resources).
   Badge colours hold WCAG AA (4.5:1) against their text in both schemes. */
.kw-badge { display: inline-block; padding: .05em .6em; margin: 0 .3em .3em 0; border-radius: .8em;
  font-size: .72rem; font-weight: 600; line-height: 1.6; color: #fff; background: #616161; white-space: nowrap; }
.kw-ev-spec { background: #616161; }
.kw-ev-source-reported { background: #6d4c41; }
.kw-ev-measured { background: #1565c0; }
.kw-ev-verified { background: #2e7d32; }
.kw-state-verified, .kw-v-pass { background: #2e7d32; }
.kw-state-measured { background: #1565c0; }
.kw-state-provisional { background: #3f51b5; }
.kw-state-drifted, .kw-v-error { background: #bf360c; }
.kw-state-not-reproduced, .kw-v-fail { background: #c62828; }
.kw-state-not-measured, .kw-v-none { background: #616161; }
/* a kernel below its own goal reads amber, its words say by how much (kwiki.results.states); never red */
.kw-v-warn, .kw-state-below-goal { background: #f9a825; color: #000; }
.kw-state-untraceable, .kw-ev-untraceable, .kw-v-untraceable { background: #f9a825; color: #000; }
.kw-header { border-left: .25rem solid var(--md-primary-fg-color); padding: .3rem .9rem; margin: 0 0 1.2rem; }
.kw-header p { margin: .3em 0; }
.kw-stateline { font-size: .75rem; }
.kw-arch { font-family: var(--md-code-font-family); font-size: .8em; }
.kw-sources li { margin-bottom: .2em; }
/* every page uses the width of the window (up to 90rem): the layout does not jump from page to page */
.md-grid { max-width: 90rem; }
/* the answer box: what the measurements say, first */
.kw-answer { border: .05rem solid var(--md-default-fg-color--lightest); border-left: .25rem solid #2e7d32;
  border-radius: .2rem; padding: .4rem .9rem; margin: 0 0 1.2rem; font-size: .75rem; }
.md-typeset .kw-answer p, .md-typeset .kw-answer ul { margin: .25em 0; }
.md-typeset .kw-answer li { margin: .1em 0 .1em 1em; }
.kw-answer .kw-fig { white-space: nowrap; }
.kw-answer-where, .kw-answer-not { color: var(--md-default-fg-color--light); }
.kw-shape { font-weight: 600; }
/* tables: no wider than their column (Material's scroll wrapper reaches 16 px past it on either side) */
.md-typeset .md-typeset__scrollwrap { margin-left: 0; margin-right: 0; }
.md-typeset .md-typeset__table { padding: 0; }
.md-typeset :is(.kw-claims, .kw-home, .kw-decisions, .kw-history) .md-typeset__table { display: block; }
/* claims: every column in view, text wrapping inside its cell */
.md-typeset .kw-claims table:not([class]) { display: table; width: 100%; font-size: .7rem; }
.md-typeset .kw-claims td, .md-typeset .kw-claims th { padding: .5em .6em; overflow-wrap: anywhere; }
.md-typeset .kw-claims td:first-child { min-width: 12em; }
/* ladders: a table per shape; the variant column stays in view when the table scrolls */
.kw-scroll { overflow-x: auto; margin: .4rem 0 1rem; }
.kw-scroll:focus-visible { outline: .1rem solid var(--md-accent-fg-color); }
.md-typeset table.kw-ladder-table { border-collapse: separate; border-spacing: 0; font-size: .7rem; width: 100%;
  background: var(--md-default-bg-color); }
.md-typeset .kw-ladder-table caption { text-align: left; font-weight: 700; padding: .3em 0; caption-side: top; }
.md-typeset .kw-ladder-table th, .md-typeset .kw-ladder-table td { padding: .35em .6em; text-align: right;
  border-top: .05rem solid var(--md-typeset-table-color, var(--md-default-fg-color--lightest));
  white-space: nowrap; vertical-align: top; }
.md-typeset .kw-ladder-table thead th { font-weight: 700; border-top: 0; }
.md-typeset .kw-ladder-table th:first-child { position: sticky; left: 0; z-index: 1; text-align: left;
  background: var(--md-default-bg-color); }
.md-typeset .kw-ladder-table tbody th { font-weight: 400; }
.kw-ladder-table code { white-space: nowrap; }
.md-typeset .kw-ladder-variants { font-size: .7rem; columns: 2 24rem; margin: .3rem 0 .6rem; }
.md-typeset .kw-ladder-variants li { margin: 0 0 .2em 1em; break-inside: avoid; }
.kw-rung { display: inline-block; min-width: 1.2em; font-weight: 700; }
.kw-role { font-size: .62rem; color: var(--md-default-fg-color--light); }
.kw-best td:nth-child(2), .kw-best td:nth-child(3) { font-weight: 700; }
.kw-ladder-about { font-size: .75rem; }
/* the mechanism (a ladder with a SASS check or a profile): a short cell per row after the time, each
   variant's evidence once in the variants list */
.md-typeset .kw-mech-table td:nth-of-type(5), .md-typeset .kw-mech-table thead th { white-space: normal; }
.md-typeset .kw-ladder-variants .kw-mech { display: block; color: var(--md-default-fg-color--light); }
/* charts: drawn to be read at phone width; the dark scheme inverts their white card */
.kw-chart { display: block; width: 100%; max-width: 30rem; height: auto; background: #fff; border-radius: .2rem;
  margin: .6rem 0; }
[data-md-color-scheme="slate"] .kw-chart { filter: invert(.88) hue-rotate(180deg); }
.md-typeset .kw-chart-data table:not([class]) { font-size: .65rem; }
.kw-stats { display: flex; flex-wrap: wrap; gap: .8rem; margin: 1rem 0; }
.kw-stat { flex: 1 1 0; min-width: 5rem; border: 1px solid var(--md-default-fg-color--lightest); border-radius: .3rem;
  padding: .6rem .8rem; }
.kw-stat-n { display: block; font-size: 1.35rem; font-weight: 700; line-height: 1.2; white-space: nowrap; }
.kw-stat-l { font-size: .7rem; color: var(--md-default-fg-color--light); }
/* WCAG AA where the theme falls short: links in running text underlined, footer and code variables darker */
.md-typeset :is(p, li, td, dd) a:not(.md-tag):not(.headerlink) { text-decoration: underline;
  text-decoration-thickness: .06em; text-underline-offset: .15em; }
.md-copyright { color: hsla(0, 0%, 100%, .72); }
[data-md-color-scheme="default"] { --md-code-hl-variable-color: #5e5e5e; }
.md-typeset .kw-claims small { opacity: 1; }
.md-typeset .kw-home table:not([class]) { display: table; width: 100%; font-size: .7rem; }
.md-typeset .kw-history table:not([class]) { display: table; width: 100%; font-size: .65rem; }
.md-typeset .kw-history td { overflow-wrap: anywhere; }
/* phones: each ladder, claims or home row a card, each cell labelled */
@media screen and (max-width: 44.9375em) {
  .md-typeset table.kw-ladder-table, .kw-ladder-table tbody, .kw-ladder-table tr,
  .md-typeset .kw-home table:not([class]), .kw-home tbody, .kw-home tr,
  .md-typeset .kw-claims table:not([class]), .kw-claims tbody, .kw-claims tr { display: block; width: 100%; }
  .kw-ladder-table thead, .kw-claims thead, .kw-home thead { display: none; }
  .kw-home tr { display: grid; grid-template-columns: 1fr 1fr; gap: 0 .8em; padding: .4em 0;
    border-top: .05rem solid var(--md-default-fg-color--lightest); }
  .md-typeset .kw-home td { display: block; border: 0; padding: .1em 0; min-width: 0; overflow-wrap: anywhere; }
  .md-typeset .kw-home td:first-child { grid-column: 1 / -1; font-weight: 600; }
  .kw-home td::before { display: block; font-size: .6rem; color: var(--md-default-fg-color--light); }
  .kw-home td:nth-of-type(2)::before { content: "state"; }
  .kw-home td:nth-of-type(3)::before { content: "GPU"; }
  .kw-home td:nth-of-type(4)::before { content: "date"; }
  .kw-home td:nth-of-type(5)::before { content: "claims reproduced"; }
  .kw-home td:nth-of-type(6)::before { content: "headline figure"; }
  .md-typeset__table { width: 100%; }
  .md-typeset table:not([class]) { display: table; width: 100%; table-layout: fixed; }
  .md-typeset table:not([class]) :is(td, th) { overflow-wrap: anywhere; padding: .4em .5em; }
  .kw-ladder-table caption { display: block; }
  .kw-ladder-table tr, .kw-claims tr { display: grid; grid-template-columns: 1fr 1fr; gap: 0 .8em; padding: .4em 0;
    border-top: .05rem solid var(--md-default-fg-color--lightest); }
  .md-typeset .kw-ladder-table th, .md-typeset .kw-ladder-table td,
  .md-typeset .kw-claims td { display: block; border: 0; padding: .1em 0; text-align: left; white-space: normal;
    min-width: 0; }
  .kw-claims .kw-badge { white-space: normal; }  /* a long verdict wraps at its spaces in a half-width cell */
  .md-typeset .kw-ladder-table tbody th, .md-typeset .kw-claims td:first-child { grid-column: 1 / -1; position: static;
    max-width: none; }
  .kw-ladder-table td::before, .kw-claims td::before { display: block; font-size: .6rem;
    color: var(--md-default-fg-color--light); }
  .kw-ladder-table td:nth-of-type(1)::before { content: "vs baseline"; }
  .kw-ladder-table td:nth-of-type(2)::before { content: "of speed of light"; }
  .kw-ladder-table td:nth-of-type(3)::before { content: "rate"; }
  .kw-ladder-table td:nth-of-type(4)::before { content: "time (µs)"; }
  .kw-ladder-table td:nth-of-type(5)::before { content: "registers"; }
  .kw-ladder-table td:nth-of-type(6)::before { content: "SM MHz"; }
  .kw-mech-table td:nth-of-type(5)::before { content: "mechanism"; }
  .kw-mech-table td:nth-of-type(6)::before { content: "registers"; }
  .kw-mech-table td:nth-of-type(7)::before { content: "SM MHz"; }
  .kw-claims td:nth-of-type(2)::before { content: "claimed"; }
  .kw-claims td:nth-of-type(3)::before { content: "measured"; }
  .kw-claims td:nth-of-type(4)::before { content: "ratio"; }
  .kw-claims td:nth-of-type(5)::before { content: "verdict"; }
  .kw-claims td:nth-of-type(6)::before { content: "runs"; }
  .kw-claims td:nth-of-type(7)::before { content: "provenance"; }
}
"""


def stylesheet() -> str:
    """STYLESHEET as the site serves it: comments and indentation dropped (it is part of every first view)."""
    text = re.sub(r"/\*.*?\*/", "", STYLESHEET, flags=re.DOTALL)
    text = re.sub(r"\s*([{};,>])\s*", r"\1", text)
    return re.sub(r"\s+", " ", text).strip() + "\n"
