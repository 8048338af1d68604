"""Measured timelines, committed: what each warpgroup of a kernel did when, from an artifact's untimed trace pass.

The record (`Timeline`): per CTA and warpgroup, the spans of each phase (a producer waiting on an empty slot,
issuing TMA; a consumer waiting on a full slot, running wgmma, an attention kernel's softmax, the epilogue), in
nanoseconds of the GPU's `%globaltimer`. The artifact writes one Timeline per line (kwiki.verify.tracepass runs it,
once, with the manifest's `trace.args`); kwiki fills `gpu` and `run_id`. The timed samples never carry the stamps
(they would cost time), so a timeline shows the schedule, not the speed: its figures are the ladder's.

Where. `results/timelines/<gpu model>.jsonl` (committed, beside the results store: a verify may start on a fresh
machine every time), one JSON line per (artifact, variant, params); a later line for the same three replaces an
earlier one, so the file holds the latest trace of each and grows with the artifacts, not with the runs. The
site (kwiki.site.timeline) draws them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from kwiki.core.numbers import params_text
from kwiki.core.strict import Scalar, Strict
from kwiki.results.store import gpu_slug
from kwiki.results.storelines import RESULTS_DIR

TIMELINES_DIR = "timelines"
MAX_TRACE_BYTES = 16 * 1024 * 1024  # a trace file is read whole and committed: a bound, not a wish

Phase = Literal["producer-wait", "tma-issue", "consumer-wait", "wgmma", "softmax", "epilogue"]


class Span(Strict):
    """One phase of one warpgroup, between two `%globaltimer` stamps."""

    block: int = Field(ge=0, description="the CTA (blockIdx.x of the persistent grid)")
    warpgroup: int = Field(ge=0, description="the warpgroup within the CTA (0: the producer in a specialized kernel)")
    phase: Phase
    start_ns: int = Field(ge=0)
    end_ns: int = Field(ge=0)
    tile: int | None = Field(default=None, description="the output tile the span works on, where it has one")


class Timeline(Strict):
    """The trace pass of one variant on one shape: every span it stamped."""

    artifact: str
    variant: str
    params: dict[str, Scalar] = Field(default_factory=dict)
    gpu: str | None = None
    run_id: str | None = Field(default=None, description="the verify run whose untimed pass recorded it")
    spans: list[Span]

    @property
    def ident(self) -> tuple[str, str, str]:
        return self.artifact, self.variant, params_text(self.params)


def timelines_path(root: Path, gpu: str) -> Path:
    return root / RESULTS_DIR / TIMELINES_DIR / f"{gpu_slug(gpu)}.jsonl"


def load_timelines(root: Path) -> list[Timeline]:
    """Every committed timeline (the latest per GPU model, artifact, variant and params), sorted; a line that is not
    one is skipped (the pass validated what it wrote: a hand edit is not the site's to report)."""
    latest: dict[tuple[str, str, str, str], Timeline] = {}
    directory = root / RESULTS_DIR / TIMELINES_DIR
    if directory.is_dir():
        for path in sorted(directory.glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    t = Timeline.model_validate_json(line)
                except ValidationError:
                    continue
                latest[(t.gpu or path.stem, *t.ident)] = t
    return [latest[k] for k in sorted(latest)]


def append_timelines(root: Path, gpu: str, timelines: Iterable[Timeline]) -> int:
    """Add `timelines` to the GPU model's file (replacing the lines of the same artifact, variant and params),
    atomically; the number written."""
    from kwiki.results.keyed import replace_lines

    return replace_lines(timelines_path(root, gpu), timelines, Timeline)
