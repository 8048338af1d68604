"""Pydantic models of a page's front matter: core fields, references, claims, measurements.

The models accept the front matter of the wiki we replace as it is written (its users have
hundreds of such pages); fields the models do not know are kept and reported as warnings.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from kwiki.core.arch import ArchError, normalize_arch
from kwiki.core.strict import Scalar, Strict
from kwiki.wiki.evidence import EvidenceLevel
from kwiki.wiki.fields import tag as _tag
from kwiki.wiki.fields import unique as _unique
from kwiki.wiki.verdict import Verdict

SLUG = r"^[a-z0-9]+(?:[-_.][a-z0-9]+)*$"
Slug = Annotated[str, StringConstraints(pattern=SLUG, max_length=120)]
NonEmpty = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


class FieldError(ValueError):
    """A validation error about a field below the model that found it (`loc` is relative to it).

    Pydantic locates a model validator's error at the model itself; `kwiki.wiki.pages` appends
    `loc` so the problem names the field (`claims[1].measure.artifact`) and its line.
    """

    def __init__(self, message: str, *loc: str | int):
        super().__init__(message)
        self.loc = loc


def _arch(value: object) -> str:
    try:
        return normalize_arch(value)
    except ArchError as exc:
        raise ValueError(str(exc)) from None


ArchName = Annotated[str, BeforeValidator(_arch)]
Tag = Annotated[str, BeforeValidator(_tag)]
ArchList = Annotated[list[ArchName], AfterValidator(_unique)]
TagList = Annotated[list[Tag], AfterValidator(_unique)]


class PageType(str, Enum):
    technique = "technique"
    algorithm = "algorithm"
    kernel = "kernel"
    pattern = "pattern"
    skill = "skill"
    hardware = "hardware"
    pitfalls = "pitfalls"
    api = "api"
    concept = "concept"
    guide = "guide"
    reference = "reference"


# ---------------------------------------------------------------- sources


class SourceEntry(Strict):
    """A source named by a page: a short id, and where a reader opens it: `url` (http(s), a DOI or an
    arXiv id) or `path` (a file of this repository). `kwiki check` requires one (kwiki.wiki.check)."""

    id: Slug
    title: str | None = None
    url: str | None = None
    path: str | None = Field(default=None, description="a file or folder of this repository, relative to its root")
    note: str | None = None


class SourceLocation(Strict):
    """`source:` entries of the replaced wiki: a path (or 'spec') and an anchor inside it."""

    path: NonEmpty
    anchor: str | None = None


class SourceRef(Strict):
    """`source_refs:` entries: a source id, a path inside that source, and an anchor."""

    source_id: NonEmpty
    path: str | None = None
    anchor: str | None = None


# ---------------------------------------------------------------- claims


class Metric(str, Enum):
    time = "time"
    bandwidth = "bandwidth"
    throughput = "throughput"
    ratio = "ratio"  # a/b of two measured figures: speedup, x cuBLAS, fraction of a ceiling
    # registers, bytes, instructions; the member shadows str.count, and 'count' is the page format's word
    count = "count"  # type: ignore[assignment]
    outcome = "outcome"  # the run ends a predicted way (a failed check, a timeout)


class Outcome(str, Enum):
    passed = "passed"
    check_failed = "check-failed"
    timeout = "timeout"
    crash = "crash"


# figures a result record offers, and their units
FIGURE_UNITS: dict[str, str] = {
    "time_us": "us",
    "time_ms": "ms",
    "gb_per_s": "GB/s",
    "tb_per_s": "TB/s",
    "tflop_per_s": "TFLOP/s",
    "gflop_per_s": "GFLOP/s",
    "registers": "registers",
    "spill_bytes": "bytes",
    "sm_mhz": "MHz",
    "sm_mhz_effective": "MHz",
    "flop_per_clk_per_sm": "FLOP/clk/SM",
    "span_us": "us",
    "event_us": "us",
}
RATIO_UNITS = frozenset({"x", "ratio", "fraction"})


class Selector(Strict):
    """Picks one figure out of an artifact run: the variant, parameters it must match, the figure."""

    variant: NonEmpty
    params: dict[str, Scalar] = Field(default_factory=dict)
    figure: str = "time_us"
    regime: Literal["burst", "sustained"] = Field(
        default="burst", description="burst: the protocol's duty-cycled samples (poison, flush, sync between "
                                     "launches); sustained: blocks of back-to-back launches after clock and power "
                                     "settled (protocol 3)")
    artifact: NonEmpty | None = Field(
        default=None, description="a key of the page's `artifacts` whose run of the same verify holds this figure "
                                  "(default: the measure's artifact), so a claim compares two artifacts")

    @property
    def key(self) -> str:
        """The name of the selected figure among a record's figures (kwiki.results.record.Record.figures)."""
        return self.figure if self.regime == "burst" else f"sustained_{self.figure}"


