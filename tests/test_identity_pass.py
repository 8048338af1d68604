"""The identity pass of an events-timed run (kwiki.verify.run): an artifact whose run.args time by CUDA events (a
launch-cost chain, where the gaps CUPTI's busy time leaves out are the measurement) is run once more under CUPTI, few
samples, for the kernels each variant ran; the identity gate judges the timed records by it (tests/test_identity.py)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from kwiki.verify.run import IDENTITY_ARGS, events_timed, run_artifact
from kwiki.verify.types import BuildResult, PlannedArtifact
from kwiki.wiki.manifest import Manifest

FAKE = '''#!{python}
import json, sys
opts = [a.split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a]
timing = [v for k, v in opts if k == "--timing"][-1] if any(k == "--timing" for k, _ in opts) else "cupti"
names = sys.argv[sys.argv.index("--variants") + 1].split(",")
with open(sys.argv[0] + ".calls", "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
for name in names:
    rec = {{"kwiki_record": 1, "variant": name, "params": {{"steps": 20}}, "check": {{"passed": {passed}}},
           "timing_source": timing}}
    if timing == "cupti":
        rec["kernels"] = ["void step<4>(float const*, float*, int)"]
    print(json.dumps(rec))
sys.exit({exit})
'''


def _planned(tmp_path: Path, args: list[str], passed: str = "True", exit: int = 0) -> tuple[PlannedArtifact,
                                                                                             BuildResult]:
    binary = tmp_path / "fake"
    binary.write_text(FAKE.format(python=sys.executable, passed=passed, exit=exit))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    m = Manifest.model_validate({"name": "chain", "title": "chain", "targets": ["sm_90a"],
                                 "build": {"sources": ["c.cu"]}, "run": {"args": args},
                                 "variants": [{"name": "stream"}, {"name": "graph"}]})
    planned = PlannedArtifact("artifacts/chain", tmp_path, m, run_target="sm_90a", run_variants=["stream", "graph"])
    return planned, BuildResult("chain", "sm_90a", ok=True, cached=False, key="k", binary=str(binary))


def _calls(tmp_path: Path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "fake.calls").read_text().splitlines()]


@pytest.mark.parametrize(("args", "expect"), [
    ([], False), (["--timing=events"], True), (["--timing", "events"], True), (["--timing=cupti"], False),
    (["--timing=events", "--max-seconds=1", "--timing=cupti"], False),  # the last one wins, as in kwiki_args.cuh
])
def test_events_timing_is_read_from_run_args_as_the_binary_reads_it(args: list[str], expect: bool) -> None:
    assert events_timed(args) is expect


def test_an_events_timed_group_gets_an_identity_pass_under_cupti(tmp_path: Path) -> None:
    planned, build = _planned(tmp_path, ["--timing=events"])
    (outcome,) = run_artifact(planned, build, gpu_index=None, root=tmp_path, run_id="r1")
    assert outcome.ok and all(r.timing_source == "events" and r.kernels is None for r in outcome.records)
    timed, again = _calls(tmp_path)
    assert again == [*timed, *IDENTITY_ARGS]  # the same variants and shapes, CUPTI on last
    assert outcome.identity is not None and outcome.identity.status == "ok"
    assert [r.variant for r in outcome.identity.records] == ["stream", "graph"]
    assert all(r.kernels for r in outcome.identity.records)
    assert outcome.identity.log and outcome.identity.log.endswith("chain-identity.log")


def test_a_cupti_timed_group_has_no_identity_pass(tmp_path: Path) -> None:
    planned, build = _planned(tmp_path, [])
    (outcome,) = run_artifact(planned, build, gpu_index=None, root=tmp_path, run_id="r1")
    assert outcome.ok and outcome.identity is None and len(_calls(tmp_path)) == 1


def test_a_group_that_failed_its_check_gets_no_identity_pass(tmp_path: Path) -> None:
    planned, build = _planned(tmp_path, ["--timing=events"], passed="False", exit=1)
    (outcome,) = run_artifact(planned, build, gpu_index=None, root=tmp_path, run_id="r1")
    assert outcome.status == "check-failed" and outcome.identity is None and len(_calls(tmp_path)) == 1
