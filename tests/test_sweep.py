"""Sweep sizes (`shapes.sweep`): a curve across many sizes without a ladder table of a hundred rows. The manifest
validates them, kwiki runs them in a process of their own with `sweep_variants`, the curve draws every size, and
the ladder tables (the page's Markdown, the site's HTML, the bar charts) fold them into one line."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from kwiki.results import ladders
from kwiki.results.record import Record
from kwiki.results.store import RecordRow
from kwiki.site.curves import curve_specs
from kwiki.site.ladder_html import ladder_html
from kwiki.verify.run import run_artifact
from kwiki.verify.tables import ladder_table
from kwiki.verify.types import BuildResult, PlannedArtifact, RunOutcome
from kwiki.wiki.manifest import Manifest

VALUES = ["4096x7168", "8192x8192", "4099x4104"]
SWEEP = ["1024x1024", "2048x2048", "3072x3072", "6144x6144", "12288x12288"]
VARIANTS = [{"name": "cublas", "rung": 0, "adds": "the baseline"}, {"name": "naive", "rung": 1, "adds": "a row each"},
            {"name": "tuned", "rung": 2, "adds": "tuning"}, {"name": "read_ceiling", "description": "reads"}]


def _manifest(**shapes: object) -> Manifest:
    entry = {"option": "shapes", "dims": ["M", "K"], "values": VALUES, "sweep": SWEEP,
             "sweep_variants": ["cublas", "tuned", "read_ceiling"], **shapes}
    return Manifest.model_validate({
        "name": "gemv", "title": "GEMV", "targets": ["sm_90a"], "build": {"sources": ["g.cu"]},
        "variants": VARIANTS, "baseline": "cublas", "ceiling": "read_ceiling", "shapes": [entry]})


# ---------------------------------------------------------------- the manifest


def test_a_sweep_gives_its_own_process_its_sizes_and_claims_only_the_values():
    m = _manifest()
    assert m.run_args() == [f"--shapes={','.join(VALUES)}"]  # the ladder's process: values only
    assert m.sweep_args() == [f"--shapes={','.join(SWEEP)}"]
    assert m.declares_shape({"M": 8192, "K": 8192}) and not m.declares_shape({"M": 1024, "K": 1024})
    assert _manifest(sweep=[], sweep_variants=[]).sweep_args() == []


@pytest.mark.parametrize("change, message", [
    ({"sweep_variants": []}, "together"),
    ({"sweep": ["1024x1024", "8192x8192"]}, "also one of `values`"),
    ({"sweep": ["1024"]}, "2 positive integers"),
    ({"sweep_variants": ["cublas", "tuned"]}, "the ceiling 'read_ceiling'"),
    ({"sweep_variants": ["tuned", "read_ceiling"]}, "the baseline 'cublas'"),
    ({"sweep_variants": ["cublas", "read_ceiling"]}, "a rung besides"),
    ({"sweep_variants": ["cublas", "tuned", "read_ceiling", "nope"]}, "'nope' is not one of the variants"),
])
def test_a_sweep_the_curve_cannot_use_is_refused(change, message):
    with pytest.raises(ValidationError, match=message):
        _manifest(**change)


def test_a_sweep_needs_one_shapes_entry_and_shared_process_variants():
    data = _manifest().model_dump(mode="json", exclude_defaults=True)
    two = {**data, "shapes": [*data["shapes"], {"option": "mib", "dims": ["mib"], "values": ["64"]}]}
    with pytest.raises(ValidationError, match="one `shapes` entry"):
        Manifest.model_validate(two)
    alone = {**data, "variants": [{**v, "isolated": True} if v["name"] == "tuned" else v for v in data["variants"]]}
    with pytest.raises(ValidationError, match="'tuned' is isolated"):
        Manifest.model_validate(alone)


# ---------------------------------------------------------------- the ladder: the curve has it all, tables fold it


def _row(variant: str, params: dict, tb: float) -> RecordRow:
    us = 1e6 / tb
    return RecordRow.model_validate({
        "gpu": "NVIDIA H200", "date": "2026-12-02T00:00:00+00:00", "run_id": "r1", "artifact": "gemv",
        "target": "sm_90a", "variant": variant, "params": params, "passed": True,
        "figures": {"time_us": us, "gb_per_s": tb * 1e3, "tb_per_s": tb}, "spread": 0.01})


def _shape(value: str) -> dict:
    m, k = value.split("x")
    return {"M": int(m), "K": int(k), "dtype": "bf16", "shape": value}


def _store(m: Manifest) -> list[RecordRow]:
    rows = [_row(v["name"], _shape(s), tb) for s in VALUES
            for v, tb in zip(VARIANTS, (3.0, 0.1, 4.0, 4.6), strict=True)]
    rows += [_row(v, _shape(s), tb) for s in SWEEP
             for v, tb in (("cublas", 2.5), ("tuned", 3.5), ("read_ceiling", 4.6))]
    return rows


def test_the_curve_draws_every_size_and_the_ladder_tables_fold_the_sweep_into_one_line():
    m = _manifest()
    (ladder,) = ladders.from_store(m, _store(m))
    assert sorted(g.label.split(",")[0] for g in ladder.groups if g.sweep) == sorted(SWEEP)
    (spec,) = curve_specs(ladder)
    assert len(spec["points"]) == len(VALUES) + len(SWEEP)  # the curve: every size, the sweep's too
    assert [g.label.split(",")[0] for g in ladders.ladder_groups(ladder)] == sorted(VALUES, key=lambda v: int(
        v.split("x")[1]))  # the tables: the ladder's sizes only
    html = ladder_html(ladder)
    assert html.count("<table") == len(VALUES) and "1024x1024, bf16</caption>" not in html
    assert "Plus 5 sweep sizes (1024x1024, bf16 to 12288x12288, bf16; cublas, read_ceiling, tuned)" in html


def test_the_written_back_ladder_table_has_no_sweep_rows_and_one_line_for_them():
    m = _manifest()
    planned = PlannedArtifact("artifacts/gemv", Path("."), m, run_target="sm_90a")
    timing = {"median_us": 10.0, "q1_us": 10.0, "q3_us": 10.0, "min_us": 10.0, "samples": 5}

    def rec(variant: str, value: str) -> Record:
        return Record.model_validate({"kwiki_record": 1, "variant": variant, "params": _shape(value),
                                      "check": {"passed": True}, "timing": timing})

    main = RunOutcome("gemv", "sm_90a", [v["name"] for v in VARIANTS], "ok",
                      records=[rec(v["name"], s) for s in VALUES for v in VARIANTS])
    swept = RunOutcome("gemv", "sm_90a", ["cublas", "tuned", "read_ceiling"], "ok",
                       records=[rec(v, s) for s in SWEEP for v in ("cublas", "tuned", "read_ceiling")])
    table = ladder_table(planned, [main, swept])
    assert table.count("| `") == len(VALUES) * len(VARIANTS)  # not one sweep row
    assert "1024x1024" not in table.split("*Plus")[0]
    assert "*Plus 5 sweep sizes (1024x1024, bf16 to 12288x12288, bf16; cublas, read_ceiling, tuned): see the curve " \
           "across sizes (on the site).*" in table


def test_a_sweep_whose_records_name_the_size_otherwise_is_told_by_the_variants_that_ran():
    """vector_loads takes --mib and records the stream's bytes as `shape`: no dim to match, so a size at which
    only the sweep's variants ran is a sweep size."""
    m = Manifest.model_validate({
        "name": "streams", "title": "streams", "targets": ["sm_90a"], "build": {"sources": ["s.cu"]},
        "variants": [{"name": v} for v in ("read", "copy", "write", "other")], "baseline": "copy", "ceiling": "read",
        "shapes": [{"option": "mib", "dims": ["mib"], "values": ["4096"], "sweep": ["64", "128"],
                    "sweep_variants": ["read", "copy", "write"]}]})

    def size(mib: int) -> dict:
        return {"dtype": "u8", "shape": str(mib << 20)}

    rows = [_row(v, size(4096), 4.0).model_copy(update={"artifact": "streams"})
            for v in ("read", "copy", "write", "other")]
    rows += [_row(v, size(mib), 3.0).model_copy(update={"artifact": "streams"}) for mib in (64, 128)
             for v in ("read", "copy", "write")]
    (ladder,) = ladders.from_store(m, rows)
    assert [(g.label, g.sweep) for g in ladder.groups] == [("64 MiB, u8", True), ("128 MiB, u8", True),
                                                            ("4 GiB, u8", False)]