class Measure(Strict):
    """How kwiki measures a claim: `of` alone, or the ratio `of / per` of two figures of one run."""

    artifact: NonEmpty  # a key of the page's `artifacts` mapping
    of: Selector
    per: Selector | None = None
    outcome: Outcome | None = None  # for metric 'outcome': how running `of.variant` must end

    @model_validator(mode="after")
    def _one_other_artifact(self) -> Measure:
        others = sorted({s.artifact for s in self.selectors if s.artifact and self.elsewhere(s)})
        if len(others) > 1:
            raise ValueError(f"`of` and `per` name two other artifacts ({', '.join(others)}): a claim compares its "
                             f"artifact {self.artifact!r} with at most one other")
        return self

    @property
    def selectors(self) -> list[Selector]:
        """The figures it reads: `of`, and `per` where it is a ratio."""
        return [s for s in (self.of, self.per) if s is not None]

    def key_of(self, sel: Selector) -> str:
        """The page's `artifacts` key of the artifact whose figure `sel` selects: its own, else the measure's."""
        return sel.artifact or self.artifact

    def elsewhere(self, sel: Selector) -> bool:
        """Whether `sel`'s figure is another artifact's than the measure's own."""
        return sel.artifact not in (None, self.artifact)

    @property
    def other(self) -> str | None:
        """The key of the other artifact a cross-artifact claim compares (`of`'s or `per`'s), None otherwise."""
        return next((s.artifact for s in self.selectors if self.elsewhere(s)), None)


class Conditions(Strict):
    """Where a claim holds."""

    arch: ArchName | None = None
    gpu: str | None = None
    shape: str | None = None
    dtype: str | None = None
    variant: str | None = None
    note: str | None = None


class Contradiction(Strict):
    """An outside figure our own measurement contradicts: the claim that measures it (on this page, or
    on `page`) and a note. The outside claim stays on the page as history, marked, and never counts
    towards the page's state (kwiki.verify.standing)."""

    claim: Slug
    page: Slug | None = Field(default=None, description="the page of that claim (default: this page)")
    note: NonEmpty


class Decision(Strict):
    """Where a claim places its page in a decision table of a technique family (kwiki.site.decisions): "if your
    shape / dtype / size is X, use Y". The axes of a row are the claim's `conditions.shape` and
    `conditions.dtype` and this `size`; Y is `use`, the measured figure and the verdict are the claim's."""

    family: Slug = Field(description="the technique family whose table the row joins (gemm, gemv, memory-bound, "
                                     "attention, ...); one table per family")
    use: NonEmpty = Field(description="what to use there, in a few words (a variant, a technique)")
    over: str | None = Field(default=None, description="what it is measured against (the claim's `per`, in words)")
    size: str | None = Field(default=None, description="the size axis where shape alone does not say it: 'M <= 64', "
                                                       "'L2-resident', 'decode (1 token)'")
    varies: list[NonEmpty] = Field(default_factory=list, description="the factors the claim's comparison changes "
                                                                     "(schedule, dtype, tile, ...); a claim that "
                                                                     "changes more than one confounds them and "
                                                                     "its row is left out of the table")


