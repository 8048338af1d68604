"""launch_chain_sm90a: what a kernel launch costs, and what CUDA Graphs and PDL buy back (page technique-launch-cost).

Without a GPU: the manifest loads with its ladder, is timed by CUDA events (CUPTI's busy time would hide the launch
gaps), and its shapes hold a decode-sized step, a long one, a one-block one and one off every tile; the page's claims
name its variants at its shapes. Compiled with nvcc, the binary lists the manifest's variants and shapes, refuses a
size it cannot parse before any CUDA call, and the PDL kernel's SASS holds griddepcontrol's instructions where the
plain kernel has none, each expectation failing on the other kernel, with its loads on the right side of the wait.
The chains themselves run only on an H200 (kwiki verify)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cuda_artifact import build, lists_its_manifest, run_without_gpu, sass_kernels

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "launch_chain_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "techniques" / "launch-cost.md"
THREADS, VEC = 256, 4  # the step kernel's block and its fp32 elements per 16-byte vector


def manifest() -> Manifest:
    return load_manifest(ARTIFACT, REPO)


def sizes(m: Manifest) -> list[int]:
    return [int(v) for v in m.shapes[0].values]


def test_the_ladder_climbs_from_stream_launches_to_pdl_in_a_graph_beside_one_step_alone():
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants] == [
        ("stream", 1), ("graph", 2), ("pdl", 3), ("pdl_graph", 4), ("single", None)]
    assert m.baseline == "stream" and m.ceiling is None


def test_the_chain_is_timed_by_events_so_the_gaps_between_launches_count():
    m = manifest()
    assert "--timing=events" in m.run.args
    assert not any(a.startswith("--timing=") and a != "--timing=events" for a in m.run.args + m.sanitize.args)


def test_the_shapes_hold_a_decode_step_a_long_step_one_block_and_a_size_off_every_tile():
    m = manifest()
    assert m.shapes[0].option == "elems" and m.shapes[0].dims == ["n"]
    n = sizes(m)
    assert 2**21 in n and 2**24 in n                      # the ~4 us step and the ~50 us one
    assert any(k <= THREADS * VEC for k in n)              # one block: the chain is all launch cost
    assert any(k % VEC and k % (THREADS * VEC) for k in n)  # trailing elements and a partial block
    small = [a.removeprefix("--elems=") for a in m.sanitize.args if a.startswith("--elems=")]
    assert small and all(int(k) <= 100003 for k in small[0].split(","))


def test_the_page_names_the_artifact_and_its_claims_select_its_variants_at_its_shapes():
    page = load_page(PAGE, REPO)
    assert page.meta.id == "technique-launch-cost"
    assert page.meta.artifacts["chain"] == "artifacts/launch_chain_sm90a"
    names = {v.name for v in manifest().variants}
    values = set(sizes(manifest()))
    mine = [c for c in page.meta.claims if c.measure is not None]
    assert len(mine) >= 6
    picked = set()
    for c in mine:
        for sel in (c.measure.of, c.measure.per):
            if sel is None:
                continue
            assert sel.variant in names and sel.params["n"] in values, c.id
            picked.add((sel.variant, sel.params["n"]))
    # the two tools and their sum are each compared at the decode-sized step
    assert {("stream", 2**21), ("graph", 2**21), ("pdl", 2**21), ("pdl_graph", 2**21)} <= picked
    assert page.meta.headline in {c.id for c in mine}


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The artifact's source built with the manifest's flags for sm_90a."""
    return build(tmp_path_factory, ARTIFACT, "launch_chain.cu")


run = run_without_gpu


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(binary):
    lists_its_manifest(binary, manifest())


@pytest.mark.nvcc
@pytest.mark.parametrize("elems", ["0", "1024x2", "-5", ""])
def test_a_size_it_cannot_parse_is_refused_before_any_cuda_call(binary, elems):
    res = run(binary, f"--elems={elems}", "--timing=events")
    assert res.returncode == 2 and res.stdout == ""
    assert "usage error: --elems" in res.stderr



@pytest.mark.nvcc
@pytest.mark.parametrize("variant, other, words", [
    ("pdl", "stream", "require 'ACQBULK'"),        # griddepcontrol.wait: the PDL kernel waits on the step before
    ("pdl", "stream", "require 'PREEXIT'"),        # griddepcontrol.launch_dependents: it lets the next step launch
    ("pdl_graph", "graph", "require 'ACQBULK'"),
    ("stream", "pdl", "forbid 'ACQBULK'"),         # and the plain kernel has neither
    ("graph", "pdl_graph", "forbid 'PREEXIT'"),
])
def test_each_sass_expectation_holds_on_its_variant_and_fails_on_the_other_kernel(binary, variant, other, words):
    from kwiki.verify.sass import check_variant

    kernels = sass_kernels(binary)
    by_name = {v.name: v for v in manifest().variants}
    assert check_variant(by_name[variant], "sm_90a", kernels, {})[1] == []
    on_other = by_name[variant].model_copy(update={"kernels": by_name[other].kernels})
    mismatches = check_variant(on_other, "sm_90a", kernels, {})[1]
    assert any(words in m for m in mismatches), mismatches


def pdl_kernel_opcodes(binary: Path) -> list[str]:
    """The PDL step kernel's instructions in program order (opcode and modifiers, predicate dropped)."""
    from kwiki.verify.sass import find_tools

    tools = find_tools()
    if tools is None:
        pytest.skip("no cuobjdump")
    text = subprocess.run([tools.cuobjdump, "-sass", str(binary)], capture_output=True, text=True, check=True).stdout
    body = next(part for part in text.split("Function : ")[1:] if part.split()[0].find("step_kernelILb1E") >= 0)
    ops = []
    for line in body.splitlines()[1:]:
        code = line.split("*/", 1)[-1].strip() if line.lstrip().startswith("/*") else ""
        words = [w for w in code.rstrip(" ;").split() if not w.startswith("@")]
        if words and not words[0].startswith("/*"):
            ops.append(words[0])
    return ops


@pytest.mark.nvcc
def test_the_pdl_kernel_loads_its_weights_before_the_wait_and_touches_the_chain_only_after_it(binary):
    ops = pdl_kernel_opcodes(binary)
    wait, trigger = ops.index("ACQBULK"), ops.index("PREEXIT")
    assert ops.count("ACQBULK") == 1 and ops.count("PREEXIT") == 1
    # the weights (no earlier step writes them) are in flight before the wait, and nothing is stored before it
    assert any(op.startswith("LDG.E.128") for op in ops[:wait])
    assert not any(op.startswith("STG") for op in ops[:wait])
    # the input the step before wrote is read after the wait, and before the next step is let in
    assert wait < trigger and any(op.startswith("LDG.E.128") for op in ops[wait:trigger])
    # no read-only (.nc) load: ptxas moves those across the wait, a read of the step before's output too early
    assert not any(op.startswith("LDG") and "CONSTANT" in op.split(".") for op in ops)
