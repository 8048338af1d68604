"""What the built site offers agents: `llms.txt`, `index.json`, and each page's Markdown source.

The Markdown copies are the page files exactly as they are in `wiki/` (front matter and kwiki's
measurements block kept), at the same relative path inside the site: `wiki/a/b.md` is served
as `a/b.md` beside its HTML page `a/b/`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kwiki import SCHEMA_VERSION, __version__
from kwiki.core.writefile import write_atomic
from kwiki.site.listings import ARCHITECTURES, EVIDENCE, TAGS, LastRun, SitePage

LLMS = "llms.txt"
INDEX_JSON = "index.json"
SECTIONS = {"technique": "Techniques", "algorithm": "Algorithms", "kernel": "Kernels", "pattern": "Patterns",
            "skill": "Skills", "hardware": "Hardware", "pitfalls": "Pitfalls", "api": "APIs",
            "concept": "Concepts", "guide": "Guides", "reference": "Reference"}


def page_url(rel: str, directory_urls: bool = True) -> str:
    """The site-relative URL of a staged page: 'a/b.md' -> 'a/b/', 'a/index.md' -> 'a/'."""
    stem = rel[:-3]
    if not directory_urls:
        return stem + ".html"
    if stem == "index":
        return ""
    if stem.endswith("/index"):
        return stem[: -len("index")]
    return stem + "/"


def _entry(p: SitePage, directory_urls: bool) -> dict[str, Any]:
    meta, st = p.meta, p.standing
    assert meta is not None and st is not None
    m = meta.measurements
    return {
        "id": meta.id,
        "title": meta.title,
        "type": meta.type.value,
        "path": p.page.path,
        "url": page_url(p.rel, directory_urls),
        "markdown": p.rel,
        "summary": meta.summary,
        "architectures": list(meta.architectures),
        "tags": list(meta.tags),
        "evidence_level": st.evidence,
        "state": st.state.value,
        "verified_on": st.verified_on,
        "date": st.date,
        "claims": {"total": st.claims, "judged": st.judged, "reproduced": st.passing, "failing": st.failing,
                   "drifted": st.moved},
        "measurements": m.model_dump(mode="json", exclude_none=True) if m else None,
    }


def index_json(pages: list[SitePage], site_name: str, run: LastRun | None,
               directory_urls: bool = True) -> dict[str, Any]:
    entries = sorted((_entry(p, directory_urls) for p in pages if p.meta), key=lambda e: e["id"])
    tags: dict[str, list[str]] = {}
    arches: dict[str, list[str]] = {}
    for e in entries:
        for tag in e["tags"]:
            tags.setdefault(tag, []).append(e["id"])
        for arch in e["architectures"]:
            arches.setdefault(arch, []).append(e["id"])
    return {
        "schema_version": SCHEMA_VERSION,
        "kwiki": __version__,
        "site": site_name,
        "last_run": vars(run) if run else None,
        "pages": entries,
        "tags": {k: sorted(v) for k, v in sorted(tags.items())},
        "architectures": {k: sorted(v) for k, v in sorted(arches.items())},
    }


def _line(text: str) -> str:
    return " ".join(str(text).split())


def llms_txt(pages: list[SitePage], site_name: str, description: str, directory_urls: bool = True) -> str:
    """An llms.txt: title, summary, then sections of links to each page's Markdown source."""
    out = [f"# {_line(site_name)}", "", f"> {_line(description)}", "",
           "Each link below leads to a page's Markdown source, front matter kept (claims, and the measurements "
           "kwiki wrote with their GPU, driver and commit). `index.json` lists every page with its tags, "
           "architectures and latest measurements.", "",
           "## Indexes", "",
           f"- [index.json]({INDEX_JSON}): pages, tags, architectures and latest measurements as JSON",
           f"- [By evidence]({page_url(EVIDENCE, directory_urls)}): what is verified, what drifted, what was never "
           "reproduced",
           f"- [By architecture]({page_url(ARCHITECTURES, directory_urls)}): pages by GPU architecture",
           f"- [Tags]({page_url(TAGS, directory_urls)}): every tag with its pages", ""]
    groups: dict[str, list[SitePage]] = {}
    for p in pages:
        if p.meta is not None:
            groups.setdefault(p.meta.type.value, []).append(p)
    for kind in sorted(groups, key=lambda k: list(SECTIONS).index(k)):
        out += [f"## {SECTIONS[kind]}", ""]
        for p in sorted(groups[kind], key=lambda p: (p.title.casefold(), p.rel)):
            assert p.meta is not None and p.standing is not None
            title = _line(p.title).replace("[", "(").replace("]", ")")
            note = p.standing.summary()
            summary = f"{_line(p.meta.summary)} ({note})" if p.meta.summary else f"({note})"
            out.append(f"- [{title}]({p.rel}): {summary}")
        out.append("")
    return "\n".join(out)


def write_exports(site_dir: Path, pages: list[SitePage], site_name: str, description: str,
                  run: LastRun | None, directory_urls: bool = True) -> None:
    """Write llms.txt, index.json and every page's Markdown source into the built site."""
    for p in pages:
        if p.page.fm is None:
            continue  # not read: a link that leads out, a pipe, a device, bytes that are no page
        target = site_dir / p.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, p.page.file.read_bytes())
    data = index_json(pages, site_name, run, directory_urls)
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    write_atomic(site_dir / INDEX_JSON, text.encode())
    write_atomic(site_dir / LLMS, llms_txt(pages, site_name, description, directory_urls).encode())