# ---------------------------------------------------------------- the run: a process of its own


FAKE = '''#!{python}
import json, sys
args = dict(a.split("=", 1) if "=" in a else (a, "") for a in sys.argv[1:] if a.startswith("--"))
names = sys.argv[sys.argv.index("--variants") + 1].split(",")
with open(sys.argv[0] + ".calls", "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
for shape in args["--shapes"].split(","):
    m, k = shape.split("x")
    for name in names:
        print(json.dumps({{"kwiki_record": 1, "variant": name, "params": {{"M": int(m), "K": int(k)}},
                          "check": {{"passed": True}}}}))
'''


def test_the_sweep_runs_after_the_ladder_in_its_own_process_with_its_variants_only(tmp_path):
    binary = tmp_path / "fake"
    binary.write_text(FAKE.format(python=sys.executable))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    m = _manifest()
    planned = PlannedArtifact("artifacts/gemv", tmp_path, m, run_target="sm_90a",
                              run_variants=["cublas", "naive", "tuned", "read_ceiling"])
    build = BuildResult("gemv", "sm_90a", ok=True, cached=False, key="k", binary=str(binary))
    outcomes = run_artifact(planned, build, gpu_index=None, root=tmp_path, run_id="r1")
    assert [o.variants for o in outcomes] == [["cublas", "naive", "tuned", "read_ceiling"],
                                              ["cublas", "tuned", "read_ceiling"]]
    assert all(o.status == "ok" for o in outcomes), [o.message for o in outcomes]
    calls = [json.loads(line) for line in (tmp_path / "fake.calls").read_text().splitlines()]
    assert calls[0][0] == f"--shapes={','.join(VALUES)}" and calls[1][0] == f"--shapes={','.join(SWEEP)}"
    assert len(outcomes[1].records) == len(SWEEP) * 3 and outcomes[1].log and outcomes[1].log.endswith("gemv-sweep.log")
    assert os.path.isfile(tmp_path / outcomes[0].log) and os.path.isfile(tmp_path / outcomes[1].log)