class Term(Strict):
    """A term of the glossary (kwiki.site.glossary): one definition, and the page that measures it. The site links
    the first use of the term (or an alias) on every other page to its definition."""

    term: NonEmpty
    aliases: list[NonEmpty] = Field(default_factory=list, description="other spellings a page may use")
    definition: NonEmpty
    measured_on: Slug | None = Field(default=None, description="the id of the page whose claims measure it")


MIN_SIZES = 4  # the sizes a comparison (and a curve across sizes) needs: fewer draw nothing


class Comparison(Strict):
    """Variants of one artifact drawn side by side over one size parameter, the others held (kwiki.site.curves): where
    one overtakes another, e.g. CUDA cores against tensor cores over the rows M of a decode GEMM."""

    artifact: NonEmpty = Field(description="a key of the page's `artifacts`")
    over: NonEmpty = Field(description="the parameter along the x axis (a dim of the manifest's shapes, e.g. M)")
    at: dict[NonEmpty, Scalar] = Field(default_factory=dict, description="the parameters every point holds, e.g. "
                                                                         "{N: 8192, K: 8192}")
    variants: list[NonEmpty] = Field(min_length=2, max_length=5, description="the lines, in legend order")

    @model_validator(mode="after")
    def _apart(self) -> Comparison:
        if self.over in self.at:
            raise ValueError(f"{self.over!r} is both the parameter drawn over and one held in `at`")
        if len(set(self.variants)) < len(self.variants):
            raise ValueError("a variant is named twice in `variants`")
        return self


