"""The ladder as data (kwiki.results.ladders): readable shapes, grouping, the latest run of the store, the best row."""

from __future__ import annotations

import pytest

from kwiki.results import ladders
from kwiki.results.store import RecordRow
from kwiki.wiki.manifest import Manifest

MANIFEST = Manifest.model_validate({
    "name": "gemv", "title": "GEMV", "targets": ["sm_90a"], "build": {"sources": ["g.cu"]},
    "variants": [{"name": "cublas", "rung": 0, "adds": "the baseline"}, {"name": "tuned", "rung": 1, "adds": "tuning"},
                 {"name": "read_ceiling", "description": "a read stream"}],
    "baseline": "cublas", "ceiling": "read_ceiling"})


@pytest.mark.parametrize("params, label", [
    ({"dtype": "u8", "shape": "4294967296"}, "4 GiB, u8"),  # a byte count, not 'shape=4294967296'
    ({"K": 4096, "M": 16384, "N": 2048, "dtype": "fp8_e4m3"}, "16384x2048x4096, fp8_e4m3"),  # MxNxK
    ({"K": 16384, "M": 8192, "dtype": "bf16", "shape": "8192x16384"}, "8192x16384, bf16"),  # the shape, once
    ({"cols": 8192, "dtype": "bf16", "rows": 1024}, "1024x8192, bf16"),
    ({"N": 256, "dtype": "tf32", "warpgroups": 2}, "tf32, N=256, warpgroups=2"),  # one dimension keeps its name
    ({"n": 1024, "dtype": "f32"}, "f32, n=1024"),
    ({"n": 64 * 1024 ** 2}, "64 Mi elements"),
    ({"bytes": 1536 * 1024 ** 2}, "1.5 GiB"),
    ({"bytes": 1000}, "bytes=1000"),
])
def test_shapes_read_as_a_reader_writes_them(params, label):
    assert ladders.shape_label(params) == label


def _row(variant: str, run: str, params: dict, us: float, **kw) -> RecordRow:
    gb = 1e9 / us / 1e3
    return RecordRow.model_validate({
        "gpu": "NVIDIA H200", "date": f"2026-11-{run}T00:00:00+00:00", "run_id": f"r{run}", "artifact": "gemv",
        "target": "sm_90a", "variant": variant, "params": params, "passed": True,
        "figures": {"time_us": us, "gb_per_s": gb, "tb_per_s": gb / 1e3}, "spread": 0.01, **kw})


def test_the_store_gives_the_latest_run_grouped_by_shape_numbers_as_numbers():
    small, big = {"M": 1024, "dtype": "bf16"}, {"M": 8192, "dtype": "bf16"}
    rows = [_row("cublas", "01", small, 50.0),  # an older run: left out
            *[_row(v, "02", p, us) for p in (big, small) for v, us in
              (("tuned", 80.0), ("read_ceiling", 40.0), ("cublas", 100.0))],
            _row("tuned", "02", {"M": 99}, 1.0).model_copy(update={"artifact": "other"})]
    (ladder,) = ladders.from_store(MANIFEST, rows, path="artifacts/gemv")
    assert (ladder.run_id, ladder.gpu, ladder.path) == ("r02", "NVIDIA H200", "artifacts/gemv")
    assert [g.label for g in ladder.groups] == ["bf16, M=1024", "bf16, M=8192"]  # not text order ('8192' < '99')
    tuned = ladder.groups[0].rows[1]
    assert [r.variant for r in ladder.groups[0].rows] == ["cublas", "tuned", "read_ceiling"]  # manifest order
    assert (tuned.rung, tuned.adds, tuned.rate_unit, tuned.vs_baseline, tuned.of_speed_of_light) == (
        1, "tuning", "TB/s", 1.25, 0.5)
    assert ladder.groups[0].rows[0].role == "baseline" and ladder.groups[0].rows[2].role == "ceiling"


