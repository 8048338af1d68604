"""`kwiki export skills DIR`: the wiki as Agent Skills (https://agentskills.io/specification).

One skill per page, `DIR/<name>/SKILL.md`, and a router skill, `DIR/kernelwiki/SKILL.md`, that tells
an agent how to query the wiki. Each SKILL.md opens with YAML front matter holding `name` (1 to 64
characters: lowercase letters, digits and single hyphens, neither first nor last; the same as its
folder) and `description` (1 to 1024 characters: what the page is and when to use it), plus
`metadata` (kwiki's page id, evidence and state). Its body, within the specification's size advice
(under 500 lines and under 5000 tokens, counted here as 4 characters a token): when to use the page,
the recipe (the page's prose, without kwiki's generated tables, cut to fit), the verified numbers
with the runs they come from and each ladder's fastest variant, and how to re-verify them.

A relative link of the page's prose is rewritten to the export's layout: a link to another exported
page becomes `../<its skill>/SKILL.md`; a link to anything else of the repository (an artifact, the
home page) becomes its text and its repository path, since the export does not hold it; a link
within the page keeps its text only (the recipe is cut). The wiki's home page (`index.md` at the top of
`wiki/`) lists pages, which the router does: it is no skill.

Every skill is built and checked against those limits (`problems`) before any is written; each
file is written atomically. The SKILL.md of a folder of DIR that kwiki wrote (`metadata.generator:
kwiki`) and whose page is gone is removed (and the folder, when that leaves it empty); nothing else
in DIR is touched.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from kwiki.core.errors import KwikiError
from kwiki.core.sentences import lead

NAME_MAX = 64
DESCRIPTION_MAX = 1024
BODY_LINES = 500  # the body stays under this many lines
BODY_TOKENS = 5000  # and under this many tokens (the specification's advice for an activated skill)
CHARS_PER_TOKEN = 4  # how tokens are counted here: a body of at most 20,000 characters
HOME = "wiki/index.md"  # the home page: no skill
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)((?:\s+\"[^\"]*\")?)\)")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
ROUTER = "kernelwiki"
GENERATOR = "kwiki"
FRONT_KEYS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class ExportError(KwikiError):
    """A skill could not be written (a folder in the way, a skill out of the format's limits)."""

    exit_code = 2


# ---------------------------------------------------------------- the format


def skill_name(page_id: str) -> str:
    """A page id as a skill name: lowercase letters, digits and single hyphens, at most 64 characters."""
    name = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9]+", "-", page_id.lower())).strip("-")
    return name[:NAME_MAX].rstrip("-") or "page"


def problems(folder: str, text: str) -> list[str]:
    """What keeps `text` (a SKILL.md in a folder named `folder`) from being a valid Agent Skill."""
    import yaml

    out: list[str] = []
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        return ["SKILL.md must open with YAML front matter between '---' lines"]
    head, body = text[4:].split("\n---\n", 1)
    try:
        front = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        return [f"front matter is not YAML: {exc}"]
    if not isinstance(front, dict):
        return ["front matter must be a mapping"]
    for key in sorted(set(front) - FRONT_KEYS):
        out.append(f"front matter: unknown field {key!r}")
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not 1 <= len(name) <= NAME_MAX or not _NAME.match(name):
        out.append(f"name {name!r}: 1 to {NAME_MAX} lowercase letters, digits and single hyphens, "
                   "not first or last")
    elif name != folder:
        out.append(f"name {name!r} differs from its folder {folder!r}")
    if not isinstance(description, str) or not description.strip() or len(description) > DESCRIPTION_MAX:
        out.append(f"description: 1 to {DESCRIPTION_MAX} characters (has "
                   f"{len(description) if isinstance(description, str) else 'none'})")
    compatibility = front.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > 500):
        out.append("compatibility: at most 500 characters")
    metadata = front.get("metadata")
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        out.append("metadata: a mapping of strings to strings")
    lines = len(body.splitlines())
    if lines >= BODY_LINES:
        out.append(f"body: {lines} lines; keep it under {BODY_LINES}")
    if len(body) > BODY_TOKENS * CHARS_PER_TOKEN:
        out.append(f"body: about {len(body) // CHARS_PER_TOKEN} tokens ({len(body)} characters); keep it under "
                   f"{BODY_TOKENS}")
    return out


