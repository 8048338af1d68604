"""Figures of earlier code (kwiki.results.freshness): a measured claim whose artifact's code changed since the runs of
its series says so in `kwiki check` (a warning, also under --strict), in `show`, `query` and the MCP tools (through the
index, which notices the edit), and on the site; an edit outside the series key (a manifest comment) changes nothing.
The tree is a copy of the repository's SwiGLU page and its artifact (measured, one artifact, no cross-artifact
claim)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kwiki.agents.show import show
from kwiki.results.freshness import changed, problems
from kwiki.results.trace import PageTrace
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
PAGE = "wiki/nvidia/kernels/swiglu.md"
ART = "artifacts/swiglu_bf16_sm90a"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel in (ART, "artifacts/common"):
        shutil.copytree(REPO / rel, tmp_path / rel, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / PAGE).parent.mkdir(parents=True)
    shutil.copy(REPO / PAGE, tmp_path / PAGE)
    return tmp_path


def _changed(root: Path) -> dict[str, str]:
    meta = load_page(root / PAGE, root).meta
    assert meta is not None
    return changed(root, [(PAGE, meta)]).get(PAGE, {})


def _measured_ids(root: Path) -> set[str]:
    meta = load_page(root / PAGE, root).meta
    assert meta is not None and meta.measurements is not None
    return {cid for cid, mc in meta.measurements.claims.items() if mc.series}


def test_an_edit_to_the_kernels_marks_every_measured_figure_of_that_artifact(tree: Path) -> None:
    before = _changed(tree)  # empty while the committed figures are of the committed code (an edit to the harness,
    assert set(before) in (set(), _measured_ids(tree))  # which this Python artifact's key covers, marks them all)
    source = tree / ART / "kernels.py"
    source.write_text(source.read_text() + "\n# an edit\n")
    found = _changed(tree)
    assert set(found) == _measured_ids(tree) and found
    why = next(iter(found.values()))
    assert ART in why and "measured on series nvidia-h200/p" in why and "kwiki verify" in why


def test_an_edit_outside_the_series_key_changes_nothing(tree: Path) -> None:
    before = _changed(tree)
    manifest = tree / ART / "artifact.yaml"
    manifest.write_text(manifest.read_text() + "\n# a comment\n")
    assert _changed(tree) == before
    source = tree / ART / "kernels.py"
    source.write_text(source.read_text() + "\n# an edit\n")
    assert set(_changed(tree)) == _measured_ids(tree)  # and the comparison can fail


def test_check_warns_once_per_artifact_and_the_warning_stays_a_warning(tree: Path) -> None:
    source = tree / ART / "kernels.py"
    source.write_text(source.read_text() + "\n# an edit\n")
    meta = load_page(tree / PAGE, tree).meta
    assert meta is not None
    found = problems(tree, [(PAGE, meta, 7)])
    assert len(found) == 1 and found[0].severity == "warning" and found[0].line == 7
    assert "figure(s) of earlier code" in found[0].message


def test_show_and_query_see_an_edit_made_after_the_index_was_built(tree: Path) -> None:
    page_id = load_page(tree / PAGE, tree).meta.id  # type: ignore[union-attr]
    before = show(tree, page_id, body=False)
    assert {c["id"] for c in before["claims"] if "code_changed" in c} == set(_changed(tree))
    source = tree / ART / "kernels.py"
    source.write_text(source.read_text() + "\n# an edit\n")
    after = show(tree, page_id, body=False)  # the same index, refreshed: the artifact's files are in its snapshot
    marked = {c["id"] for c in after["claims"] if "code_changed" in c}
    assert marked == _measured_ids(tree)


def test_the_index_reads_again_only_the_pages_an_artifact_edit_concerns(tree: Path) -> None:
    from kwiki.agents.index import open_index

    def refresh() -> list[str]:
        for f in tree.rglob("*"):  # files older than the index's racy window (fresh ones are looked at again)
            os.utime(f, (1.6e9, 1.6e9))
        conn, done = open_index(tree)
        conn.close()
        return done.retraced + done.changed

    refresh()  # built
    assert refresh() == []
    (tree / "artifacts" / "kept_apart").mkdir()  # another artifact's folder: the SwiGLU page is not read again
    (tree / "artifacts" / "kept_apart" / "x.py").write_text("x = 1\n")
    assert refresh() == []
    source = tree / ART / "kernels.py"
    kept = source.read_text()
    source.write_text(kept + "\n# an edit\n")
    assert refresh() == [PAGE]  # marked again in the index without tracing it again (the results store is as it was)
    page_id = load_page(tree / PAGE, tree).meta.id  # type: ignore[union-attr]
    assert {c["id"] for c in show(tree, page_id, body=False)["claims"] if "code_changed" in c} == _measured_ids(tree)
    source.write_text(kept)
    assert refresh() == [PAGE]
    assert {c["id"] for c in show(tree, page_id, body=False)["claims"] if "code_changed" in c} == set(_changed(tree))
    harness = tree / "artifacts" / "common" / "kwiki_harness.py"  # shared code: every measured page
    harness.write_text(harness.read_text() + "\n# an edit\n")
    assert refresh() == [PAGE]


def test_the_brief_hit_and_the_site_say_so() -> None:
    from kwiki.agents.query import _brief_claim
    from kwiki.agents.views import claim_view
    from kwiki.site.render import claims_table

    meta = load_page(REPO / PAGE, REPO).meta
    assert meta is not None and meta.measurements is not None
    cid = next(iter(meta.measurements.claims))
    claim = next(c for c in meta.claims if c.id == cid)
    trace = PageTrace(changed={cid: "measured on series x; now y"})
    view = claim_view(claim, meta.measurements, trace)
    assert view["code_changed"] == "measured on series x; now y"
    assert _brief_claim(view)["code_changed"] is True
    assert "code_changed" not in claim_view(claim, meta.measurements, PageTrace())
    table = claims_table(meta, trace)
    assert table.lower().count("earlier code") == 1 + 1  # the badge, and the note below the table
    assert "measured on series x; now y" in table
    assert "earlier code" not in claims_table(meta, PageTrace())
