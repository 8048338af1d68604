"""The gates: records beyond the physical peaks of the GPU are refused, records above a measured roof warn.

The exploit suite on the CPU: `tests/fixtures/verify/exploits/` holds an artifact whose records are
those cheating GPU artifacts print (work only on the checked launch: 175 TB/s; work hidden on a
stream of its own: 585 TB/s; ten times the bytes declared: 36 TB/s; a GEMM that skips most of its
work: 1500 TFLOP/s) next to honest ones, run by `kwiki verify` against a fake H200.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.results import peaks
from kwiki.results.gpu import Gpu
from kwiki.results.record import Record
from kwiki.verify import env as envmod
from kwiki.verify import gates
from kwiki.wiki.frontmatter import parse_page

H200 = Gpu(index=0, name="NVIDIA H200", uuid=None, cc=90, sm_count=132, memory_gib=139.8, sm_mhz=1980,
           sm_mhz_max=1980)
GB = 1e9
GEMM_FLOPS = 2 * 8192**3


def record(variant: str = "v", *, tb_per_s: float | None = None, tflop_per_s: float | None = None,
           level: str = "dram", params: dict | None = None, flops_dtype: str | None = None,
           spread: float = 0.002) -> Record:
    """A timed record that moves 1 GB at `tb_per_s`, or does a 8192^3 GEMM at `tflop_per_s`."""
    t = GB / (tb_per_s * 1e6) if tb_per_s else GEMM_FLOPS / (tflop_per_s * 1e6)  # type: ignore[operator]
    data = {"kwiki_record": 1, "variant": variant, "params": params or {}, "bytes_level": level,
            "timing": {"median_us": t, "q1_us": t * (1 - spread), "q3_us": t * (1 + spread), "min_us": t * 0.9,
                       "samples": 20},
            "check": {"passed": True}}
    if tb_per_s:
        data["bytes"] = GB
    if tflop_per_s:
        data["flops"] = GEMM_FLOPS
        data["flops_dtype"] = flops_dtype
    return Record.model_validate(data)


# ---------------------------------------------------------------- the peaks


def test_peaks_are_the_datasheet_and_the_per_sm_rates():
    assert peaks.dram_peak(H200).value == 4.8
    h100 = [Gpu(0, name, None, 90) for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL")]
    assert [peaks.dram_peak(g).value for g in h100] == [3.35, 2.0, 3.9]
    assert peaks.dram_peak(Gpu(0, "NVIDIA GH200 480GB", None, 90)).value == 4.9  # not taken for an H200
    assert peaks.dram_peak(Gpu(0, "NVIDIA A100-SXM4-80GB", None, 80)).value == 2.039
    assert peaks.dram_peak(Gpu(0, "NVIDIA B200", None, 100)).value == 8.0
    assert peaks.flops_peak(H200, "bf16")[0].value == pytest.approx(1070.5, abs=0.1)  # 132 x 1980 MHz x 4096
    assert peaks.flops_peak(H200, "tf32")[0].value == pytest.approx(535.3, abs=0.1)
    assert peaks.flops_peak(H200, "float8_e4m3fn")[0].value == pytest.approx(2141.1, abs=0.1)
    assert peaks.bytes_peak(H200, "smem").value == pytest.approx(33.45, abs=0.01)  # 128 B/clk/SM


def test_no_dtype_takes_the_architectures_highest_rate_and_says_so():
    peak, note = peaks.flops_peak(H200, None)
    assert peak.value == pytest.approx(2141.1, abs=0.1) and "highest rate of sm_90" in note
    assert "no rate" in peaks.flops_peak(H200, "nvfp4")[1]  # fp4 has no sm_90 rate: the highest one


def test_an_unknown_gpu_is_not_gated_and_the_run_says_so():
    other = Gpu(0, "NVIDIA Made-Up 9000", None, 75, sm_count=40, sm_mhz_max=1500)
    assert gates.physical(record(tb_per_s=175.0), other) == []
    assert "no DRAM peak known for NVIDIA Made-Up 9000" in " ".join(gates._ungated(record(tb_per_s=175.0), other))


# ---------------------------------------------------------------- the physical gate


@pytest.mark.parametrize("tb_per_s, fails", [(175.0, True), (585.0, True), (36.0, True), (4.95, True),
                                             (4.94, False), (4.6, False)])
def test_physical_gate_holds_dram_bytes_to_the_peak_plus_3_percent(tb_per_s, fails):
    found = gates.physical(record(tb_per_s=tb_per_s), H200)
    assert bool(found) is fails
    if tb_per_s == 175.0:
        assert found[0].gate == "physical" and found[0].fail
        assert found[0].reason.startswith("175 TB/s of DRAM bytes > 4.8 TB/s x 1.03 physical peak of NVIDIA H200")


def test_physical_gate_applies_per_level():
    l2 = record(tb_per_s=10.0, level="l2")  # an L2-resident read: impossible as DRAM bytes, fine as L2 bytes
    assert gates.physical(l2, H200) == []
    assert gates.physical(record(tb_per_s=10.0), H200)
    assert "of L2 bytes > 33.45 TB/s" in gates.physical(record(tb_per_s=40.0, level="l2"), H200)[0].reason


def test_physical_gate_holds_flops_to_the_dtype_peak():
    bf16 = {"dtype": "bf16"}
    assert gates.physical(record(tflop_per_s=930.0, params=bf16), H200) == []  # honest wgmma microbenchmarks
    found = gates.physical(record(tflop_per_s=1500.0, params=bf16), H200)
    assert found and "1500 TFLOP/s > 1071 TFLOP/s x 1.03 physical peak of NVIDIA H200" in found[0].reason
    assert gates.physical(record(tflop_per_s=1500.0, params={"dtype": "fp8_e4m3"}), H200) == []
    # the record's own flops_dtype wins over params.dtype
    assert gates.physical(record(tflop_per_s=600.0, params=bf16, flops_dtype="tf32"), H200)


def test_a_rate_given_as_an_extra_figure_is_gated_too():
    cheat = Record.model_validate({"kwiki_record": 1, "variant": "v", "check": {"passed": True},
                                   "extra": {"tb_per_s": 175.0}})
    assert gates.physical(cheat, H200)


# ---------------------------------------------------------------- the roof warning


def test_above_the_measured_roof_under_the_peak_warns_only():
    roof = record("ceiling", tb_per_s=4.1)
    found = gates.roof(record(tb_per_s=4.6), roof, "ceiling")
    assert found is not None and not found.fail and "the measured roof is wrong" in found.reason
    assert gates.roof(record(tb_per_s=4.12), roof, "ceiling") is None  # within the noise


# ---------------------------------------------------------------- the exploit suite, end to end


@pytest.fixture
def exploits(fixture_copy, monkeypatch) -> Path:
    monkeypatch.setattr(envmod, "nvml_gpus", lambda: ([H200], "580.159.04", "13.0", None))
    return fixture_copy("verify/exploits", "exploits")


def verify_json(capsys, root: Path, *argv: str) -> tuple[int, dict]:
    code = main(["verify", "--quiet", "--json", "--root", str(root), *argv])
    return code, json.loads(capsys.readouterr().out)


CHEATS = ("first-launch-bandwidth", "hidden-stream-bandwidth", "ten-x-bandwidth", "cheat-vs-honest",
          "gemm-skip-throughput")
HONEST = ("honest-bandwidth", "above-roof-bandwidth", "l2-bandwidth", "gemm-honest-throughput")


def test_cheats_are_failed_naming_the_gate_and_honest_records_are_unaffected(exploits, capsys):
    code, report = verify_json(capsys, exploits)
    assert code == 1 and report["ok"] is False
    claims = {c["claim"]: c for c in report["claims"]}
    for cid in CHEATS:
        c = claims[cid]
        assert c["verdict"] == "failed", cid
        assert [g["name"] for g in c["gates"]] == ["physical"], cid
        assert c["detail"].startswith("gate physical: "), cid
    assert claims["first-launch-bandwidth"]["value"] == pytest.approx(175.0)  # reported, loudly
    for cid in HONEST:
        assert claims[cid]["verdict"] == "reproduced" and claims[cid]["gates"] == [], cid
    failed = sorted(g["variant"] for g in report["gates"] if g["severity"] == "failed")
    assert failed == ["first_launch_only", "gemm_skips_work", "helper_process", "hidden_stream", "ten_x_bytes",
                      "throttled_stream"]
    helper = claims["helper-process-bandwidth"]  # under the roof and the peak: only the bracket gives it away
    assert helper["verdict"] == "failed" and [g["name"] for g in helper["gates"]] == ["unseen"]
    throttled = claims["throttled-bandwidth"]  # under the peak, honest work, but timed on a throttled card
    assert throttled["verdict"] == "failed" and [g["name"] for g in throttled["gates"]] == ["clocks"]


def test_fresh_inputs_declared_but_not_had_fail_the_fresh_gate(exploits, capsys):
    manifest = exploits / "artifacts" / "cheats_sm90a" / "artifact.yaml"
    manifest.write_text(manifest.read_text() + "fresh_inputs: true\n")
    _, report = verify_json(capsys, exploits)
    honest = {c["claim"]: c for c in report["claims"]}["honest-bandwidth"]
    assert honest["verdict"] == "failed" and [g["name"] for g in honest["gates"]] == ["fresh"]


def test_a_record_above_the_measured_roof_warns_and_still_passes(exploits, capsys):
    _, report = verify_json(capsys, exploits)
    above = {c["claim"]: c for c in report["claims"]}["above-roof-bandwidth"]
    assert above["verdict"] == "reproduced"
    assert [w["name"] for w in above["warnings"]] == ["roof"]
    warned = [g for g in report["gates"] if g["severity"] == "warning"]
    assert [(g["variant"], g["gate"]) for g in warned] == [("above_roof", "roof")]
    assert "the measured roof is wrong" in warned[0]["reason"]


def test_refused_figures_are_not_written_and_the_gate_is_listed(exploits, capsys):
    verify_json(capsys, exploits)
    page = (exploits / "wiki" / "cheats.md").read_text()
    measured = parse_page(page.encode()).data["measurements"]["claims"]
    for cid in CHEATS:
        assert "value" not in measured[cid], cid  # null: no figure a gate refused reaches the page
        assert measured[cid]["gates"][0]["name"] == "physical", cid
    assert measured["honest-bandwidth"]["value"] == pytest.approx(4.0)
    assert "175.0 TB/s" not in page and "4268%" not in page  # nor the ladder
    assert "refused: gate physical" in page
    rows = [json.loads(line) for line in (exploits / "results" / "nvidia-h200.jsonl").read_text().splitlines()]
    claim_rows = {r["claim"]: r for r in rows if r["kind"] == "claim"}
    assert "value" not in claim_rows["first-launch-bandwidth"] and claim_rows["first-launch-bandwidth"]["gates"]
    refused = [r for r in rows if r["kind"] == "record" and r.get("gates")]
    assert sorted(r["variant"] for r in refused) == ["first_launch_only", "gemm_skips_work", "helper_process",
                                                      "hidden_stream", "ten_x_bytes", "throttled_stream"]


def test_the_terminal_report_has_a_gates_section(exploits, capsys):
    assert main(["verify", "--quiet", "--no-write", "--root", str(exploits)]) == 1
    out = capsys.readouterr().out
    section = out[out.index("GATES"):]
    assert "6 records FAILED a gate" in section
    assert "FAILED unseen: cheats_sm90a helper_process" in section
    assert "FAILED clocks: cheats_sm90a throttled_stream" in section
    assert ("FAILED physical: cheats_sm90a first_launch_only [n=1000000000]: 175 TB/s of DRAM bytes > "
            "4.8 TB/s x 1.03 physical peak of NVIDIA H200") in section
    assert "warning roof: cheats_sm90a above_roof" in section


def _clocked(**clocks: float) -> Record:
    return Record.model_validate({
        "kwiki_record": 1, "variant": "k", "params": {"n": 1}, "bytes": 1e9,
        "timing": {"median_us": 1000.0, "q1_us": 999.0, "q3_us": 1001.0, "min_us": 998.0, "samples": 20},
        "check": {"passed": True}, "clocks": clocks})


def test_the_clocks_gate_fails_a_throttled_record_and_only_reports_the_power_cap():
    from kwiki.verify import gates

    throttled = gates.clocks(_clocked(window_s=1.0, thermal_s=0.04, hw_slowdown_s=0.03))
    assert throttled is not None and throttled.fail and throttled.gate == "clocks" and "7%" in throttled.reason
    assert gates.clocks(_clocked(window_s=1.0, thermal_s=0.02)) is None  # a moment's slowdown is noise
    assert gates.clocks(_clocked(window_s=1.0, power_cap_s=1.0)) is None  # GEMMs run at the power limit
    assert gates.clocks(_clocked(sm_mhz_before=1980.0)) is None  # protocol 1: no window, nothing to judge


def test_the_ladder_shows_the_clock_range_and_the_power_cap_share():
    from kwiki.verify.tables import _sm_mhz

    r = _clocked(sm_mhz_min=1740.0, sm_mhz_median=1750.0, sm_mhz_max=1755.0, window_s=2.0, power_cap_s=0.5)
    assert _sm_mhz(r) == "1740–1755, 25% power-capped"