def relink(text: str, page_path: str, skills_by_path: dict[str, str]) -> str:
    """`text` (a page's prose) with each relative link rewritten to the export's layout (see the module's doc):
    `skills_by_path` maps a page file, relative to the project root, to its skill's name."""
    import posixpath

    def one(m: re.Match[str]) -> str:
        bang, label, target, title = m.groups()
        if _SCHEME.match(target) or target.startswith("/"):
            return m.group(0)  # a URL: it works from anywhere
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not path:
            return label  # within the page
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), path))
        skill = skills_by_path.get(resolved)
        if skill is not None and not bang:
            return f"[{label}](../{skill}/SKILL.md{title})"
        return f"{label} (`{resolved}` in the KernelWiki repository)"

    return _LINK.sub(one, text)


def _front(name: str, description: str, metadata: dict[str, str]) -> str:
    import yaml

    data = {"name": name, "description": description, "metadata": metadata}
    return "---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100) + "---\n"


# ---------------------------------------------------------------- one page


def description(doc: dict[str, Any]) -> str:
    """What the page is and when to use it, within the format's 1024 characters."""
    fm = doc.get("front_matter") or {}
    when = []
    if fm.get("applies_to_ops"):
        when.append("writing or tuning " + ", ".join(fm["applies_to_ops"]) + " kernels")
    if fm.get("architectures"):
        when.append("on " + ", ".join(fm["architectures"]))
    tags = ", ".join(fm.get("tags", [])[:8])
    use = "Use when " + " ".join(when) + (f" (topics: {tags})" if tags else "") + "." if when else (
        f"Use for: {tags}." if tags else "")
    head = f"{doc['title']} ({doc['type']}, evidence {doc['evidence_level']})."
    room = DESCRIPTION_MAX - len(head) - len(use) - 2
    summary = lead(fm.get("summary") or "", max(0, room))
    return " ".join(filter(None, (head, summary, use)))[:DESCRIPTION_MAX]


def _recipe(body: str, budget: int, chars: int, path: str) -> list[str]:
    """The page's prose under '## The recipe': its first heading dropped, others one level down,
    kwiki's generated regions (already left out by the index) dropped, cut to `budget` lines and `chars`
    characters (at a paragraph's end where one is near, never inside a code block)."""
    lines = [ln for ln in body.strip("\n").splitlines() if not ln.startswith("<!-- kwiki:")]
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    lines = ["#" + ln if re.match(r"#{1,5} ", ln) else ln for ln in lines]
    while lines and not lines[0].strip():
        lines.pop(0)
    used, keep, fenced, last_break = 0, 0, False, 0
    for n, ln in enumerate(lines):
        if n >= budget - 2 or used + len(ln) + 1 > chars - 120:
            break
        used += len(ln) + 1
        if ln.lstrip().startswith("```"):
            fenced = not fenced
        keep = n + 1
        if not fenced and not ln.strip():
            last_break = keep
    if keep < len(lines):
        keep = last_break if last_break > keep // 2 else keep
        cut = lines[:keep]
        if sum(ln.lstrip().startswith("```") for ln in cut) % 2:
            cut.append("```")
        lines = [*cut, "", f"*(cut here to fit; the whole page: `{path}`, or get_page(id) / `kwiki show ID`)*"]
    return lines


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _numbers(doc: dict[str, Any]) -> list[str]:
    """The measured claims as a table, then each run's provenance once."""
    measured = [c for c in doc.get("claims", []) if c.get("verdict")]
    cited = [c for c in doc.get("claims", []) if not c.get("verdict")]
    out = ["## Verified numbers", ""]
    if not measured:
        out.append("kwiki has measured none of this page's claims yet.")
    else:
        # each run once, below the table, under a short label the rows cite (a run id is 38 characters: on a page
        # of 40 claims the ids alone took the room of the recipe)
        runs = doc.get("runs") or {}
        label = {run: f"r{i}" for i, run in enumerate(runs, 1)}
        out += ["| claim | claimed | measured (median) | verdict | run |", "| --- | --- | ---: | --- | --- |"]
        for c in measured:
            m = c.get("measured") or {}
            value = f"{m['value']:g} {m.get('unit') or c['unit']}" if m.get("value") is not None else "—"
            if m.get("runs"):
                value += f" ({m['runs']} runs{', provisional' if m.get('provisional') else ''})"
            run = m.get("run")
            out.append(f"| {_cell(c['statement'])} `{c['id']}` | {_cell(c['claimed']['text'])} | {_cell(value)} "
                       f"| {c['verdict']} | {_cell(label.get(run, run or '—'))} |")
        out += ["", "Runs (provenance):", ""]
        for run, prov in runs.items():
            where = ", ".join(f"{k} {v}" for k, v in prov.items() if k in ("gpu", "driver", "cuda", "nvcc", "date",
                                                                              "commit"))
            out.append(f"- {label[run]} `{run}`: {where}")
    if cited:
        out += ["", f"{len(cited)} more claim(s) cite outside figures kwiki does not measure here "
                    f"({', '.join(c['id'] for c in cited[:8])}{', ...' if len(cited) > 8 else ''})."]
    return out


