"""A page shows SHAPE_TABLES shape tables of a ladder it owns, those its claims name first, and every shape goes on
the ladder's own page (kwiki.site.pages): a page's first view no longer grows with its artifacts' shapes."""

from __future__ import annotations

from types import SimpleNamespace

from kwiki.results.ladders import Ladder, Rung, ShapeGroup
from kwiki.site import pages

SIZES = (1, 2, 4, 8, 16, 32)


def _ladder(sizes: tuple[int, ...] = SIZES) -> Ladder:
    def group(m: int, sweep: bool = False) -> ShapeGroup:
        return ShapeGroup(params={"M": m}, label=f"M={m}", sweep=sweep,
                          rows=[Rung(variant="v", status="measured", time_us=float(m))])

    return Ladder(artifact="gemm", title="GEMM", groups=[*(group(m) for m in sizes), group(64, sweep=True)])


def test_the_shapes_the_claims_name_come_first_in_claim_order_and_the_tables_keep_the_ladders_order():
    pl = pages.PageLadder("artifacts/gemm", _ladder(), wanted=[{"M": 16}, {"M": 2}], owner=None)
    shown = pages.shown(pl)
    named = [16, 2][:pages.SHAPE_TABLES]
    kept = sorted(named + [m for m in SIZES if m not in named][:pages.SHAPE_TABLES - len(named)])
    assert [g.params["M"] for g in shown.groups] == [*kept, 64]  # the sweep's one line stays
    assert len(kept) == pages.SHAPE_TABLES < len(SIZES)


def test_a_short_ladder_or_another_pages_is_shown_as_it_is():
    few = pages.PageLadder("artifacts/gemm", _ladder(SIZES[:pages.SHAPE_TABLES]), wanted=[], owner=None)
    assert pages.shown(few) is few.ladder
    other = pages.PageLadder("artifacts/gemm", _ladder(), wanted=[], owner=SimpleNamespace(rel="ws.md"))
    assert pages.shown(other) is other.ladder  # page_ladders cut it to the claimed shapes already


def test_the_page_links_to_the_ladders_own_page_which_holds_every_shape(tmp_path):
    ctx = pages.Context(tmp_path, {})
    sp = SimpleNamespace(rel="kernels/gemm.md", title="The GEMM", meta=SimpleNamespace(
        id="kernel-gemm", artifacts={"gemm": "artifacts/gemm"}, claims=[]))
    pl = pages.PageLadder("artifacts/gemm", _ladder(), wanted=[{"M": 16}], owner=None)
    text, cut = pages._ladder_tables(ctx, sp, [pl])  # type: ignore[arg-type]
    assert cut == {"artifacts/gemm"}
    assert text.count("<table") == pages.SHAPE_TABLES
    assert f"Every shape of `gemm` ({len(SIZES)} tables" in text and "(../indexes/ladders/gemm.md)" in text
    staged = ctx.files[pages.ladder_page("gemm")].decode()
    assert staged.count("<table") == len(SIZES) and "[The GEMM](../../kernels/gemm.md)" in staged
    assert "exclude: true" in staged.split("---")[1]  # out of the search index, as the sources' pages
