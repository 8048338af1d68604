"""The agent benchmark: questions kernel engineers ask, answered through kwiki's MCP tools.

    python3 bench/agents.py [--root DIR] [--questions bench/agent_questions.yaml] [--json]

Each question of bench/agent_questions.yaml names the page and the figures a correct answer needs
and a script of MCP calls a careful agent makes. The benchmark starts `kwiki mcp` once, over
stdio as an agent does, runs every script, and prints per question the calls, the bytes of the
responses (the text an agent reads: each result's text content) and whether every needed figure
was in them. The figures are looked up when the benchmark runs (a claim's measured value in its
page's block, or the cited figure of a claim kwiki does not measure; a ladder's figure, the best row
by kwiki.results.ladders.best_per_shape, in the results store's latest run), so a new `kwiki verify`
run moves them without an edit here.

The scripts cannot know what only a reply tells: the benchmark checks each call as it makes it
(`check_call`). The first call uses only the question's words (a word alike in its first letters
passes: 'specialization' for 'specialized') and its architecture, as the question names it (`arch`);
a later call adds only the ids and shapes an earlier reply returned. A call that breaks this is an
error, and the question is not answered.

Goal (issue 28): every question answered, the median question at most 4 KB of responses, no
question more than 2 calls. Exit code 1 when the goal is missed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MAX_CALLS = 2
MEDIAN_BYTES = 4 * 1024
TOLERANCE = 5e-3  # relative: figures are printed to 3 to 5 significant digits
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WORD = re.compile(r"[a-z0-9]+")
CONTROL = {"limit": int, "detail": str, "include_body": bool, "match_any_tag": bool}  # how much, never what
FROM_REPLIES = ("id", "shape")  # what only a reply can tell


@dataclass
class Need:
    """One figure an answer needs: a label, strings that must all appear, a number that must (or None)."""

    label: str
    strings: list[str]
    number: float | None = None
    problem: str | None = None  # why the figure could not be looked up
    key: str | None = None  # the number must be this key's value in a reply's object whose `variant` is `row`
    row: str | None = None


@dataclass
class Outcome:
    id: str
    calls: int = 0
    bytes: int = 0  # the results' text content: what the agent reads
    wire: int = 0  # the results as sent (text content and structured content, compact JSON)
    errors: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return not self.missing and not self.errors


# ---------------------------------------------------------------- the figures a question needs


def load_questions(path: Path) -> list[dict[str, Any]]:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    questions = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(questions, list) or not questions:
        raise SystemExit(f"{path}: no 'questions' list")
    for n, q in enumerate(questions):
        for key in ("id", "question", "page", "needs", "script"):
            if key not in q:
                raise SystemExit(f"{path}: questions[{n}]: '{key}' is missing")
        if q.get("arch") and q["arch"].lower() not in q["question"].lower():
            raise SystemExit(f"{path}: questions[{n}]: arch {q['arch']!r} is not in the question's words")
    return questions


# ---------------------------------------------------------------- what a call may say


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def alike(word: str, known: str) -> bool:
    """`word` is `known`, or shares its first letters but for an ending ('stages'/'stage',
    'specialization'/'specialized', 'benchmark'/'benchmarking'); never 'gemm' for 'gemv'."""
    if word == known:
        return True
    common = 0
    for a, b in zip(word, known, strict=False):
        if a != b:
            break
        common += 1
    return common >= max(4, min(len(word), len(known)) - 3)


def check_call(n: int, tool: str, arguments: dict[str, Any], question: dict[str, Any], replies: list[str]) -> list[str]:
    """What call `n` (0: the first) of a question's script says that it could not know: a word not the
    question's, an architecture other than the question's, an id or shape no earlier reply returned."""
    asked = words(question["question"])
    out = []
    for key, value in sorted(arguments.items()):
        where = f"call {n + 1} {tool}({key}={value!r})"
        if key in CONTROL:
            if not isinstance(value, CONTROL[key]) or (key == "detail" and value not in ("brief", "full")):
                out.append(f"{where}: not a {CONTROL[key].__name__} setting")
        elif key == "arch":
            if not question.get("arch") or str(value).lower() != question["arch"].lower():
                out.append(f"{where}: the question's architecture is {question.get('arch')!r}")
        elif key in FROM_REPLIES:
            if n == 0:
                out.append(f"{where}: a first call has no reply to take an {key} from")
            elif not any((f'"{value}"' if key == "id" else str(value).lower()) in (r if key == "id" else r.lower())
                         for r in replies):
                out.append(f"{where}: no earlier reply returned it")
        else:
            given = [value] if isinstance(value, str) else value if isinstance(value, list) else [str(value)]
            strange = [w for v in given for w in words(str(v)) if not any(alike(w, a) for a in asked)]
            if strange:
                out.append(f"{where}: {', '.join(repr(w) for w in strange)} not in the question")
    return out


class Figures:
    """Looks up what each need stands for in the wiki at `root`."""

    def __init__(self, root: Path):
        from kwiki.results.standing import State, standing
        from kwiki.results.store import RecordRow, read_all
        from kwiki.results.trace import Store, trace
        from kwiki.wiki.catalog import page_files
        from kwiki.wiki.pages import load_page

        self.root = root
        self.pages = {}
        self.verified: set[str] = set()  # the pages whose standing is "verified", as every reader is told
        store = Store.load(root)
        for path in page_files(root):
            page = load_page(path, root)
            if page.meta is not None and page.meta.id:
                self.pages[page.meta.id] = page.meta
                if page.meta.measurements is not None:
                    st = standing(page.meta, store.history(page.meta.id, page.path),
                                  trace(page.meta, store, page.path))
                    if st.state == State.verified:
                        self.verified.add(page.meta.id)
        self.rows = [r for r in read_all(root) if isinstance(r, RecordRow)]

    def need(self, spec: dict[str, Any]) -> Need:
        if "text" in spec:
            return Need(f"text {spec['text']!r}", [str(spec["text"])])
        if "nothing" in spec:  # a clean "nothing here": matched in `found` by the replies' `covered: false`
            return Need("covered: false, no result", ['"covered":false', '"results":[]'])
        if "verified_on" in spec:
            gpu = str(spec["verified_on"]).lower()
            ids = sorted(i for i, m in self.pages.items() if m.measurements is not None
                         and gpu in (m.measurements.verified_on or "").lower() and i in self.verified)
            if not ids:  # the true answer is "none": the reply must say so with an empty result list
                return Need(f"no page verified on {spec['verified_on']}", ['"results":[]'])
            return Need(f"pages verified on {spec['verified_on']}", ids)
        if "claim" in spec:
            return self._claim(spec["claim"])
        if "ladder" in spec:
            return self._ladder(spec["ladder"])
        return Need(str(spec), [], problem="unknown need (claim, ladder or text)")

    def _claim(self, c: dict[str, Any]) -> Need:
        label = f"claim {c['page']}:{c['id']}"
        meta = self.pages.get(c["page"])
        block = meta.measurements if meta is not None else None
        mc = block.claims.get(c["id"]) if block is not None else None
        if mc is None:  # a figure kwiki does not measure: the cited one
            claim = next((x for x in meta.claims if x.id == c["id"]), None) if meta is not None else None
            if claim is None or claim.value is None or claim.evidence == "goal":
                return Need(label, [c["id"]], problem="no measured or cited figure on the page")
            return Need(label, [c["id"]], claim.value)
        if mc.value is None:  # an outcome claim: its verdict is the figure
            return Need(label, [c["id"], mc.verdict.value])
        return Need(label, [c["id"]], mc.value)

    def _ladder(self, spec: dict[str, Any]) -> Need:
        from kwiki.results import ladders
        from kwiki.wiki.manifest import load_manifest

        label = f"ladder {spec['page']} {spec['shape']}"
        meta = self.pages.get(spec["page"])
        if meta is None:
            return Need(label, [], problem="no such page")
        want = spec["shape"].lower()
        for rel in sorted(set(meta.artifacts.values())):
            manifest = load_manifest(self.root / rel, self.root)
            for ladder in ladders.from_store(manifest, self.rows, rel):
                for group in ladder.groups:
                    if want not in group.label.lower():
                        continue
                    measured = [r for r in group.rows if r.status == "measured"]
                    if "best" in spec:
                        best = {id(g): r for g, r in ladders.best_per_shape(ladder)}.get(id(group))
                        if best is None:
                            continue
                        if "figure" in spec:  # a figure of its record (occupancy)
                            value = self._record(ladder, group.params, best.variant).get(spec["figure"])
                            return Need(f"{label} fastest ({best.variant}) {spec['figure']}", [best.variant], value,
                                        problem=None if value is not None else "the record has no such figure",
                                        key=spec["figure"], row=best.variant)
                        return Need(f"{label} fastest ({best.variant})", [best.variant],
                                    getattr(best, spec["best"]))
                    row = next((r for r in measured if r.variant == spec["variant"]), None)
                    if row is not None:
                        return Need(f"{label} {row.variant} {spec['figure']}", [row.variant],
                                    getattr(row, spec["figure"]))
                    row = next((r for r in group.rows if r.variant == spec["variant"]), None)
                    if row is not None:  # in the latest run, without a figure (it failed its check): the answer
                        return Need(f"{label} {row.variant} {row.status}", [row.variant, row.status])  # says so
        return Need(label, [], problem="no such shape or variant in the latest run")

    def _record(self, ladder: Any, params: dict[str, Any], variant: str) -> dict[str, float]:
        row = next((r for r in self.rows if r.run_id == ladder.run_id and r.artifact == ladder.artifact
                    and r.variant == variant and r.params == params), None)
        return dict(row.figures) if row is not None else {}


# ---------------------------------------------------------------- is it in the responses?


def _numbers(value: Any, out: list[float]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        out.append(float(value))
    elif isinstance(value, str):
        out.extend(float(m) for m in _NUMBER.findall(value.replace(",", "")))
    elif isinstance(value, dict):
        for v in value.values():
            _numbers(v, out)
    elif isinstance(value, list):
        for v in value:
            _numbers(v, out)


def _rows(value: Any, out: list[dict[str, Any]]) -> None:
    """Every JSON object in `value`, at any depth."""
    if isinstance(value, dict):
        out.append(value)
        for v in value.values():
            _rows(v, out)
    elif isinstance(value, list):
        for v in value:
            _rows(v, out)


def _keyed(need: Need, texts: list[str]) -> bool:
    """Whether a reply holds an object whose `variant` is need.row and whose need.key is need.number."""
    objects: list[dict[str, Any]] = []
    for text in texts:
        try:
            _rows(json.loads(text), objects)
        except ValueError:
            continue
    return any(o.get("variant") == need.row and isinstance(o.get(need.key or ""), (int, float))
               and abs(o[need.key or ""] - (need.number or 0.0)) <= TOLERANCE * abs(need.number or 1.0)
               for o in objects)


def found(need: Need, texts: list[str]) -> bool:
    joined = "\n".join(texts).lower()
    if any(s.lower() not in joined for s in need.strings):
        return False
    if need.number is None:
        return True
    if need.key is not None:  # a small number (warps per SM) is everywhere: it must be the row's own
        return _keyed(need, texts)
    numbers: list[float] = []
    for text in texts:
        try:
            _numbers(json.loads(text), numbers)
        except ValueError:
            _numbers(text, numbers)
    return any(abs(n - need.number) <= TOLERANCE * abs(need.number) for n in numbers)


# ---------------------------------------------------------------- running the scripts


def run(root: Path, questions: list[dict[str, Any]]) -> list[tuple[Outcome, list[Need]]]:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    figures = Figures(root)

    async def go() -> list[tuple[Outcome, list[Need]]]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "kwiki.cli", "mcp", "--root", str(root)],
                                       env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(REPO))
        out = []
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for q in questions:
                        outcome, texts = Outcome(q["id"]), []
                        for n, (tool, arguments) in enumerate(q["script"]):
                            outcome.errors += check_call(n, tool, arguments or {}, q, texts)
                            result = await session.call_tool(tool, arguments or {})
                            text = "".join(getattr(c, "text", "") for c in result.content)
                            outcome.calls += 1
                            outcome.bytes += len(text.encode("utf-8"))
                            texts.append(text)
                            outcome.wire += len(json.dumps(result.model_dump(by_alias=True, mode="json"),
                                                           separators=(",", ":")).encode("utf-8"))
                            if getattr(result, "is_error", None) or getattr(result, "isError", None):
                                outcome.errors.append(f"{tool}: {text[:200]}")
                        needs = [figures.need(n) for n in q["needs"]]
                        outcome.missing = [n.label + (f" ({n.problem})" if n.problem else "")
                                           for n in needs if n.problem or not found(n, texts)]
                        out.append((outcome, needs))
        return out

    return anyio.run(go)


def report(results: list[tuple[Outcome, list[Need]]]) -> tuple[str, bool]:
    rows = [("question", "calls", "bytes", "wire", "answered")]
    for o, _ in results:
        rows.append((o.id, str(o.calls), str(o.bytes), str(o.wire),
                     "yes" if o.answered else "NO: " + "; ".join(o.errors + o.missing)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join([r[0].ljust(widths[0]), *(r[i].rjust(widths[i]) for i in (1, 2, 3)), r[4]]) for r in rows]
    outcomes = [o for o, _ in results]
    median = statistics.median(o.bytes for o in outcomes)
    answered = sum(o.answered for o in outcomes)
    calls = max(o.calls for o in outcomes)
    met = answered == len(outcomes) and median <= MEDIAN_BYTES and calls <= MAX_CALLS
    lines += ["",
              f"answered {answered} of {len(outcomes)}; median {median / 1024:.1f} KB of responses "
              f"(goal <= {MEDIAN_BYTES // 1024} KB); at most {calls} calls (goal <= {MAX_CALLS}); "
              f"total {sum(o.bytes for o in outcomes) / 1024:.1f} KB: goal {'met' if met else 'MISSED'}"]
    return "\n".join(lines), met


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", type=Path, default=REPO, help="the wiki to ask (default: this repository)")
    p.add_argument("--questions", type=Path, default=HERE / "agent_questions.yaml")
    p.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    args = p.parse_args(argv)
    results = run(args.root.resolve(), load_questions(args.questions))
    table, met = report(results)
    if args.json:
        print(json.dumps({"met": met, "questions": [
            {"id": o.id, "calls": o.calls, "bytes": o.bytes, "wire": o.wire, "answered": o.answered,
             "missing": o.missing, "errors": o.errors} for o, _ in results]}, indent=2))
    else:
        print(table)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