def test_the_best_row_of_each_shape_is_the_fastest_measured_one_never_a_refused_row_or_the_ceiling():
    gate = {"name": "physical", "reason": "faster than the board"}
    small, big, failed = {"M": 1024}, {"M": 8192}, {"M": 16384}
    rows = [_row("cublas", "02", small, 100.0), _row("tuned", "02", small, 1.0, gates=[gate]),  # refused: never best
            _row("read_ceiling", "02", small, 10.0),  # the speed of light is not a way to do the work
            _row("cublas", "02", big, 100.0), _row("tuned", "02", big, 80.0), _row("read_ceiling", "02", big, 40.0),
            _row("tuned", "02", failed, 5.0).model_copy(update={"figures": {}, "passed": False})]  # no timing
    (ladder,) = ladders.from_store(MANIFEST, rows)
    best = [(g.label, r.variant) for g, r in ladders.best_per_shape(ladder)]
    assert best == [("M=1024", "cublas"), ("M=8192", "tuned")]  # M=16384: nothing measured, left out
    assert [r.variant for _, r in ladders.best_per_shape(ladder, ceiling=True)] == ["read_ceiling", "read_ceiling"]


def test_the_best_row_compares_rates_in_one_unit_and_times_across_units():
    mixed = [_row("cublas", "02", {"M": 8}, 100.0),
             _row("tuned", "02", {"M": 8}, 90.0).model_copy(update={"figures": {"time_us": 90.0, "tflop_per_s": 5.0}})]
    (ladder,) = ladders.from_store(MANIFEST, mixed)
    rates = {r.variant: (r.rate, r.rate_unit) for r in ladder.groups[0].rows}
    assert rates["cublas"][1] == "TB/s" and rates["tuned"] == (5.0, "TFLOP/s")
    assert [r.variant for _, r in ladders.best_per_shape(ladder)] == ["tuned"]  # TFLOP/s and TB/s: the shorter time
    slow_but_more_bytes = [_row("cublas", "02", {"M": 8}, 100.0),
                           _row("tuned", "02", {"M": 8}, 120.0).model_copy(
                               update={"figures": {"time_us": 120.0, "gb_per_s": 20000.0, "tb_per_s": 20.0}})]
    (ladder,) = ladders.from_store(MANIFEST, slow_but_more_bytes)
    assert [r.variant for _, r in ladders.best_per_shape(ladder)] == ["tuned"]  # one unit: the higher rate wins


def test_a_refused_record_keeps_its_time_but_no_rate_and_compact_json_has_no_nulls():
    gate = {"name": "physical", "reason": "faster than the board"}
    rows = [_row("cublas", "02", {"M": 8}, 100.0), _row("tuned", "02", {"M": 8}, 1.0, gates=[gate])]
    (ladder,) = ladders.from_store(MANIFEST, rows)
    refused = ladder.groups[0].rows[1]
    assert refused.status == "refused" and refused.time_us == 1.0
    assert refused.rate is None and refused.vs_baseline is None and refused.gates[0].name == "physical"
    data = ladder.compact()

    def nulls(x: object) -> bool:
        if isinstance(x, dict):
            return any(v is None or v == [] or nulls(v) for v in x.values())
        return isinstance(x, list) and any(nulls(v) for v in x)

    assert not nulls(data) and "ceiling" in data and "others" not in data


def test_the_store_rows_mechanism_and_profile_reach_the_ladder_once_per_variant_and_per_row():
    manifest = Manifest.model_validate({**MANIFEST.model_dump(exclude_none=True), "variants": [
        {"name": "cublas", "rung": 0}, {"name": "tuned", "rung": 1, "kernels": ["tuned_*"],
                                        "sass": {"require": ["LDG.E.128 >= 2"], "forbid": ["LDG.E.64"]}},
        {"name": "read_ceiling"}]})
    evidence = {"status": "passed", "kernels": [{"name": "void tuned_kernel<4>(float*)", "registers": 40,
                                                 "spill_stores": 0, "spill_loads": 0,
                                                 "matched": {"LDG.E.128 >= 2": 8, "LDG.E.64": 0}}]}
    profile = {"ncu_dram_bytes": 9.0e8, "ncu_dram_owed_bytes": 1.0e9, "ncu_l2_bytes": 3.0e9,
               "ncu_bytes_ratio": 0.987654}
    small, big = {"M": 8}, {"M": 16}
    rows = [_row("cublas", "02", small, 100.0), _row("cublas", "02", big, 100.0),
            _row("tuned", "02", small, 80.0, mechanism=evidence),
            _row("tuned", "02", big, 80.0, mechanism=evidence).model_copy(
                update={"figures": {"time_us": 80.0, "gb_per_s": 12.5, **profile}}),
            _row("read_ceiling", "02", big, 40.0, bytes_level="l2").model_copy(
                update={"figures": {"time_us": 40.0, "gb_per_s": 25.0, **profile}})]
    (ladder,) = ladders.from_store(manifest, rows)
    assert list(ladder.mechanisms) == ["tuned"]  # once per variant: one binary runs every shape
    tuned = ladder.mechanisms["tuned"]
    assert tuned.status == "passed" and tuned.forbid == ["LDG.E.64"]  # the manifest says which pattern is forbidden
    assert tuned.kernels[0].matched == {"LDG.E.128 >= 2": 8, "LDG.E.64": 0} and tuned.kernels[0].registers == 40
    by = {(g.label, r.variant): r for g in ladder.groups for r in g.rows}
    assert by["M=8", "tuned"].profiled is None and by["M=8", "cublas"].profiled is None  # not profiled: nothing
    assert by["M=16", "tuned"].profiled == ladders.Profiled(level="dram", bytes=1.0e9, bytes_ratio=0.9877)  # owed
    assert by["M=16", "read_ceiling"].profiled == ladders.Profiled(level="l2", bytes=3.0e9, bytes_ratio=0.9877)
    data = ladder.compact()  # the agents' JSON: the evidence once per variant, the profile per row
    assert data["mechanisms"]["tuned"]["kernels"][0]["matched"]["LDG.E.128 >= 2"] == 8
    assert data["groups"][1]["rows"][1]["profiled"] == {"level": "dram", "bytes": 1.0e9, "bytes_ratio": 0.9877}
    assert "profiled" not in data["groups"][0]["rows"][1]
    (plain,) = ladders.from_store(MANIFEST, [_row("cublas", "02", small, 100.0)])
    assert plain.mechanisms == {} and "mechanisms" not in plain.compact()