class Claim(Strict):
    """One checkable statement with a number (or an outcome) and the conditions it holds under."""

    id: Slug
    statement: NonEmpty
    metric: Metric
    unit: NonEmpty
    value: float | None = None
    tolerance: float | None = Field(default=None, ge=0, le=10, description="relative, 0.05 = 5%")
    at_least: float | None = None
    at_most: float | None = None
    expect: Outcome | None = None
    better: Literal["higher", "lower"] | None = Field(
        default=None, description="which direction is an improvement (default: lower for time, higher otherwise)")
    conditions: Conditions = Field(default_factory=Conditions)
    evidence: Literal["source-reported", "spec", "goal"] = "goal"
    source: str | None = None
    measure: Measure | None = None
    contradicted_by: Contradiction | None = None
    decision: Decision | None = Field(default=None, description="the claim's row in its family's decision table")

    @model_validator(mode="after")
    def _shape(self) -> Claim:
        if self.contradicted_by is not None and (self.measure is not None or self.evidence == "goal"):
            raise FieldError("'contradicted_by' marks an outside figure (evidence source-reported or spec, no "
                             "'measure'); a claim kwiki measures is judged by its runs", "contradicted_by")
        bound = self.at_least is not None or self.at_most is not None
        if self.metric == Metric.outcome:
            if self.expect is None:
                raise FieldError("an outcome claim needs 'expect' (passed, check-failed, timeout, crash)", "expect")
            if self.value is not None or bound:
                where = "value" if self.value is not None else ("at_least" if self.at_least is not None else "at_most")
                raise FieldError("an outcome claim takes 'expect', not a value or bound", where)
            return self
        if self.expect is not None:
            raise FieldError("'expect' is only for claims whose metric is 'outcome'", "expect")
        if self.value is None and not bound:
            raise FieldError("a claim needs either 'value' (with 'tolerance') or a bound ('at_least'/'at_most')")
        if self.value is not None and bound:
            where = "at_least" if self.at_least is not None else "at_most"
            raise FieldError("give either 'value' or a bound ('at_least'/'at_most'), not both", where)
        if self.tolerance is not None and self.value is None:
            raise FieldError("'tolerance' applies to a point 'value' only", "tolerance")
        if self.at_least is not None and self.at_most is not None and self.at_least > self.at_most:
            raise FieldError(f"at_least ({self.at_least}) is above at_most ({self.at_most})", "at_least")
        if self.evidence == "source-reported" and not self.source:
            raise FieldError("a source-reported claim needs its 'source'", "source")
        if self.measure is not None:
            self._check_units(self.measure)
        return self

    def _check_units(self, m: Measure) -> None:
        if m.per is not None:
            if self.unit not in RATIO_UNITS:
                raise FieldError(f"a ratio of two figures has unit 'x' (or 'ratio'), not {self.unit!r}", "unit")
            return
        want = FIGURE_UNITS.get(m.of.figure)
        if want is not None and want != self.unit:
            raise FieldError(f"figure {m.of.figure!r} is in {want}, but the claim's unit is {self.unit!r}", "unit")

    @property
    def direction(self) -> str:
        if self.better:
            return self.better
        if self.at_most is not None and self.at_least is None:
            return "lower"
        return "lower" if self.metric in (Metric.time, Metric.count) else "higher"

    @property
    def reference(self) -> float | None:
        """The figure the claim names (its value, else its bound), to which a measured figure is compared."""
        for value in (self.value, self.at_least, self.at_most):
            if value:
                return value
        return None

    @property
    def tolerance_or_default(self) -> float:
        return 0.05 if self.tolerance is None else self.tolerance

    def describe(self) -> str:
        """The claimed figure as text: '4.45 TB/s +-5%', '>= 1.15 x'."""
        if self.metric == Metric.outcome:
            assert self.expect is not None  # `_shape` requires it of an outcome claim
            return f"ends: {self.expect.value}"
        if self.value is not None:
            return f"{self.value:g} {self.unit} ±{self.tolerance_or_default:.0%}"
        parts = []
        if self.at_least is not None:
            parts.append(f">= {self.at_least:g}")
        if self.at_most is not None:
            parts.append(f"<= {self.at_most:g}")
        return " and ".join(parts) + f" {self.unit}"


# ---------------------------------------------------------------- measurements (kwiki-owned)


class Provenance(Strict):
    """Where and when a figure was measured."""

    gpu: str
    gpu_uuid: str | None = None
    arch: str | None = None
    driver: str | None = None
    cuda: str | None = None
    nvcc: str | None = None
    date: str
    commit: str | None = None
    dirty: bool | None = None
    kwiki: str | None = None
    artifact_hash: str | None = None
    torch: str | None = Field(default=None, description="torch's version, for figures of Python artifacts")
    triton: str | None = Field(default=None, description="Triton's version, for figures of Python artifacts")


class Gate(Strict):
    """A gate a record or claim failed: its name ('physical', ...) and why, in one line."""

    name: NonEmpty
    reason: NonEmpty


class Board(Strict):
    """One board (a physical GPU, by NVML's UUID) behind a claim's median: its runs and their median."""

    board: NonEmpty = Field(description="the GPU's UUID as NVML gives it ('unknown' for a run that named none)")
    runs: int = Field(ge=1)
    median: float


