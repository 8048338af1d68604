"""The untimed trace pass of a timed `kwiki verify` run (the manifest's `trace`; kwiki.results.timelines says what a
timeline is and where it is kept).

After the timed runs, each artifact that ran and whose manifest declares `trace` is run once more: its build with
`trace.args` ('{out}' replaced by a file in a directory of its own), no `--variants`, no shapes but the ones the
args name, under run.timeout_s, timing nothing. The file holds one Timeline per line; each is validated, must name
this artifact and one of its variants, and gets the run's GPU model and id. Anything else (no file, an empty one, a
line that is not a Timeline, a non-zero exit, a timeout) is a located warning of the artifact's manifest, never a
traceback, and none of that artifact's timelines is kept: a half-read trace would draw a schedule the kernel did
not have. A trace problem never fails the timed results (the timelines are pictures of the schedule, not evidence
for a claim). With `write`, the timelines go to results/timelines/<gpu model>.jsonl, a later one replacing an
earlier one of the same artifact, variant and params.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kwiki.core.errors import Problem
from kwiki.core.proc import run_group
from kwiki.results.timelines import MAX_TRACE_BYTES, TIMELINES_DIR, Timeline, append_timelines, timelines_path
from kwiki.verify.run import command_of, cut_short, run_env, stderr_tail, write_log
from kwiki.verify.types import BuildResult, Plan, PlannedArtifact, RunOutcome
from kwiki.wiki.manifest import MANIFEST

OUT_NAME = "timelines.jsonl"


class TraceFailed(Exception):
    """Why one artifact's trace pass gave no timelines (a message for its located problem)."""


@dataclass
class TraceStage:
    """What the trace pass of a run did: per artifact, its timelines or why none."""

    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)
    written: int = 0
    artifacts: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), "written": self.written, "notes": self.notes,
                "artifacts": self.artifacts}


def traced(plan: Plan, outcomes: Mapping[str, list[RunOutcome]]) -> list[PlannedArtifact]:
    """The artifacts of the run that declare a trace pass: those that ran (their build succeeded), by path."""
    out = []
    for path in sorted(outcomes):
        planned = plan.artifacts.get(path)
        if planned is not None and planned.manifest is not None and planned.manifest.trace is not None:
            out.append(planned)
    return out


def run_stage(plan: Plan, builds: list[BuildResult], outcomes: Mapping[str, list[RunOutcome]], root: Path,
              run_id: str, *, write: bool, progress: Callable[[str], None]) -> TraceStage | None:
    """Trace every artifact of the run that declares `trace` (None when none does); commit the timelines with
    `write`."""
    todo = traced(plan, outcomes)
    if not todo:
        return None
    stage = TraceStage()
    t0 = time.monotonic()
    gpu = plan.gpu.name if plan.gpu is not None else "host"  # the results store's name for this machine
    by_key = {(b.artifact, b.target): b for b in builds}
    for planned in todo:
        build = by_key.get((planned.build_name, planned.run_target or ""))
        if build is None or not build.ok or build.binary is None:
            continue  # it ran, so it was built: defensive only
        progress(f"trace {planned.name}: one untimed launch for its timelines")
        where = f"{planned.path}/{MANIFEST}"
        try:
            found = trace_artifact(planned, build, root=root, run_id=run_id, gpu=gpu,
                                   gpu_index=plan.gpu.index if plan.gpu is not None else None)
        except TraceFailed as exc:
            stage.problems.append(Problem(where, 0, "trace", f"trace pass: {exc}", "warning"))
            stage.artifacts.append({"artifact": planned.name, "timelines": 0, "problem": str(exc)})
            progress(f"    no timelines: {exc}")
            continue
        stage.timelines += found
        stage.artifacts.append({"artifact": planned.name, "timelines": len(found), "problem": None})
        progress(f"    {len(found)} timelines")
    if write and stage.timelines:
        stage.written = append_timelines(root, gpu, stage.timelines)
    stage.seconds = time.monotonic() - t0
    shown = timelines_path(Path("."), gpu).as_posix().removeprefix("./")
    kept = (f"committed to {shown}" if stage.written else
            "--no-write: not kept in results/" + TIMELINES_DIR + "/" if not write else "none to keep")
    failed = sum(1 for a in stage.artifacts if a["problem"])
    stage.notes.append(f"trace: {len(stage.timelines)} timelines of {len(todo)} artifacts in {stage.seconds:.1f} s "
                       f"({kept})" + (f"; {failed} gave none (see the warnings)" if failed else ""))
    return stage


def trace_artifact(planned: PlannedArtifact, build: BuildResult, *, root: Path, run_id: str, gpu: str,
                   gpu_index: int | None) -> list[Timeline]:
    """One launch of the artifact's build with its trace args; its timelines, or TraceFailed saying why none."""
    m = planned.manifest
    assert m is not None and m.trace is not None and build.binary is not None
    with tempfile.TemporaryDirectory(prefix="kwiki-trace-") as tmp:
        out = Path(tmp) / OUT_NAME
        argv = [*command_of(planned, build.binary), *m.trace.argv(str(out))]
        res = run_group(argv, cwd=planned.directory, env=run_env(build, gpu_index, run_id),
                        timeout=m.run.timeout_s, max_output=m.run.max_output_bytes)
        write_log(root, run_id, f"{planned.name}-trace", res)
        tail = stderr_tail(res, root)
        ended = cut_short(res, m.run.timeout_s, m.run.max_output_bytes, tail)
        if ended is not None:
            raise TraceFailed(ended[1])
        if res.returncode != 0:
            raise TraceFailed(f"exit {res.returncode}" + (f": {tail}" if tail else ""))
        if not out.is_file():
            raise TraceFailed("the binary exited 0 but wrote no timelines file where its trace args put {out}")
        size = out.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise TraceFailed(f"its timelines file holds {size} bytes, more than {MAX_TRACE_BYTES} (trace fewer "
                              "CTAs or tiles)")
        text = out.read_text(encoding="utf-8", errors="replace")
    return parse_timelines(text, name=planned.name, variants={v.name for v in m.variants}, gpu=gpu, run_id=run_id)


def parse_timelines(text: str, *, name: str, variants: set[str], gpu: str, run_id: str) -> list[Timeline]:
    """Each line of a timelines file as a Timeline of artifact `name` (gpu and run_id filled in); TraceFailed at the
    first line that is not one, or when there is none."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            t = Timeline.model_validate_json(line)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise TraceFailed(f"line {n} of its timelines file is not a Timeline: "
                              f"{loc + ': ' if loc else ''}{err['msg']}") from None
        if t.artifact != name:
            raise TraceFailed(f"line {n} of its timelines file names artifact {t.artifact!r}, not {name!r}")
        if t.variant not in variants:
            raise TraceFailed(f"line {n} of its timelines file names variant {t.variant!r}, which the manifest does "
                              "not declare")
        if not t.spans:
            raise TraceFailed(f"line {n} of its timelines file has no spans")
        out.append(t.model_copy(update={"gpu": gpu, "run_id": run_id}))  # kwiki's to say, whatever the line said
    if not out:
        raise TraceFailed("its timelines file is empty")
    return out
