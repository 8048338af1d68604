"""`kwiki verify --ray`: the Ray path against one local cluster of logical GPUs, with host-only fixture artifacts
(tasks, placement, timeouts, a worker killed mid-run), and the local path's independence from Ray."""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.core.errors import EnvironmentProblem

ray = pytest.importorskip("ray")

from kwiki.fleet import cluster, executor  # noqa: E402 - after the skip: these need no Ray, but test it

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::ResourceWarning",
                                        "ignore::pytest.PytestUnraisableExceptionWarning")
H200 = {"gpu_model:H200": 2, "gpu_arch:sm_90": 2}


@pytest.fixture(scope="module")
def address():
    """One local cluster for the module: 2 CPUs, 2 logical H200s."""
    ray.init(num_cpus=2, num_gpus=2, resources=H200, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture
def project(fixture_copy) -> Path:
    return fixture_copy("fleet/project", "project")


def verify_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["verify", "--json", "--quiet", *argv])
    captured = capsys.readouterr()
    out = captured.out
    # the test keeps its cluster attached, so a worker killed by an earlier test may be reported on stdout late
    # (kwiki verify --ray itself sends what Ray prints to stderr until it detaches); no report at all: say why
    assert "{\n" in out, f"no JSON report (exit {code}); stderr ends: {captured.err[-3000:]}"
    return code, json.loads(out[out.index("{\n"):])


def verdicts(doc: dict) -> dict[str, str]:
    return {c["claim"]: c["verdict"] for run in doc["runs"] for c in run["claims"]}


def test_runs_land_on_the_cluster_and_are_written_as_a_local_run_writes_them(address, project, capsys, tmp_path):
    code, doc = verify_json(capsys, "--root", str(project), "--ray", address, "technique-nap")
    assert code == 0, doc
    (run,) = doc["runs"]
    assert run["gpu"] == "NVIDIA H200"
    assert run["clocks_after"] == {}  # not this machine's GPU clocks
    assert verdicts(doc) == {"nap-time": "reproduced", "nap-vs-nap2": "reproduced"}
    rows = [json.loads(line) for line in (project / "results" / "nvidia-h200.jsonl").read_text().splitlines()]
    records = [r for r in rows if r["kind"] == "record"]
    assert {r["artifact"] for r in records} == {"host_nap", "host_nap2"}
    assert rows[-1]["kind"] == "commit" and rows[-1]["rows"] == len(rows) - 1
    for r in records:  # logs come back to where a local run leaves them
        assert (project / ".kwiki" / "runs" / r["run_id"] / f"{r['artifact']}.log").is_file()
    # the same page run here (no GPU: provenance 'host') gives rows of the same shape and figures
    local = tmp_path / "local"
    import shutil

    shutil.copytree(Path(__file__).parent / "fixtures" / "fleet" / "project", local)
    assert main(["verify", "--json", "--quiet", "--root", str(local), "technique-nap"]) in (0, 1)
    capsys.readouterr()
    here = [json.loads(line) for line in (local / "results" / "host.jsonl").read_text().splitlines()]
    here_records = [r for r in here if r["kind"] == "record"]
    assert [r["figures"] for r in here_records] == [r["figures"] for r in records]
    provenance = {"gpu", "gpu_uuid", "arch", "run_id", "date", "driver", "cuda", "series"}
    assert [set(r) - provenance for r in here_records] == [set(r) - provenance for r in records]


def test_a_worker_killed_mid_run_gives_its_artifact_an_error_and_the_rest_go_on(address, project, capsys):
    t0 = time.monotonic()
    code, doc = verify_json(capsys, "--root", str(project), "--ray", address, "technique-killer", "technique-nap",
                            "--no-write")
    assert code == 1
    assert verdicts(doc)["killer-time"] == "error"
    assert verdicts(doc)["nap-time"] == "reproduced"
    (killed,) = [r for r in doc["runs"][0]["runs"] if r["artifact"] == "host_killer"]
    assert killed["status"] == "crash" and "died mid-run" in killed["message"]
    assert time.monotonic() - t0 < 120