class MeasuredClaim(Strict):
    verdict: Verdict
    value: float | None = Field(default=None, description="the median of the claim's figure over the runs of its "
                                                          "series (null when a gate refused the figure)")
    unit: str | None = None
    spread: float | None = Field(default=None, description="relative run-to-run band of the figure (k*MAD over "
                                                           "the series' runs, at least 2%); in blocks written "
                                                           "before series: the run's own half-spread")
    change: Literal["new", "same", "faster", "slower", "ambiguous"] | None = None
    detail: str | None = None
    provenance: Provenance | None = None
    runs: int | None = Field(default=None, ge=1, description="runs of the series the value is the median of; "
                                                             "fewer than 3: provisional")
    range: tuple[float, float] | None = Field(default=None, description="lowest and highest figure over those runs")
    drift: float | None = Field(default=None, description="relative move of the latest run from the series median, "
                                                          "set only when it lies outside the band")
    gates: list[Gate] | None = Field(default=None, description="gates the claim's figure failed")
    run_ids: list[NonEmpty] | None = Field(default=None, description="the runs of the results store whose values "
                                                                    "make the figure (the last one wrote it); "
                                                                    "null in blocks written before traceability")
    series: str | None = Field(default=None, description="the series (kwiki.verify.series) those runs belong to")
    boards: list[Board] | None = Field(default=None, description="the boards those runs ran on, each with its runs "
                                                                 "and median (a series pools the boards of one "
                                                                 "GPU model)")

    @property
    def board_spread(self) -> float | None:
        """(highest - lowest board median) / the lowest; None with fewer than two boards."""
        meds = [b.median for b in self.boards or []]
        if len(meds) < 2 or min(meds) == 0:
            return None
        return (max(meds) - min(meds)) / abs(min(meds))


class Measurements(Strict):
    """The block `kwiki verify` writes into a page's front matter; never edited by hand."""

    evidence_level: EvidenceLevel
    verified_on: str | None = None
    date: str
    claims: dict[str, MeasuredClaim] = Field(default_factory=dict)


# ---------------------------------------------------------------- the page


SM_CONSTRAINT = r"^\s*(>=|<=|==|>|<)?\s*\d+(\.\d+)?[af]?\s*$"


