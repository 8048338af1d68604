"""Markdown fragments the site adds to a page: header, claims table, artifact sources, charts.

Every piece of author text (titles, statements, tags, file names, manifest fields) goes through
`md_text` or `html_text`, so a `<script>` in a title is shown as text and never runs. Links
are Markdown links, which MkDocs checks and rewrites; raw HTML carries no links.
"""

from __future__ import annotations

import html
import posixpath
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from kwiki.core.errors import ManifestError
from kwiki.core.numbers import fmt
from kwiki.core.paths import inside, within
from kwiki.verify import tables
from kwiki.verify.standing import Standing
from kwiki.verify.trace import PageTrace
from kwiki.wiki.model import MeasuredClaim, PageMeta
from kwiki.wiki.verdict import NOT_REPRODUCED, PASSING, Verdict

if TYPE_CHECKING:
    from kwiki.wiki.manifest import Manifest

MAX_SOURCE_BYTES = 256 * 1024
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


def header(meta: PageMeta, st: Standing, page_rel: str, arch_index: str) -> str:
    """Badges: evidence level, what the last run found, the architectures (linked to their index)."""
    state = badge(st.summary(), "kw-state", f"kw-state-{st.state.value}")
    parts = [badge(st.evidence, "kw-ev", f"kw-ev-{st.evidence}"), state]
    to_index = relative(arch_index, page_rel)
    arches = " ".join(f"[{md_text(a)}]({to_index}#{arch_anchor(a)}){{ .kw-arch }}" for a in meta.architectures)
    lines = ['<div class="kw-header" markdown>', "", " ".join(parts), ""]
    if arches:
        lines += [f"**Architectures:** {arches}", ""]
    if meta.summary:
        lines += [f"*{md_text(meta.summary)}*", ""]
    lines += ["</div>", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- claims


def _verdict_badge(mc: MeasuredClaim | None) -> str:
    if mc is None:
        return badge("not measured", "kw-verdict", "kw-v-none")
    return badge(mc.verdict.value, "kw-verdict", f"kw-v-{VERDICT_CLASS.get(mc.verdict, 'none')}")


def claims_table(meta: PageMeta, trace: PageTrace | None = None) -> str:
    """The page's claims table (kwiki.verify.tables) with escaped text and verdict badges; a figure that does
    not trace to the results store (`trace`) shows 'untraceable' where its verdict would be, and why below."""
    if not meta.claims:
        return ""
    measured = meta.measurements.claims if meta.measurements else {}
    untraceable = {id(mc): trace.untraceable(cid) for cid, mc in measured.items()} if trace is not None else {}

    def verdict(mc: MeasuredClaim | None) -> str:
        why = untraceable.get(id(mc)) if mc is not None else None
        if why is not None and mc is not None:  # (a reason is looked up only for a measured claim)
            return badge(f"untraceable (says {mc.verdict.value})", "kw-verdict", "kw-v-untraceable")
        return _verdict_badge(mc)

    table = tables.claims_table(meta.claims, measured, text=md_text, verdict=verdict)
    out = ['<div class="kw-claims" markdown>', "", table]
    if trace is not None and not trace.traceable:
        out += [("**Untraceable:** these figures do not trace to the results store, so none counts as verified "
                 "(re-run `kwiki verify`):"), "", *[f"- {md_text(reason)}" for reason in trace.reasons()], ""]
    return "\n".join([*out, "</div>", ""])


# ---------------------------------------------------------------- artifacts


def _fence(text: str, lang: str, indent: str = "") -> str:
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, run + 1)
    body = text if text.endswith("\n") else text + "\n"
    lines = [f"{fence}{lang}", *body.split("\n")[:-1], fence]
    return "\n".join(indent + line if line else line for line in lines) + "\n"


def source_block(root: Path, path: Path, shown_as: str) -> str:
    """A collapsed admonition holding one file of the repository, highlighted by its extension.

    A file that is not inside `root` once links are resolved (a committed link that leads out)
    is named, never read (the containment rule).
    """
    title = html_text(shown_as).replace('"', "&quot;")
    if not within(root, path):
        return f'!!! failure "{title}"\n\n    Not published: a link that leads out of the repository.\n\n'
    data = path.read_bytes()
    if len(data) > MAX_SOURCE_BYTES:
        return f'??? warning "{title}"\n\n    {len(data)} bytes, too large to show here.\n\n'
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").expandtabs(4)
    lang = LANGUAGES.get(path.suffix.lower(), "text")
    return f'??? abstract "{title}"\n\n{_fence(text, lang, "    ")}\n'


def build_lines(manifest: Manifest, rel: str) -> list[str]:
    """The commands that build the artifact, one per target, run from the repository root."""
    from kwiki.core.arch import parse_arch
    from kwiki.verify.build import BuildJob, command
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