def test_a_task_past_its_limit_is_cancelled_and_the_rest_go_on(address, project, capsys):
    t0 = time.monotonic()
    code, doc = verify_json(capsys, "--root", str(project), "--ray", address, "technique-slow", "technique-nap",
                            "--no-write", "--task-timeout", "25")
    assert code == 1
    # 25 s, not less: on a loaded two-core machine a Ray worker's start alone took over 12 s, and the nap's task
    # (a record in well under a second) was cancelled with the slow one
    assert verdicts(doc)["slow-time"] == "error" and verdicts(doc)["nap-time"] == "reproduced"
    (slow,) = [r for r in doc["runs"][0]["runs"] if r["artifact"] == "host_slow"]
    assert slow["status"] == "timeout" and "within 25 s" in slow["message"]
    assert time.monotonic() - t0 < 100  # the artifact sleeps 120 s: it was not waited for


def test_an_artifact_no_gpu_of_the_cluster_runs_is_a_located_problem(address, project, capsys):
    t0 = time.monotonic()
    code, doc = verify_json(capsys, "--root", str(project), "--ray", address, "technique-b200", "--no-write")
    assert code == 1
    problems = [f"{p['path']}:{p['line']}: {p['field']}: {p['message']}" for p in doc["runs"][0]["problems"]]
    assert any(p.startswith("artifacts/gpu_b200/artifact.yaml:1: targets: no GPU of the cluster") and "H200 (sm_90) x2"
               in p for p in problems), problems
    assert verdicts(doc)["b200-time"] == "not-run"
    assert time.monotonic() - t0 < 60


def test_an_artifact_whose_claims_name_another_model_is_not_run_there(address, project, capsys):
    _, doc = verify_json(capsys, "--root", str(project), "--ray", address, "technique-b200only", "technique-nap",
                            "--no-write")
    (run,) = doc["runs"]
    assert {r["artifact"] for r in run["runs"]} == {"host_nap", "host_nap2"}
    (claim,) = [c for c in run["claims"] if c["claim"] == "b200only-time"]
    assert claim["verdict"] == "not-run" and "its claims name only B200; this run is on NVIDIA H200" in claim["detail"]


def test_one_timing_run_per_gpu_at_a_time(address, project, capsys):
    """Three tasks of 2 s each on two logical GPUs: never two on one GPU at once, both GPUs used."""
    import tempfile

    from kwiki.fleet import tasks

    _, digest = tasks.pack_tree(project)
    log = Path(tempfile.gettempdir()) / tasks.TREES / digest / "artifacts" / "gpu-log.txt"
    log.unlink(missing_ok=True)
    code, doc = verify_json(capsys, "--root", str(project), "--ray", address, "technique-gpus", "--no-write")
    assert code == 0, doc
    spans: dict[str, list[tuple[float, float]]] = {}
    for line in log.read_text().splitlines():
        gpu, start, end = line.split()
        spans.setdefault(gpu, []).append((float(start), float(end)))
    assert sum(len(s) for s in spans.values()) == 3 and set(spans) <= {"0", "1"}
    for gpu, s in spans.items():
        s.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(s)), (gpu, s)


def test_claims_compared_across_artifacts_run_in_one_task(project):
    from kwiki.verify.env import capture
    from kwiki.verify.plan import plan
    from kwiki.wiki.catalog import load_wiki

    wiki = load_wiki(project)
    pages = [p for p in wiki.pages if p.id in ("technique-nap", "technique-slow")]
    the_plan = plan(wiki, pages, capture(project, want_gpu=False), compile_only=False)
    runnable = sorted(the_plan.artifacts.values(), key=lambda a: a.path)
    assert [[a.name for a in g] for g in executor.groups(the_plan, runnable)] == [["host_nap", "host_nap2"],
                                                                                  ["host_slow"]]