def test_a_curve_of_byte_counts_labels_its_sizes_in_bytes():
    m = Manifest.model_validate({
        "name": "streams", "title": "streams", "targets": ["sm_90a"], "build": {"sources": ["s.cu"]},
        "variants": [{"name": v} for v in ("read", "copy", "write")], "baseline": "copy", "ceiling": "read",
        "shapes": [{"option": "mib", "dims": ["mib"], "values": ["4096"], "sweep": ["64", "128", "256"],
                    "sweep_variants": ["read", "copy", "write"]}]})
    rows = [_row(v, {"dtype": "u8", "shape": str(mib << 20)}, tb).model_copy(update={"artifact": "streams"})
            for mib in (64, 128, 256, 4096) for v, tb in (("read", 4.0), ("copy", 2.0), ("write", 3.0))]
    (ladder,) = ladders.from_store(m, rows)
    (spec,) = curve_specs(ladder)
    assert [p["label"] for p in spec["points"]] == ["64 MiB", "128 MiB", "256 MiB", "4 GiB"]  # not 'Mi elements'


LISTER = '''#!{python}
import sys
shapes = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--shapes="))
if "5120x5120" in shapes.split(","):
    sys.exit("usage error: --shapes: 5120x5120 is not a shape this binary takes")
print("\\n".join(shapes.split(",")))
'''


def test_a_build_fails_when_the_binary_does_not_list_the_sweep_back(tmp_path):
    from kwiki.verify.build import agree_on_shapes
    from kwiki.wiki.buildline import BuildJob

    binary = tmp_path / "lister"
    binary.write_text(LISTER.format(python=sys.executable))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)

    def check(m: Manifest) -> BuildResult:
        result = BuildResult("gemv", "sm_90a", ok=True, cached=False, key="k", binary=str(binary))
        return agree_on_shapes(BuildJob("gemv", tmp_path, m, "sm_90a"), tmp_path, result)

    assert check(_manifest()).ok  # values and sweep both listed back
    bad = check(_manifest(sweep=[*SWEEP, "5120x5120"]))  # the binary refuses one size of the sweep
    assert not bad.ok and "shapes.sweep: --shapes" in (bad.error or "")


def test_the_bar_charts_of_a_ladder_leave_the_sweep_sizes_to_the_curve(tmp_path):
    from kwiki.site import charts
    from kwiki.site.pages import Context, _unswept

    m = _manifest()
    ctx = Context(root=tmp_path, records={})
    ctx.loaded["artifacts/gemv"] = m  # the manifest, as the site read it
    rows = _unswept(ctx, "artifacts/gemv", _store(m))
    assert {r.params["shape"] for r in rows} == set(VALUES)
    specs = charts.ladder_specs(rows, [v["name"] for v in VARIANTS], "cublas")
    assert len(specs) == len(VALUES)  # one bar chart per ladder size, none per sweep size