def _manifest_section(root: Path, rel: str) -> str:
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
    lines += ["Build (from the repository root):", "", _fence("\n".join(build_lines(manifest, rel)), "sh")]
    b = manifest.build
    files = [*b.sources, *b.headers, *([b.script] if b.script else [])]
    blocks = [source_block(root, directory / f, f"{rel}/{f}") for f in dict.fromkeys(files)]
    blocks.append(source_block(root, directory / MANIFEST, f"{rel}/{MANIFEST}"))
    return "\n".join(lines) + "\n" + "".join(blocks)


def artifact_section(root: Path, meta: PageMeta) -> str:
    """Each artifact the page names: its manifest, build line and source files (collapsed)."""
    from kwiki.wiki.manifest import MANIFEST

    if not meta.artifacts:
        return ""
    out = ['<div class="kw-artifacts" markdown>', "", "## Artifact sources", ""]
    for key, rel in sorted(meta.artifacts.items()):
        why = inside(root, rel, must_exist=False)  # before stripping: '/' must stay absolute
        rel = rel.rstrip("/")
        path = root / rel
        out += [f"### {md_text(key)}: `{rel}`" if "`" not in rel else f"### {md_text(key)}", ""]
        if why:
            out.append(f'!!! failure "not published"\n\n    {md_text(why)}.\n')
        elif (path / MANIFEST).is_file():
            out.append(_manifest_section(root, rel))
        elif path.is_file():
            out.append(source_block(root, path, rel))
        elif path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in LANGUAGES)
            out.append("".join(source_block(root, p, f"{rel}/{p.name}") for p in files[:20]))
        else:
            out.append(f'!!! failure "missing artifact"\n\n    {md_text(rel)} does not exist.\n')
    out += ["</div>", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- charts and problems


def chart(image: str, page_rel: str, alt: str) -> str:
    return f"![{md_text(alt)}]({relative(image, page_rel)}){{ .kw-chart }}\n"


def problems_note(messages: list[str]) -> str:
    items = "\n".join(f"    - {md_text(m)}" for m in messages)
    return f'!!! failure "This page does not pass kwiki check"\n\n{items}\n\n'


def state_badge(st: Standing) -> str:
    return badge(st.state.label, "kw-state", f"kw-state-{st.state.value}")


def evidence_badge(level: str) -> str:
    return badge(level, "kw-ev", f"kw-ev-{level}")


def headline(st: Standing) -> str:
    if st.headline is None:
        return "–"
    cid, mc = st.headline
    return md_text(f"{fmt(mc.value)} {mc.unit or ''}".strip() + f" ({cid})")


STYLESHEET = """\
/* kwiki: badges, header, claims, home page (generated; no web fonts, no remote resources) */
.kw-badge { display: inline-block; padding: .05em .6em; margin: 0 .3em .3em 0; border-radius: .8em;
  font-size: .72rem; font-weight: 600; line-height: 1.6; color: #fff; background: #757575; }
.kw-ev-spec { background: #757575; }
.kw-ev-source-reported { background: #8d6e63; }
.kw-ev-measured { background: #1565c0; }
.kw-ev-verified { background: #2e7d32; }
.kw-state-verified, .kw-v-pass { background: #2e7d32; }
.kw-state-measured { background: #1565c0; }
.kw-state-provisional { background: #5c6bc0; }
.kw-state-drifted, .kw-v-error { background: #e65100; }
.kw-state-not-reproduced, .kw-v-fail { background: #c62828; }
.kw-state-not-measured, .kw-v-none { background: #9e9e9e; }
.kw-v-warn { background: #f9a825; color: #000; }
.kw-state-untraceable, .kw-ev-untraceable, .kw-v-untraceable { background: #f9a825; color: #000; }
.kw-header { border-left: .25rem solid var(--md-primary-fg-color); padding: .3rem .9rem; margin: 0 0 1.2rem; }
.kw-header p { margin: .3em 0; }
.kw-arch { font-family: var(--md-code-font-family); font-size: .8em; }
.kw-claims table { font-size: .75rem; }
.kw-chart { display: block; max-width: 100%; background: #fff; border-radius: .2rem; margin: .6rem 0; }
.kw-stats { display: flex; flex-wrap: wrap; gap: .8rem; margin: 1rem 0; }
.kw-stat { flex: 1 1 0; min-width: 5rem; border: 1px solid var(--md-default-fg-color--lightest); border-radius: .3rem;
  padding: .6rem .8rem; }
.kw-stat-n { display: block; font-size: 1.35rem; font-weight: 700; line-height: 1.2; white-space: nowrap; }
.kw-stat-l { font-size: .7rem; color: var(--md-default-fg-color--light); }
"""
