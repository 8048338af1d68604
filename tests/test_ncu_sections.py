"""bench/ncu_sections.py: kwiki's ncu command line with sections and an exported report added, kwiki's own
settings kept (the clocks as the timing runs had them, the metrics the audit reads)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

from kwiki.verify.ncu import METRICS, ncu_argv

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("ncu_sections", ROOT / "bench" / "ncu_sections.py")
assert _spec and _spec.loader
ncu_sections = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ncu_sections)


def test_the_sections_and_a_report_named_after_the_artifact_join_kwikis_command_line(tmp_path: Path) -> None:
    argv = ncu_sections.with_sections(ncu_argv, ["WarpStateStats", "SourceCounters"], tmp_path)(
        "ncu", ["python3", "harness.py"], metrics=METRICS, log_file=".kwiki/profile/stream_k_gemm_sm90a/k.csv.tmp1",
        kernel_regex="ws_", extra=["--clock-control", "base"])
    assert argv[:3] == ["ncu", "--clock-control", "none"] and argv.count("--clock-control") == 1  # ncu_argv's rule
    pairs = list(itertools.pairwise(argv))
    assert ("--section", "WarpStateStats") in pairs and ("--section", "SourceCounters") in pairs
    assert ("--export", str(tmp_path / "stream_k_gemm_sm90a-%i")) in pairs
    assert ("--metrics", ",".join(METRICS)) in pairs  # the audit's counters still asked for
    assert argv[-2:] == ["python3", "harness.py"]