def test_an_address_that_does_not_answer_is_a_clear_error_in_bounded_time(project, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    code = main(["verify", "--root", str(project), "--ray", f"127.0.0.1:{port}", "technique-nap"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--ray 127.0.0.1:{port}: no Ray cluster answers at 127.0.0.1:{port}" in err
    assert "Traceback" not in err
    assert time.monotonic() - t0 < 20


def test_nodes_must_advertise_their_gpus_as_kwiki_reads_them():
    node = {"Alive": True, "NodeManagerAddress": "10.0.0.7",
            "Resources": {"GPU": 8, "gpu_model:H200": 8, "gpu_arch:sm_90": 8}}
    b200 = {"Alive": True, "Resources": {"GPU": 4, "gpu_model:B200": 4, "gpu_arch:sm_100": 4}}
    dead = {"Alive": False, "Resources": {"GPU": 8, "gpu_model:H200": 8, "gpu_arch:sm_90": 8}}
    assert cluster.kinds([node, b200, dead, {"Resources": {"CPU": 16}}]) == [
        cluster.GpuKind("B200", "sm_100", 4), cluster.GpuKind("H200", "sm_90", 8)]
    wrong = {"Alive": True, "NodeManagerAddress": "10.0.0.8",
             "Resources": {"GPU": 8, "gpu_model:H200": 8, "gpu_arch:sm_90": 4}}
    with pytest.raises(EnvironmentProblem, match=r"node 10\.0\.0\.8: resources: .* must agree"):
        cluster.kinds([wrong])
    assert cluster.kinds([{"Resources": {"GPU": 2}}]) == []  # GPUs without a model: cluster_kinds says how


def test_a_cluster_that_advertises_no_gpu_model_is_told_how(monkeypatch):
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": {"CPU": 8, "GPU": 2}}])
    with pytest.raises(EnvironmentProblem, match=r"advertises no GPU model .*--resources='\{\"gpu_model:H200\""):
        cluster.cluster_kinds("head:6379")


def test_a_node_advertises_its_gpus_by_model_and_architecture():
    from kwiki.fleet.resources import model_name, node_resources
    from kwiki.results.gpu import Gpu

    gpus = [Gpu(i, "NVIDIA H100 80GB HBM3", f"GPU-{i}", 90) for i in range(2)]
    assert model_name("NVIDIA H200") == "H200"
    assert node_resources(gpus) == {"gpu_model:H100-80GB-HBM3": 2, "gpu_arch:sm_90": 2}
    assert cluster.kinds([{"Resources": {"GPU": 2, **node_resources(gpus)}}]) == [
        cluster.GpuKind("H100-80GB-HBM3", "sm_90", 2)]


@pytest.mark.parametrize(("address", "expected"), [
    ("10.0.0.1:6380", ("10.0.0.1", 6380)), ("head", ("head", 6379)), ("ray://head", ("head", 10001)),
    ("[::1]:6379", ("::1", 6379))])
def test_addresses(address, expected):
    assert cluster.split_address(address) == expected
    with pytest.raises(EnvironmentProblem, match="not an address"):
        cluster.split_address("a b:c")


def test_the_local_path_never_imports_ray(project):
    code = (f"import sys; from kwiki.cli import main; rc = main(['verify', '--compile-only', '--quiet', "
            f"'--root', {str(project)!r}]); assert 'ray' not in sys.modules, 'ray imported'; print(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0"


def test_without_ray_the_fleet_says_which_extra_to_install(project):
    code = (f"import sys; sys.modules['ray'] = None; from kwiki.cli import main; "
            f"sys.exit(main(['verify', '--root', {str(project)!r}, '--ray', '127.0.0.1:1', 'technique-nap']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "kwiki verify: --ray needs Ray: pip install 'kwiki[fleet]'"