def test_where_a_library_wins_the_curve_keeps_the_size_and_draws_the_best_of_the_ladders_own_rungs():
    m = Manifest.model_validate({
        "name": "gemm", "title": "GEMM", "targets": ["sm_90a"], "build": {"sources": ["g.cu"]},
        "variants": [{"name": "lt", "rung": 0}, {"name": "cublas", "rung": 0}, {"name": "ws", "rung": 1}],
        "baseline": "lt",
        "shapes": [{"option": "shapes", "dims": ["M", "N", "K"], "values": ["4096x4096x4096"],
                    "sweep": ["1024x1024x1024", "2048x2048x2048", "3072x3072x3072"], "sweep_variants": ["lt", "ws"]}]})

    def row(variant: str, n: int, tflops: float) -> RecordRow:
        params = {"M": n, "N": n, "K": n, "dtype": "bf16"}
        return RecordRow.model_validate({
            "gpu": "NVIDIA H200", "date": "2026-12-02T00:00:00+00:00", "run_id": "r1", "artifact": "gemm",
            "target": "sm_90a", "variant": variant, "params": params, "passed": True,
            "figures": {"time_us": 2 * n ** 3 / tflops / 1e6, "tflop_per_s": tflops}, "spread": 0.01})

    rows = [row("lt", 4096, 790.0), row("cublas", 4096, 800.0), row("ws", 4096, 780.0)]  # a library is fastest
    rows += [row(v, n, t) for n in (1024, 2048, 3072) for v, t in (("lt", 500.0), ("ws", 450.0 + n / 100))]
    (ladder,) = ladders.from_store(m, rows)
    (spec,) = curve_specs(ladder)
    assert len(spec["points"]) == 4 and {p["best_variant"] for p in spec["points"]} == {"ws"}
    assert spec["points"][-1]["best"] < spec["points"][-1]["base"]  # below the baseline, and drawn so


# ---------------------------------------------------------------- the curve: the runs a verdict stands on


def _runs(m: Manifest) -> list[RecordRow]:
    """Five runs of `gemv`: one of an older series, then four of the current one, `tuned` faster or slower in each
    (the factor) and every other variant the same."""
    out = []
    for n, (series, factor) in enumerate((("old", 0.5), ("new", 0.9), ("new", 1.0), ("new", 0.95), ("new", 1.02))):
        for row in _store(m):
            f = factor if row.variant == "tuned" else 1.0
            figures = {"time_us": row.figures["time_us"] / f, "gb_per_s": row.figures["gb_per_s"] * f,
                       "tb_per_s": row.figures["tb_per_s"] * f}
            out.append(row.model_copy(update={"run_id": f"r{n}", "date": f"2026-12-0{n + 1}T00:00:00+00:00",
                                              "series": f"nvidia-h200/p3/{series}", "figures": figures}))
    return out


def test_the_curve_draws_the_median_of_the_series_last_three_runs_with_their_range(tmp_path):
    """Each point of the curve is the median over the runs a verdict stands on (the last three of the latest run's
    series), its band their lowest and highest share; a run before those three, or of an older series, is not
    drawn, and neither is the latest run alone (it was: the curve drew from it only)."""
    from kwiki.site.listings import SitePage
    from kwiki.site.pages import Context, _curves, page_ladders
    from kwiki.wiki.model import PageMeta

    m = _manifest()
    rows = _runs(m)
    ((*_, latest),) = ladders.store_runs(m, rows)
    assert [lad.run_id for lad in ladders.store_runs(m, rows)[0]] == ["r2", "r3", "r4"]
    assert latest == ladders.from_store(m, rows)[0]  # the last of them is the latest run's ladder
    ctx = Context(root=tmp_path, records={"gemv": rows})
    ctx.loaded["artifacts/gemv"] = m
    meta = PageMeta.model_validate({"id": "kernel-gemv", "title": "GEMV", "type": "kernel",
                                    "artifacts": {"gemv": "artifacts/gemv"}})
    sp = SitePage(page=None, rel="kernels/gemv.md", meta=meta, standing=None)
    (pl,) = page_ladders(ctx, sp)
    (spec,) = curve_specs(pl.ladder, None, pl.runs)
    sol = 3.5 / 4.6  # tuned's share of the read ceiling at a sweep size, factor 1
    point = next(p for p in spec["points"] if p["label"] == "1024x1024")
    assert point["best_variant"] == "tuned" and point["best_runs"] == 3 and spec["runs"] == 3
    assert round(point["best"], 3) == round(sol, 3)  # the median (r2), not the latest (r4: 1.02)
    assert (round(point["best_low"], 3), round(point["best_high"], 3)) == (round(0.95 * sol, 3), round(1.02 * sol, 3))
    assert point["base_low"] == point["base_high"] == point["base"]  # the baseline did not move
    assert "Across sizes" in _curves(ctx, sp, [pl])  # the page draws the same
    (svg,) = ctx.files.values()
    assert b"<polygon" in svg and "tuned 76.1% of the speed of light (median of 3 runs, 72.3–77.6%)".encode() in svg
    assert b"each line is their median" in svg


