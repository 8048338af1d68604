"""The agent benchmark: questions kernel engineers ask, answered through kwiki's MCP tools.

    python3 bench/agents.py [--root DIR] [--questions bench/agent_questions.yaml] [--json]

Each question of bench/agent_questions.yaml names the page and the figures a correct answer needs
and a fixed script of MCP calls a careful agent makes. The benchmark starts `kwiki mcp` once, over
stdio as an agent does, runs every script, and prints per question the calls, the bytes of the
responses (the text an agent reads: each result's text content) and whether every needed figure
was in them. The figures are looked up when the benchmark runs (a claim's measured value in its
page's block; a ladder's figure in the results store's latest run), so a new `kwiki verify` run
moves them without an edit here.

Goal (issue 17): every question answered, the median question at most 8 KB of responses, no
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
MEDIAN_BYTES = 8 * 1024
TOLERANCE = 5e-3  # relative: figures are printed to 3 to 5 significant digits
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class Need:
    """One figure an answer needs: a label, strings that must all appear, a number that must (or None)."""

    label: str
    strings: list[str]
    number: float | None = None
    problem: str | None = None  # why the figure could not be looked up


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
    return questions


class Figures:
    """Looks up what each need stands for in the wiki at `root`."""

    def __init__(self, root: Path):
        from kwiki.results.store import RecordRow, read_all
        from kwiki.wiki.catalog import page_files
        from kwiki.wiki.pages import load_page

        self.root = root
        self.pages = {}
        for path in page_files(root):
            page = load_page(path, root)
            if page.meta is not None and page.meta.id:
                self.pages[page.meta.id] = page.meta
        self.rows = [r for r in read_all(root) if isinstance(r, RecordRow)]

    def need(self, spec: dict[str, Any]) -> Need:
        if "text" in spec:
            return Need(f"text {spec['text']!r}", [str(spec["text"])])
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
        if mc is None:
            return Need(label, [c["id"]], problem="no measured figure on the page")
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
                        figure = spec["best"]
                        best = (min if figure == "time_us" else max)(
                            (r for r in measured if getattr(r, figure) is not None), key=lambda r: getattr(r, figure))
                        return Need(f"{label} fastest ({best.variant})", [best.variant], getattr(best, figure))
                    row = next((r for r in measured if r.variant == spec["variant"]), None)
                    if row is not None:
                        return Need(f"{label} {row.variant} {spec['figure']}", [row.variant],
                                    getattr(row, spec["figure"]))
        return Need(label, [], problem="no such shape or variant in the latest run")


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


def found(need: Need, texts: list[str]) -> bool:
    joined = "\n".join(texts).lower()
    if any(s.lower() not in joined for s in need.strings):
        return False
    if need.number is None:
        return True
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
                        for tool, arguments in q["script"]:
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
