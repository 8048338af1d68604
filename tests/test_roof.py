"""The read roof: a speed of light that is a bound (issue 11, item 4).

The roof is bytes / BW with BW fitted over a size sweep (time = t0 + bytes / BW); t0 is reported, never added.
Fit and fraction logic on fake records; the C++ fit (kwiki_ceiling.cuh) against the Python one; and
`kwiki verify` over a fixture artifact whose records are what a GEMV with a roof prints, against a fake H200.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from kwiki.cli import main
from kwiki.results.gpu import Gpu
from kwiki.results.record import Record
from kwiki.verify import env as envmod
from kwiki.verify import gates, roof
from kwiki.wiki.frontmatter import parse_page

H200 = Gpu(index=0, name="NVIDIA H200", uuid=None, cc=90, sm_count=132, memory_gib=139.8, sm_mhz=1980,
           sm_mhz_max=1980)
BW, T0 = 4600.0, 3.0  # GB/s, us: the fake card's read stream
SIZES = [int(128 * 2**20 * 32 ** (i / 7)) // 65536 * 65536 for i in range(8)]


def stream_us(nbytes: float, bw: float = BW, t0: float = T0) -> float:
    return t0 + nbytes / bw / 1e3


def points_text(points: list[tuple[float, float]]) -> str:
    return ";".join(f"{b:.0f}:{t!r}:k" for b, t in points)


def ceiling(nbytes: float, points: list[tuple[float, float]], **over: object) -> Record:
    f = roof.fit(points)
    assert f is not None
    extra: dict[str, object] = {"roof_gb_per_s": f.gb_per_s, "roof_t0_us": f.t0_us, "roof_r2": f.r2,
                                "roof_max_residual": f.max_residual, "roof_bw_rse": f.bw_rse,
                                "roof_points": points_text(points), "roof_kernels": "a,b"}
    extra.update(over)
    return Record.model_validate({"kwiki_record": 1, "variant": "read_ceiling", "bytes": nbytes,
                                  "check": {"passed": True}, "extra": extra})


def timed(nbytes: float, us: float, spread: float = 0.002) -> Record:
    return Record.model_validate({
        "kwiki_record": 1, "variant": "v", "bytes": nbytes, "check": {"passed": True},
        "timing": {"median_us": us, "q1_us": us * (1 - spread), "q3_us": us * (1 + spread),
                   "min_us": us * (1 - 2 * spread), "samples": 20}})


SWEEP = [(float(b), stream_us(b)) for b in SIZES]


# ---------------------------------------------------------------- the fit


def test_the_fit_recovers_bandwidth_and_fixed_cost_and_says_how_well_it_fits():
    f = roof.fit(SWEEP)
    assert f is not None
    assert f.gb_per_s == pytest.approx(BW, rel=1e-9) and f.t0_us == pytest.approx(T0, abs=1e-6)
    assert f.r2 == pytest.approx(1.0) and f.max_residual < 1e-9 and f.bw_rse < 1e-9


def test_noisy_points_give_a_fit_quality_that_says_so():
    noisy = [(b, t * (1.01 if i % 2 else 0.99)) for i, (b, t) in enumerate(SWEEP)]
    f = roof.fit(noisy)
    assert f is not None and f.gb_per_s == pytest.approx(BW, rel=0.02)
    assert 0.009 < f.max_residual < 0.03 and f.bw_rse > 0.001 and f.r2 < 1.0


@pytest.mark.parametrize("points", [SWEEP[:2], [(1e8, 20.0)] * 4, [(1e8, 30.0), (2e8, 20.0), (4e8, 10.0)],
                                    [(1e8, 0.0), (2e8, 20.0), (4e8, 40.0)]])
def test_no_roof_from_too_few_equal_shrinking_or_empty_points(points):
    assert roof.fit(points) is None


def test_the_roof_bounds_every_point_of_its_own_sweep():
    """t0 > 0 is never added: every read of the sweep, at any size, takes longer than bytes / BW."""
    f = roof.fit(SWEEP)
    assert f is not None
    assert all(b / f.gb_per_s / 1e3 < t for b, t in SWEEP)


def test_an_honest_kernel_never_passes_100_percent_at_any_size_and_the_old_ceiling_did():
    """An honest kernel that streams at the card's rate with a smaller fixed cost than the read kernel
    (1 us against 3) was above 100% of a ceiling timed at its own size (the bug of issue 11); against
    the fitted roof it is below 100% at every size."""
    c = ceiling(SIZES[0], SWEEP)
    fitted = c.roof
    assert fitted is not None
    for nbytes in (2**20, 29_360_128, 117_440_512, 537_001_984, 4 * 2**30):
        kernel = timed(nbytes, stream_us(nbytes, t0=1.0))
        assert roof.fraction(kernel, fitted) < 1.0
        old = timed(nbytes, stream_us(nbytes))  # the old read_ceiling: timed at the kernel's size, t0 included
        assert kernel.figures()["gb_per_s"] / old.figures()["gb_per_s"] > 1.0


def test_the_ceiling_record_gives_the_roof_as_its_figures():
    c = ceiling(1e9, SWEEP)
    figs = c.figures()
    assert figs["gb_per_s"] == pytest.approx(BW) and figs["time_us"] == pytest.approx(1e9 / BW / 1e3)
    assert figs["roof_t0_us"] == pytest.approx(T0, abs=1e-6)
    assert roof.fraction(timed(1e9, 1e9 / 4500 / 1e3), c.roof) == pytest.approx(4500 / BW)


# ---------------------------------------------------------------- a record's roof is checked


@pytest.mark.parametrize("drop, message", [
    ("roof_t0_us", "a roof needs every one of"),
    ("roof_points", "missing roof_points"),
])
def test_a_roof_missing_a_field_is_an_error_of_its_record(drop, message):
    data = ceiling(1e9, SWEEP).model_dump()
    del data["extra"][drop]
    with pytest.raises(ValidationError, match=message):
        Record.model_validate(data)


@pytest.mark.parametrize("points, message", [("1:2", "is not 'bytes:us:kernel'"), ("1:x:k;2:3:k;3:4:k", "not a number"),
                                             ("1:2:k;2:3:k", "at least 3 items")])
def test_a_roof_with_bad_points_is_an_error_of_its_record(points, message):
    with pytest.raises(ValidationError, match=message):
        ceiling(1e9, SWEEP, roof_points=points)


def test_a_roof_record_carries_no_timing_of_its_own():
    data = ceiling(1e9, SWEEP).model_dump()
    data["timing"] = timed(1e9, 300.0).model_dump()["timing"]
    with pytest.raises(ValidationError, match="carries no timing"):
        Record.model_validate(data)


def test_a_roof_its_points_do_not_give_fails_the_roof_gate():
    honest = ceiling(1e9, SWEEP)
    assert gates.roof_record(honest.roof) == []
    lying = ceiling(1e9, SWEEP, roof_gb_per_s=BW * 1.05)
    found = gates.roof_record(lying.roof)
    assert [f.fail for f in found] == [True] and "its points give BW 4600" in found[0].reason


def test_a_poor_fit_warns():
    bent = [*SWEEP[:-1], (SWEEP[-1][0], SWEEP[-1][1] * 1.2)]  # the largest size 20% slow: not a line
    found = gates.roof_record(ceiling(1e9, bent).roof)
    assert [f.fail for f in found] == [False] and "fits its sweep poorly" in found[0].reason


# ---------------------------------------------------------------- above the roof


def test_an_honest_looking_record_above_the_roof_is_flagged_and_one_within_noise_is_not():
    c = ceiling(537_001_984, SWEEP)
    above = timed(537_001_984, 537_001_984 / 4720 / 1e3)  # 4.72 TB/s: 2.6% over the roof, under the 4.8 TB/s peak
    assert gates.physical(above, H200) == []
    found = gates.roof(above, c, "read_ceiling")
    assert found is not None and not found.fail
    assert found.reason.startswith("103% of the speed of light") and "the measured roof is wrong" in found.reason
    assert gates.roof(timed(537_001_984, 537_001_984 / 4630 / 1e3), c, "read_ceiling") is None  # within 1%
    noisy = timed(537_001_984, 537_001_984 / 4720 / 1e3, spread=0.05)
    assert gates.roof(noisy, c, "read_ceiling") is None  # within its own run's noise


# ---------------------------------------------------------------- the C++ fit is the same fit


@pytest.fixture(scope="module")
def host_test(compile_host_test) -> Path:
    return compile_host_test("roof_host_test")


@pytest.mark.nvcc
def test_the_cpp_fit_agrees_with_the_python_fit(host_test):
    noisy = [(b, t * (1.004 if i % 3 else 0.997)) for i, (b, t) in enumerate(SWEEP)]
    out = subprocess.run([str(host_test), "fit", *(f"{b:.0f}:{t!r}" for b, t in noisy)], capture_output=True,
                         text=True, check=True).stdout.split()
    f = roof.fit(noisy)
    assert f is not None and out[0] == "ok" and out[-1] == "8"
    got = [float(x) for x in out[1:6]]
    assert got == pytest.approx([f.gb_per_s, f.t0_us, f.r2, f.max_residual, f.bw_rse], rel=1e-9)
    assert subprocess.run([str(host_test), "fit", "1:2", "2:1", "3:0.5"], capture_output=True, text=True,
                          check=True).stdout.startswith("no time does not grow")


@pytest.mark.nvcc
def test_the_sweep_runs_from_twice_the_l2_to_the_top_in_64_kib_steps(host_test):
    out = subprocess.run([str(host_test), "sizes", str(60 * 2**20), str(4 * 2**30)], capture_output=True, text=True,
                         check=True).stdout.split()
    sizes = [int(s) for s in out]
    assert len(sizes) == 8 and sizes[0] == 120 * 2**20 and sizes[-1] == 4 * 2**30
    assert all(s % 65536 == 0 for s in sizes) and sizes == sorted(set(sizes))


# ---------------------------------------------------------------- kwiki verify, end to end


@pytest.fixture
def site(fixture_copy, monkeypatch) -> Path:
    monkeypatch.setattr(envmod, "nvml_gpus", lambda: ([H200], "580.159.04", "13.0", None))
    return fixture_copy("verify/roof", "roof")


def verify_json(capsys, root: Path) -> dict:
    main(["verify", "--quiet", "--json", "--root", str(root)])
    return json.loads(capsys.readouterr().out)


def test_verify_flags_the_record_above_the_roof_and_fractions_come_from_the_roof(site, capsys):
    report = verify_json(capsys, site)
    claims = {c["claim"]: c for c in report["claims"]}
    assert claims["tuned-of-sol"]["verdict"] == "reproduced"
    assert claims["tuned-of-sol"]["value"] == pytest.approx(4500 / BW, rel=1e-4)
    too_fast = claims["too-fast-bandwidth"]
    assert too_fast["verdict"] == "reproduced" and [w["name"] for w in too_fast["warnings"]] == ["roof"]
    assert [(g["variant"], g["severity"]) for g in report["gates"]] == [("too_fast", "warning")]
    page = (site / "wiki" / "roof.md").read_text()
    assert "speed of light = bytes / 4.600 TB/s, the read bandwidth fitted in the same run over 8 sizes" in page
    assert "t0 = 3.000 us is reported, not added" in page
    rows = {(line.split("|")[1].strip(), line.split("|")[3].strip()): line.split("|")
            for line in page.splitlines() if line.startswith("| `")}
    assert rows[("`tuned`", "shape=large")][7].strip() == "98%"
    assert rows[("`tuned`", "shape=small")][7].strip() == "76%"  # 2 us of fixed cost at 29 MB: honest, below
    assert rows[("`read_ceiling`", "shape=large")][7].strip() == "100%"
    assert rows[("`too_fast`", "shape=large")][7].strip() == "103%"


def test_verify_refuses_a_roof_its_points_do_not_give(site, capsys):
    (site / "artifacts" / "roof_sm90a" / "lie").write_text("")
    report = verify_json(capsys, site)
    claims = {c["claim"]: c for c in report["claims"]}
    assert claims["tuned-of-sol"]["verdict"] == "failed"
    assert "gate roof: the read roof is not what its sweep measured" in claims["tuned-of-sol"]["detail"]
    failed = [g for g in report["gates"] if g["severity"] == "failed"]
    assert sorted(g["variant"] for g in failed) == ["read_ceiling", "read_ceiling"]
    measured = parse_page((site / "wiki" / "roof.md").read_bytes()).data["measurements"]["claims"]
    assert "value" not in measured["tuned-of-sol"]