def test_a_run_without_a_profile_shows_the_newest_profile_of_the_same_code_and_names_its_run():
    profile = {"ncu_dram_owed_bytes": 1.0e9, "ncu_bytes_ratio": 0.5}
    shape = {"M": 8}

    def timed(run: str, code: str, **figures: float) -> RecordRow:
        row = _row("tuned", run, shape, 80.0, artifact_hash=code)
        return row.model_copy(update={"figures": {**row.figures, **figures}})

    rows = [timed("01", "aaa", **profile), timed("02", "aaa", **{**profile, "ncu_bytes_ratio": 0.25}),
            timed("03", "bbb", **{**profile, "ncu_bytes_ratio": 0.75}),  # other code: not this binary's
            timed("04", "aaa"), _row("cublas", "04", shape, 100.0, artifact_hash="aaa")]
    (ladder,) = ladders.from_store(MANIFEST, rows)
    by = {r.variant: r for r in ladder.groups[0].rows}
    assert ladder.run_id == "r04"
    assert by["tuned"].profiled == ladders.Profiled(level="dram", bytes=1.0e9, bytes_ratio=0.25, run_id="r02")
    assert by["cublas"].profiled is None  # never profiled
    from kwiki.site.ladder_html import profiled_text
    assert profiled_text(by["tuned"].profiled) == "×0.25 of 1.00 GB DRAM†"
    (own,) = ladders.from_store(MANIFEST, [*rows[:3], timed("04", "bbb", **profile)])
    assert own.groups[0].rows[0].profiled == ladders.Profiled(level="dram", bytes=1.0e9, bytes_ratio=0.5)


def test_a_pages_ladder_by_shape_and_an_unknown_shape_names_the_known_ones():
    """`get_ladder` / `kwiki show --ladder` on this repository's GEMV page: absolute figures without the body."""
    from pathlib import Path

    from kwiki.agents.show import page_ladders
    from kwiki.core.errors import UsageError

    repo = Path(__file__).resolve().parent.parent
    doc = page_ladders(repo, "kernel-gemv-bf16", "16384x16384")
    (ladder,) = doc["ladders"]
    (group,) = ladder["groups"]
    assert group["label"] == "16384x16384, bf16" and ladder["run_id"] and ladder["baseline"] == "cublas"
    rows = {r["variant"]: r for r in group["rows"]}
    tuned, cublas = rows["tuned"], rows["cublas"]
    assert tuned["time_us"] > 0 and tuned["rate_unit"] == "TB/s"
    if cublas["status"] == "measured":
        assert tuned["vs_baseline"] > 0
    else:  # the baseline failed its check in the latest run (cuBLAS did at this shape on 2026-12-02): no ratio
        assert "vs_baseline" not in tuned and "rate" not in cublas
    with pytest.raises(UsageError, match=r"shape '999'.*shapes: .*8192x8192, bf16"):
        page_ladders(repo, "kernel-gemv-bf16", "999")