class PageMeta(BaseModel):
    """A page's front matter."""

    model_config = ConfigDict(extra="allow")

    # core
    id: Slug
    title: NonEmpty
    type: PageType
    architectures: ArchList = Field(default_factory=list)
    tags: TagList = Field(default_factory=list)
    evidence_level: EvidenceLevel = EvidenceLevel.spec
    summary: str | None = None
    vendor: str | None = None
    languages: list[str] = Field(default_factory=list)
    status: Literal["draft", "review", "stable", "verified", "deprecated", "experimental"] | None = None
    confidence: Literal[
        "spec", "source-reported", "experimental", "measured", "verified", "low", "medium", "high"
    ] | None = None
    reproducibility: Literal["none", "snippet", "artifact", "verified"] | None = None
    # references to other pages
    prerequisites: list[Slug] = Field(default_factory=list)
    related: list[Slug] = Field(default_factory=list)
    related_skills: list[Slug] = Field(default_factory=list)
    related_apis: list[str] = Field(default_factory=list)
    # external sources
    sources: list[Slug | SourceEntry] = Field(default_factory=list)
    source: list[SourceLocation] = Field(default_factory=list)
    source_refs: list[SourceRef] = Field(default_factory=list)
    upstream_repo: str | None = None
    # artifacts
    artifacts: dict[Slug, NonEmpty] = Field(default_factory=dict)
    artifact_dir: str | None = None
    # applicability
    requires_sm: Annotated[str, StringConstraints(pattern=SM_CONSTRAINT)] | None = None
    requires_features: list[str] = Field(default_factory=list)
    hardware_features: list[str] = Field(default_factory=list)
    techniques: list[str] = Field(default_factory=list)
    kernel_types: list[str] = Field(default_factory=list)
    applies_to_ops: list[str] = Field(default_factory=list)
    applies_to_pattern_class: list[str] = Field(default_factory=list)
    single_kernel_useful: bool | None = None
    scope: str | None = None
    # toolchain the replaced wiki recorded by hand
    cuda_version_tested: str | None = None
    driver_version_tested: str | None = None
    toolchain: str | None = None
    measured_on: str | None = None
    # how the site lays the page out (kwiki.site): its answer box, the ladders it owns, what "best" leaves out
    headline: Slug | None = Field(default=None, description="the claim the page answers with: first in its answer "
                                                            "box, its figure on the home page")
    owns: list[Slug] = Field(default_factory=list, description="keys of `artifacts` whose full ladder this page "
                                                               "shows (an artifact named by several pages has one "
                                                               "owner; the others show the rows their claims name)")
    set_aside: dict[NonEmpty, NonEmpty] = Field(
        default_factory=dict, description="variant -> why it never counts as 'best' (answer box, roofline): "
                                          "all-zero inputs, a probe that does not do the work")
    glossary: list[Term] = Field(default_factory=list, description="the terms this page defines (a glossary page)")
    compare: list[Comparison] = Field(default_factory=list, description="variants drawn side by side over one size "
                                                                        "(the page's 'Across sizes' charts)")
    # claims and kwiki's measurements
    claims: list[Claim] = Field(default_factory=list)
    measurements: Measurements | None = None

    @model_validator(mode="before")
    @classmethod
    def _lists(cls, data: Any) -> Any:
        # the replaced wiki writes a lone `source:` or `sources:` entry without a list
        if isinstance(data, dict):
            for key in ("source", "sources", "tags", "architectures", "languages"):
                if isinstance(data.get(key), (str, dict)):
                    data = {**data, key: [data[key]]}
        return data

    @model_validator(mode="after")
    def _claim_ids(self) -> PageMeta:
        seen: set[str] = set()
        for i, claim in enumerate(self.claims):
            if claim.id in seen:
                raise FieldError(f"claim id {claim.id!r} appears twice", "claims", i, "id")
            seen.add(claim.id)
            if claim.measure is not None and claim.measure.artifact not in self.artifacts:
                raise FieldError(
                    f"claim {claim.id!r} measures artifact {claim.measure.artifact!r}, "
                    f"which is not a key of 'artifacts'",
                    "claims", i, "measure", "artifact",
                )
            for label in ("of", "per"):
                sel = getattr(claim.measure, label, None) if claim.measure is not None else None
                if sel is not None and sel.artifact is not None and sel.artifact not in self.artifacts:
                    raise FieldError(f"claim {claim.id!r}: measure.{label}.artifact {sel.artifact!r} is not a key of "
                                     "'artifacts'", "claims", i, "measure", label, "artifact")
        if self.headline is not None and self.headline not in seen:
            raise FieldError(f"headline {self.headline!r} is not a claim of this page", "headline")
        for i, comp in enumerate(self.compare):
            if comp.artifact not in self.artifacts:
                raise FieldError(f"compare names artifact {comp.artifact!r}, which is not a key of 'artifacts'",
                                 "compare", i, "artifact")
        for i, key in enumerate(self.owns):
            if key not in self.artifacts:
                raise FieldError(f"owns {key!r}, which is not a key of 'artifacts'", "owns", i)
        measured = {c.id for c in self.claims if c.measure is not None}
        for i, claim in enumerate(self.claims):
            by = claim.contradicted_by
            if by is not None and by.page in (None, self.id) and by.claim not in measured:
                raise FieldError(f"claim {claim.id!r} is contradicted by {by.claim!r}, which is not a claim of "
                                 "this page that kwiki measures (one with a 'measure')",
                                 "claims", i, "contradicted_by", "claim")
        return self

    @property
    def unknown_fields(self) -> list[str]:
        return sorted((self.model_extra or {}).keys())

    @property
    def effective_evidence(self) -> EvidenceLevel:
        return self.measurements.evidence_level if self.measurements else self.evidence_level

    def references(self) -> list[tuple[str, int, str]]:
        """(field, index, page id) for every reference to another page."""
        out: list[tuple[str, int, str]] = []
        for name in ("prerequisites", "related", "related_skills"):
            out.extend((name, i, ref) for i, ref in enumerate(getattr(self, name)))
        out.extend(("glossary", i, t.measured_on) for i, t in enumerate(self.glossary) if t.measured_on)
        return out