# ---------------------------------------------------------------- claims read the ladder's records, never the sweep's


def test_a_claim_that_names_no_size_reads_the_ladders_record_in_the_run_and_in_the_store(tmp_path):
    """vector_loads' claims name a variant and no size (the ladder runs one): the sweep runs the same variants at
    nine more. The run's judge read the ladder's process; the store, which holds both, must read the same record,
    or every later check finds 'no figure of this claim' in that run (run 3 of vector_loads, 2026-12-02)."""
    from kwiki.results.series import claim_value
    from kwiki.verify.claims import _figure
    from kwiki.wiki.model import Claim, Selector

    binary = tmp_path / "fake"
    binary.write_text(FAKE.format(python=sys.executable))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    m = _manifest(values=["4096x7168"])
    planned = PlannedArtifact("artifacts/gemv", tmp_path, m, run_target="sm_90a",
                              run_variants=["cublas", "naive", "tuned", "read_ceiling"])
    build = BuildResult("gemv", "sm_90a", ok=True, cached=False, key="k", binary=str(binary))
    outcomes = run_artifact(planned, build, gpu_index=None, root=tmp_path, run_id="r1")
    assert [o.sweep for o in outcomes] == [False, True]
    sel = Selector.model_validate({"variant": "tuned", "figure": "time_us"})
    with pytest.raises(Exception) as caught:  # the fake prints no timing: found, but without a figure
        _figure(list(reversed(outcomes)), sel)  # the sweep's outcome first: still never read
    assert "has no figure" in str(caught.value)  # one record, the ladder's (the sweep's: '5 records match')

    claim = Claim.model_validate({"id": "c", "statement": "s", "metric": "ratio", "unit": "x", "at_least": 1.0,
                                  "measure": {"artifact": "a", "of": {"variant": "tuned", "figure": "time_us"},
                                              "per": {"variant": "cublas", "figure": "time_us"}}})
    ladder = [_row("tuned", _shape("4096x7168"), 2.0), _row("cublas", _shape("4096x7168"), 1.0)]
    swept = [_row(v, _shape(s), 3.0).model_copy(update={"sweep": True}) for s in SWEEP for v in ("tuned", "cublas")]
    assert claim_value(ladder + swept, claim) == pytest.approx(0.5)
    assert claim_value(ladder + [r.model_copy(update={"sweep": None}) for r in swept], claim) is None  # ambiguous


def test_a_record_row_says_it_came_from_the_sweep_and_an_older_row_stays_as_it_was():
    row = _row("tuned", _shape("1024x1024"), 3.0)
    assert "sweep" not in row.model_dump(mode="json", exclude_none=True)  # rows of the ladder keep their bytes
    assert row.model_copy(update={"sweep": True}).model_dump(mode="json", exclude_none=True)["sweep"] is True


def test_audits_are_asked_of_the_ladders_records_never_of_the_sweeps(repo, capsys):
    """vector_loads' claims compare records of its ladder (4 GiB); the sweep runs the same variants at nine more
    sizes, stored after them. The audits a page needs are the ladder's: asked of the last stored match, the list
    named read_v16_x4 at 8 GiB, a record no claim reads, and the page could never be verified."""
    from kwiki.cli import main
    from kwiki.results.trace import Store, _unaudited
    from kwiki.wiki.catalog import load_wiki
    from kwiki.wiki.manifest import load_manifest

    m = load_manifest(repo / "artifacts" / "vector_loads_sm90a", repo)
    entry = m.sweep_shapes()
    assert entry is not None
    swept = {str(p["mib"] << 20) for p in entry.params(sweep=True)}
    assert main(["verify", "--list-audits", "--json", "--root", str(repo), "technique-vectorized-loads"]) in (0, 1)
    listed = json.loads(capsys.readouterr().out)["audits"]["missing"]
    assert listed and all(str(e["params"].get("shape")) not in swept for e in listed), listed
    page = next(p for p in load_wiki(repo).pages if p.meta and p.meta.id == "technique-vectorized-loads")
    lines = _unaudited(page.meta, Store.load(repo))
    assert not any(f"shape={s}" in line for line in lines for s in swept), lines