def _ladders(ladders: dict[str, Any]) -> list[str]:
    """Each ladder's shapes: the fastest measured variant (the row get_ladder flags `best`, by
    kwiki.results.ladders.best_per_shape), absolute figures and occupancy."""
    out: list[str] = []
    for ladder in ladders.get("ladders", []):
        out += ["", f"Ladder `{ladder['artifact']}` on {ladder.get('gpu', '?')} (run `{ladder.get('run_id', '?')}`), "
                    f"baseline `{ladder.get('baseline', '—')}`:", "",
                "| shape | fastest variant | time (us) | rate | vs baseline | of speed of light | warps/SM |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for group in ladder["groups"]:
            best = next((r for r in group["rows"] if r.get("best")), None)
            if best is None or best.get("rate") is None:
                continue  # a shape whose rungs declare no work: no rate to show
            vs = f"{best['vs_baseline']:.3g}x" if best.get("vs_baseline") is not None else "—"
            sol = f"{best['of_speed_of_light']:.0%}" if best.get("of_speed_of_light") is not None else "—"
            out.append(f"| {_cell(group['label'])} | `{best['variant']}` | {best['time_us']:g} "
                       f"| {best['rate']:g} {best['rate_unit']} | {vs} | {sol} | {best.get('warps_per_sm', '—')} |")
    return out


def page_skill(doc: dict[str, Any], ladders: dict[str, Any], skills_by_path: dict[str, str] | None = None
               ) -> tuple[str, str]:
    """(name, SKILL.md text) of one page; `doc` is its `kwiki show --json` document, `ladders` its
    `kwiki show --ladder --json` one, `skills_by_path` each exported page's file -> skill name (for links)."""
    fm = doc.get("front_matter") or {}
    name = skill_name(doc["id"])
    meta = {"generator": GENERATOR, "page": doc["id"], "path": doc["path"], "evidence": doc["evidence_level"]}
    if doc.get("state"):
        meta["state"] = doc["state"]
    when = [f"- **{label}**: {', '.join(fm[key])}" for label, key in
            (("Operations", "applies_to_ops"), ("Architectures", "architectures"), ("Tags", "tags")) if fm.get(key)]
    state = f"Evidence: **{doc['evidence_level']}**" + (f", state **{doc['state']}**" if doc.get("state") else "")
    head = [f"# {doc['title']}", "", state + f" (`{doc['path']}`).", "", "## When to use it", "",
            fm.get("summary") or "", "", *when, ""]
    numbers = _numbers(doc) + _ladders(ladders)
    artifacts = sorted(set((fm.get("artifacts") or {}).values()))
    verify = ["", "## How to re-verify", "",
              "On a GPU of the page's architectures, from the KernelWiki repository:", "",
              "```sh", f"kwiki verify {doc['id']}      # build and run "
              + (", ".join(artifacts) if artifacts else "its artifacts") + ", re-judge every claim",
              f"kwiki show {doc['id']} --json    # the claims with their latest measurements",
              f"kwiki show {doc['id']} --ladder  # each variant's time and rate, by shape", "```", "",
              "`kwiki verify` writes the numbers back to the page only when they are measured; a claim "
              "whose verdict is not 'reproduced' (or a provisional one, fewer than 3 runs) is not verified."]
    budget = BODY_LINES - 10 - len(head) - len(numbers) - len(verify)
    chars = BODY_TOKENS * CHARS_PER_TOKEN - 200 - sum(len(ln) + 1 for ln in (*head, *numbers, *verify))
    prose = relink(doc.get("body") or "", doc["path"], skills_by_path or {})
    recipe = ["## The recipe", "", *_recipe(prose, max(10, budget), max(1000, chars), doc["path"]), ""]
    body = "\n".join([*head, *recipe, *numbers, *verify]) + "\n"
    return name, _front(name, description(doc), meta) + "\n" + body


def router_skill(pages: list[dict[str, Any]]) -> tuple[str, str]:
    """(name, SKILL.md text) of the skill that tells an agent how to query the wiki."""
    listed = [f"- `{skill_name(d['id'])}`: {_cell(d['title'])} ({d['type']}, {d['evidence_level']})"
              for d in pages[: BODY_LINES - 80]]
    desc = ("Query KernelWiki, a wiki of GPU kernel-optimization techniques (CUDA, PTX, CUTLASS/CuTe, Triton) "
            "whose numbers kwiki verify re-measures on real GPUs. Use when writing or tuning a GPU kernel (GEMM, "
            "GEMV, attention, memory-bound ops; TMA, wgmma, warp specialization, vectorized loads) and you need a "
            "technique, a pitfall, or a measured figure with its provenance, such as how fast a kernel runs "
            "against cuBLAS on an H200.")
    body = f"""# KernelWiki: how to query it

Every page has an evidence level: spec < source-reported < measured < verified (verified: `kwiki
verify` reproduced every claim it could run on matching hardware, over at least 3 runs). Prefer
verified and measured pages; treat source-reported figures as claims, not facts. A page whose
figures do not trace to the results store is "untraceable": trust none of its verdicts.

## With the MCP server (`kwiki mcp`, stdio)

1. `find_techniques(arch="H200", op="gemv", tags=[...], text="...")`: pages of every type for a
   GPU (a GPU or family such as H100, H200, Hopper, B200, Blackwell, or a target such as sm_90a),
   the best match first; each hit has its summary and the claims that match, with claimed and
   measured figures and verdicts. Often enough to answer.
2. `search_pages(text="warp-specialized pitfalls", ...)`: full text, every `kwiki query` filter.
   `covered: false` means no page is about it: `nearest_tags`, `nearest_pages` and `mentions`
   (pages whose body only mentions the words) say what is near; a mention is not an answer.
3. `get_measurements(id)`: every claim of a page, with the run it comes from (`runs`: GPU,
   driver, CUDA, date, commit, once per run), and `state_reason`: the page's state in one line,
   with why it is not verified.
4. `get_ladder(id)`: each shape's best row (`best: true`), baseline and ceiling: time (us), rate
   (TB/s or TFLOP/s), ratio to the baseline (cuBLAS), share of the speed of light, registers,
   blocks and warps per SM. `get_ladder(id, shape="8192x8192")` gives every row of that shape;
   `detail="full"` adds clocks, Nsight Compute bytes and SASS checks.
5. `get_page(id)`: the front matter and the prose (without kwiki's generated tables; the claims'
   figures are in get_measurements).

Answers are compact JSON: absent fields are null. Two calls answer most questions: use only ids
and shapes a reply gave you.

## From a shell (same documents)

```sh
kwiki query --arch sm_90 --op gemv --json          # brief hits; --detail full for everything
kwiki query --text "tma multicast" --json
kwiki show ID --json                               # a page, claims once, runs once
kwiki show ID --ladder --shape 8192x8192 --json    # its ladder
kwiki tags                                         # tags with page counts
```

From a shell, an unknown id, tag, op or page type is an error that names the closest known ones; over
MCP an unknown tag or op is `covered: false` with the nearest ones, and an unknown id or page type an
error naming the tool's parameter and the closest known values.

## The pages (one skill each)

{chr(10).join(listed)}
"""
    meta = {"generator": GENERATOR, "pages": str(len(pages))}
    return ROUTER, _front(ROUTER, desc, meta) + "\n" + body


# ---------------------------------------------------------------- writing


def export(root: Path, out_dir: Path) -> list[str]:
    """Write every page's skill and the router skill under `out_dir`; returns the folders written."""
    from kwiki.agents.index import page_detail, with_index
    from kwiki.agents.show import page_ladders
    from kwiki.core.writefile import write_atomic

    ids = with_index(root, lambda conn: [r[0] for r in conn.execute("SELECT DISTINCT id FROM pages ORDER BY id")])
    docs: list[dict[str, Any]] = with_index(root, lambda conn: [page_detail(conn, i, body=True) for i in ids])
    docs = [d for d in docs if d["path"] != HOME]  # the home page lists pages: the router does that
    by_path = {d["path"]: skill_name(d["id"]) for d in docs}
    skills: dict[str, str] = {}
    for doc in docs:
        name, text = page_skill(doc, page_ladders(root, doc["id"]), by_path)
        if name in skills or name == ROUTER:
            raise ExportError(f"pages {doc['id']!r} and another both become the skill name {name!r}")
        skills[name] = text
    name, text = router_skill(docs)
    skills[name] = text
    for name, text in skills.items():
        found = problems(name, text)
        if found:
            raise ExportError(f"skill {name!r}: {found[0]}")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir}: exists and is not a directory")
    own = _own_folder(root, out_dir)
    if own is not None:
        raise ExportError(f"{out_dir}: is or lies inside {own!r}, a folder of the repository; export the skills "
                          "elsewhere (such as a new folder 'skills-out')")
    for name in skills:
        folder = out_dir / name
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise ExportError(f"{folder}: is in the way (a link or a file); not written")
        skill = folder / "SKILL.md"
        if os.path.lexists(skill) and (skill.is_symlink() or not _ours(skill)):
            raise ExportError(f"{skill}: a SKILL.md kwiki did not write; not overwritten (move it, or export "
                              "elsewhere)")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(skills.items()):
        (out_dir / name).mkdir(exist_ok=True)
        write_atomic(out_dir / name / "SKILL.md", text.encode("utf-8"))
    for stale in sorted(p.parent for p in out_dir.glob("*/SKILL.md")):
        if stale.name not in skills and not stale.is_symlink() and _ours(stale / "SKILL.md"):
            (stale / "SKILL.md").unlink()
            if not any(stale.iterdir()):  # a folder holding more than kwiki wrote keeps it
                stale.rmdir()
    return sorted(skills)


def _own_folder(root: Path, out_dir: Path) -> str | None:
    """The repository's own folder (or the repository itself, '.') that `out_dir` is or lies inside, or None."""
    from kwiki.wiki.catalog import OWN_FOLDERS

    real_root, out = Path(os.path.realpath(root)), Path(os.path.realpath(out_dir))
    if out == real_root:
        return "."
    for name in OWN_FOLDERS:
        folder = Path(os.path.realpath(real_root / name))
        if out == folder or folder in out.parents:
            return name
    return None


def _ours(path: Path) -> bool:
    """Whether `path` is a SKILL.md kwiki wrote (its metadata names kwiki as generator)."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
        front = yaml.safe_load(text[4:].split("\n---\n", 1)[0]) if text.startswith("---\n") else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(front, dict) and isinstance(front.get("metadata"), dict) and \
        front["metadata"].get("generator") == GENERATOR
