"""The mechanism checks (issue 12): SASS patterns matched by opcode and modifier set, the disassembly cache,
the disassembler's discovery, the `mechanism` gate, and the located failure of a kernel whose 16-byte loads
became 4-byte loads."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from kwiki.cli import main
from kwiki.core.errors import ManifestError
from kwiki.results.record import Check, Record
from kwiki.verify import sass
from kwiki.verify.types import Gating
from kwiki.wiki.instructions import parse_pattern
from kwiki.wiki.manifest import Variant, load_manifest

FIXTURES = Path(__file__).parent / "fixtures" / "sass"
LISTING = (FIXTURES / "read_kernels.sass").read_text()  # real cuobjdump -sass -res-usage output, trimmed
V16 = "*read_kernel<16, 4, *Cache)0>(*"  # the plain 16-byte read, 4 loads in flight
V16_MANGLED = "_ZN44_GLOBAL__N__818233ca_15_vector_loads_cu_main11read_kernelILi16ELi4ELNS_5CacheE0EEEvPKvmPj"


def kernels() -> dict[str, sass.Kernel]:
    found = sass.parse_listing(LISTING)
    for mangled, name in sass.demangle(sorted(found)).items():
        found[mangled].name = name
    return found


def variant(globs: list[str], require: list[str] = (), forbid: list[str] = ()) -> Variant:  # type: ignore[assignment]
    return Variant.model_validate({"name": "v", "kernels": globs,
                                   "sass": {"require": list(require), "forbid": list(forbid)}})


# ---------------------------------------------------------------- the pattern language


@pytest.mark.parametrize(("pattern", "spelling", "matches"), [
    ("LDG.128", "LDG.E.NA.128.CONSTANT", True),  # modifiers are a set: others may be present, in any order
    ("LDG.E.128", "LDG.E.LTC256B.128", True),
    ("LDG.E.128", "LDG.E.64", False),
    ("LDG.E.128", "LDG.E", False),
    ("LDG", "LDGSTS.E.128", False),  # the opcode is compared whole: no substring match
    ("LDG.12", "LDG.E.128", False),  # a modifier is compared whole too
    ("HGMMA.64x*x16.F32.BF16", "HGMMA.64x256x16.F32.BF16", True),
    ("HGMMA.F32.BF16", "HGMMA.64x256x8.F32.TF32", False),
    ("UTMALDG.MULTICAST", "UTMALDG.2D.MULTICAST", True),
    ("USETMAXREG.TRY_ALLOC.CTAPOOL", "USETMAXREG.DEALLOC.CTAPOOL", False),
    ("STG.E.EF.128", "STG.E.128", False),
])
def test_a_pattern_matches_by_opcode_and_modifier_set_not_substring(pattern, spelling, matches):
    assert parse_pattern(pattern).matches(spelling) is matches


def test_counts_are_static_per_kernel_and_exact_counts_are_exact():
    ops = {"LDG.E.128": 5, "LDG.E.NA.128": 3, "LDG.E": 2}
    assert parse_pattern("LDG.128").count_in(ops) == 8
    assert parse_pattern("LDG.128 >= 8").holds(8) and not parse_pattern("LDG.128 >= 9").holds(8)
    assert parse_pattern("LDG.E.NA.128 == 3").holds(3) and not parse_pattern("LDG.E.NA.128 == 3").holds(4)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("require", "ld.global.v4", "not a SASS pattern"),  # PTX is not SASS
    ("require", "LDG.128 >= 0", "'>= 0' always holds"),
    ("forbid", "LDG.128 >= 2", "takes no count"),
    ("require", "LDG..128", "not a SASS pattern"),
])
def test_a_bad_pattern_is_a_located_manifest_error(tmp_path: Path, field, value, message):
    d = tmp_path / "a_sm90a"
    d.mkdir()
    (d / "a.cu").write_text("")
    (d / "artifact.yaml").write_text(
        "name: a_sm90a\ntitle: t\ntargets: [sm_90a]\nbuild: {sources: [a.cu]}\nvariants:\n"
        f"  - name: v\n    kernels: ['k*']\n    sass:\n      {field}: ['{value}']\n")
    with pytest.raises(ManifestError) as err:
        load_manifest(d, tmp_path)
    assert err.value.line == 9 and err.value.field == f"variants.0.sass.{field}.0"
    assert message in err.value.message


def test_sass_without_kernels_is_refused():
    with pytest.raises(ValueError, match="no 'kernels'"):
        Variant.model_validate({"name": "v", "sass": {"require": ["LDG.E.128"]}})


# ---------------------------------------------------------------- reading cuobjdump's listing


def test_the_listing_gives_each_kernel_its_arch_instructions_and_resources():
    k = kernels()[V16_MANGLED]
    assert k.arch == "sm_90a"
    assert k.name.startswith("void (anonymous namespace)::read_kernel<16, 4,")  # demangled
    assert k.opcodes["LDG.E.128"] == 5 and "BRA" in k.opcodes  # predicated '@P0 BRA' counts as BRA
    assert (k.registers, k.smem_bytes, k.local_bytes, k.stack_bytes) == (32, 1152, 0, 0)


def test_libstdcxx_demangles_when_cxxfilt_is_absent(monkeypatch):
    monkeypatch.setattr(sass.shutil, "which", lambda name, path=None: None)
    assert sass.demangle([V16_MANGLED])[V16_MANGLED].startswith("void (anonymous namespace)::read_kernel<16, 4,")


def test_globs_match_the_mangled_name_too():
    found = sass.kernels_of(variant([V16_MANGLED], ["LDG.E.128"]), kernels().values())
    assert [k.mangled for k in found] == [V16_MANGLED]


# ---------------------------------------------------------------- checking a variant


def test_the_expectations_of_a_16_byte_read_hold_on_its_kernel():
    evidence, bad = sass.check_variant(variant([V16], ["LDG.E.128 >= 4"], ["LDG.64", "LDG.CONSTANT"]),
                                       "sm_90a", kernels(), {})
    assert bad == []
    assert [(e.registers, e.matched) for e in evidence] == [(32, {"LDG.E.128 >= 4": 5, "LDG.64": 0,
                                                                  "LDG.CONSTANT": 0})]


def test_a_4_byte_kernel_fails_a_16_byte_expectation_naming_what_it_has():
    _, bad = sass.check_variant(variant(["*read_kernel<4, 1, *"], ["LDG.E.128"]), "sm_90a", kernels(), {})
    assert len(bad) == 1
    assert "read_kernel<4, 1," in bad[0] and "require 'LDG.E.128': expected at least 1, found 0" in bad[0]
    assert "(its LDG: LDG.E x2)" in bad[0]


def test_a_forbidden_instruction_fails_with_its_spelling():
    _, bad = sass.check_variant(variant(["*read_kernel<16, 4, *Cache)1>(*"], ["LDG.128"], ["LDG.CONSTANT"]),
                                "sm_90a", kernels(), {})
    assert bad and "forbid 'LDG.CONSTANT': found 5 (LDG.E.128.CONSTANT)" in bad[0]


def test_a_glob_that_names_no_kernel_fails():
    _, bad = sass.check_variant(variant(["*read_kernel<32, *"], ["LDG.256"]), "sm_90a", kernels(), {})
    assert bad and "matches no kernel with SASS in the binary" in bad[0]


def test_sass_for_another_architecture_fails():
    _, bad = sass.check_variant(variant([V16], ["LDG.E.128"]), "sm_100a", kernels(), {})
    assert any("SASS for sm_90a, not sm_100a" in b for b in bad)


# ---------------------------------------------------------------- the disassembler and its cache


def fake_cuobjdump(tmp_path: Path) -> tuple[sass.Tools, Path]:
    """A cuobjdump that prints the fixture listing and counts its calls."""
    calls = tmp_path / "calls"
    exe = tmp_path / "bin" / "cuobjdump"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\necho x >> {calls}\ncat {FIXTURES / 'read_kernels.sass'}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return sass.Tools(str(exe), None, "fake"), calls


def test_disassembly_is_cached_beside_the_binary_by_its_hash(tmp_path: Path):
    tools, calls = fake_cuobjdump(tmp_path)
    binary = tmp_path / "build" / "a"
    binary.parent.mkdir()
    binary.write_bytes(b"one")
    first, hit1 = sass.disassemble(binary, tools)
    second, hit2 = sass.disassemble(binary, tools)
    assert (hit1, hit2) == (False, True) and first[V16_MANGLED] == second[V16_MANGLED]
    binary.write_bytes(b"two")  # same path, new content: disassembled again
    _, hit3 = sass.disassemble(binary, tools)
    assert hit3 is False and calls.read_text().count("x") == 2
    assert json.loads((binary.parent / sass.CACHE_NAME).read_text())["key"].split(":")[1] == sass.sha256(binary)


def test_the_wheels_in_the_environment_are_found_before_path(tmp_path: Path, monkeypatch):
    wheel = tmp_path / "site" / "nvidia" / "cu13" / "bin"
    wheel.mkdir(parents=True)
    for name in ("cuobjdump", "nvdisasm"):
        (wheel / name).write_text("#!/bin/sh\n")
        (wheel / name).chmod(0o755)
    monkeypatch.setattr(sass.sys, "path", [str(tmp_path / "site")])
    tools = sass.find_tools(path="")
    assert tools is not None and tools.cuobjdump == str(wheel / "cuobjdump")
    assert tools.nvdisasm == str(wheel / "nvdisasm")


def test_ci_requires_a_disassembler(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert not sass.required_here(False) and sass.required_here(True)
    monkeypatch.setenv("CI", "true")
    assert sass.required_here(False)


# ---------------------------------------------------------------- the gate and the records


def test_a_failed_check_fails_the_mechanism_gate_of_the_variants_records():
    report = sass.MechanismReport([sass.VariantMechanism("a", "wide", "sm_90a", "failed", "artifacts/a/artifact.yaml",
                                                         9, mismatches=["kernel 'k': require 'LDG.E.128': ..."])])
    rec = Record(kwiki_record=1, variant="wide", check=Check(passed=True))
    other = Record(kwiki_record=1, variant="narrow", check=Check(passed=True))
    plan = SimpleNamespace(artifacts={"artifacts/a": SimpleNamespace(name="a")})
    outcomes = {"artifacts/a": [SimpleNamespace(target="sm_90a", records=[rec, other])]}
    gating = Gating()
    sass.gate(gating, plan, outcomes, report)  # type: ignore[arg-type]
    assert [f.gate for f in gating.failed(rec)] == ["mechanism"] and gating.failed(other) == []
    assert gating.failed(rec)[0].reason.startswith("artifacts/a/artifact.yaml:9: kernel 'k'")


def test_the_evidence_a_store_row_carries():
    from kwiki.results.store import RecordRow

    res = sass.VariantMechanism("a", "wide", "sm_90a", "passed", "m", 1, kernels=[
        sass.KernelEvidence("k", 32, 0, 1152, 0, 0, 0, {"LDG.E.128": 5})])
    row = RecordRow(gpu="g", date="2026-01-01", run_id="r", artifact="a", target="sm_90a", variant="wide",
                    passed=True, mechanism=sass.evidence(res))
    back = RecordRow.model_validate_json(row.model_dump_json())
    assert back.mechanism is not None and back.mechanism.kernels[0].matched == {"LDG.E.128": 5}


# ---------------------------------------------------------------- the whole path, with nvcc


def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "project", root)
    return root


def verify(root: Path, capsys, *extra: str) -> tuple[int, dict]:
    code = main(["verify", "--quiet", "--json", "--compile-only", "--no-write", "--root", str(root), *extra])
    return code, json.loads(capsys.readouterr().out or "{}")


@pytest.fixture
def checked(tmp_path: Path, capsys) -> tuple[Path, dict]:
    """The fixture project after one clean `--compile-only` (nvcc and a disassembler needed), and its report."""
    if sass.find_tools() is None:
        pytest.skip("no cuobjdump (pip install -e '.[test]')")
    root = project(tmp_path)
    code, report = verify(root, capsys)
    assert code == 0, report["problems"]
    return root, report


@pytest.mark.nvcc
def test_the_expectations_hold_then_fail_located_when_the_16_byte_load_goes(checked, capsys):
    root, report = checked
    assert {(m["variant"], m["status"]) for m in report["mechanism"]} == {("wide", "passed"), ("narrow", "passed")}
    wide = next(m for m in report["mechanism"] if m["variant"] == "wide")
    assert wide["kernels"][0]["registers"] > 0 and wide["kernels"][0]["matched"]["LDG.E.128"] >= 1
    src = root / "artifacts" / "loads_sm90a" / "loads.cu"
    src.write_text(src.read_text().replace("using Wide = uint4;", "using Wide = unsigned;"))
    code, report = verify(root, capsys)
    assert code == 1
    errors = [p for p in report["problems"] if p["severity"] == "error"]
    assert len(errors) == 1
    p = errors[0]
    assert (p["path"], p["line"], p["field"]) == ("artifacts/loads_sm90a/artifact.yaml", 10, "variants.wide.sass")
    assert "require 'LDG.E.128': expected at least 1, found 0" in p["message"]
    assert "kernel 'copy_wide(unsigned int const*" in p["message"] and "(its LDG: LDG.E.CONSTANT x1)" in p["message"]


@pytest.mark.nvcc
def test_check_results_are_cached_by_binary_and_expectations(checked, capsys):
    root, report = checked
    (checks,) = (root / ".kwiki" / "build").rglob(sass.CHECKS_NAME)
    listing = checks.with_name(sass.CACHE_NAME)
    listing.write_text("damaged")  # a cached result needs no listing: neither read nor disassembled again
    code, again = verify(root, capsys)
    assert code == 0 and again["mechanism"] == report["mechanism"] and listing.read_text() == "damaged"
    manifest = root / "artifacts" / "loads_sm90a" / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace("require: [LDG.E.128, STG.E.128]", "require: [LDG.E.128 >= 99]"))
    code, report = verify(root, capsys)  # new expectations: checked again, on a listing disassembled again
    assert code == 1 and "expected at least 99" in report["problems"][0]["message"]
    assert listing.read_text() != "damaged"


@pytest.mark.nvcc
def test_a_build_without_sm_90a_code_fails_located(tmp_path: Path, capsys):
    if sass.find_tools() is None:
        pytest.skip("no cuobjdump (pip install -e '.[test]')")
    root = project(tmp_path)
    art = root / "artifacts" / "loads_sm90a"
    (art / "build.sh").write_text('exec nvcc -O3 -std=c++17 -gencode=arch=compute_80,code=sm_80 -I"$KWIKI_COMMON" '
                                  '-o "$KWIKI_OUT" loads.cu\n')  # the -gencode for sm_90a dropped
    manifest = art / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace("  sources: [loads.cu]\n  flags: [-O3, -std=c++17]\n",
                                                     "  script: build.sh\n  headers: [loads.cu]\n"))
    code, report = verify(root, capsys)
    assert code == 1
    errors = [p for p in report["problems"] if p["severity"] == "error"]
    assert errors and all(p["path"] == "artifacts/loads_sm90a/artifact.yaml" for p in errors)
    assert any("SASS for sm_80, not sm_90a" in p["message"] for p in errors), errors


@pytest.mark.nvcc
def test_without_a_disassembler_ci_fails_and_a_laptop_warns(tmp_path: Path, capsys, monkeypatch):
    root = project(tmp_path)
    monkeypatch.setattr(sass, "find_tools", lambda path=None: None)
    monkeypatch.delenv("CI", raising=False)
    code, report = verify(root, capsys)
    assert code == 0
    assert {m["status"] for m in report["mechanism"]} == {"not-checked"}
    assert any(n.startswith("WARNING: no disassembler") for n in report["notes"])
    monkeypatch.setenv("CI", "true")
    assert main(["verify", "--quiet", "--compile-only", "--no-write", "--root", str(root)]) == 2
    assert "no disassembler" in capsys.readouterr().err


# ---------------------------------------------------------------- expectations that prove their mechanism (issue 27)

REPO = Path(__file__).resolve().parent.parent
MECHANISMS = FIXTURES / "mechanisms.sass"  # real cuobjdump output of the kernels below, trimmed
# (artifact, variant, the variant whose kernels its expectations must NOT match): each pair differs by exactly the
# mechanism the first variant is about
MUST_NOT_MATCH = [
    ("gemm_bf16_sm90a", "ws_persistent_lag0", "ws_persistent"),  # wgmma_wait 0: no wait of depth 1
    ("gemm_bf16_sm90a", "ws_persistent", "ws_persistent_lag0"),  # wgmma_wait 1
    ("gemm_bf16_sm90a", "ws_cluster_release_cluster", "ws_cluster"),  # .release.cluster: two more GPU-scope MEMBARs
    ("vector_loads_sm90a", "regs_x8_auto", "read_v16_x8"),  # ptxas's 32-register target, not its 56
    # the fp8 atoms (QGMMA ... E4M3 / E5M2) against the bf16 atom of the same N and warpgroups (HGMMA ... BF16)
    ("wgmma_sm90a", "e4m3_n64_wg1", "n64_wg1"),
    ("wgmma_sm90a", "e4m3_n128_wg1", "n128_wg1"),
    ("wgmma_sm90a", "e4m3_n256_wg1", "n256_wg1"),
    ("wgmma_sm90a", "e4m3_n256_wg2", "n256_wg2"),
    ("wgmma_sm90a", "e5m2_n256_wg1", "n256_wg1"),
    ("wgmma_sm90a", "e5m2_n256_wg2", "n256_wg2"),
    ("wgmma_sm90a", "e4m3_n256_wg1", "e5m2_n256_wg1"),  # and the two 8-bit formats against each other
    ("wgmma_sm90a", "e5m2_n256_wg1", "e4m3_n256_wg1"),
    # ldmatrix.trans on a row-major tile and on the 128-byte-swizzled one: the swizzle's XOR is five more LOP3.LUT
    ("ldmatrix_sm90a", "ldsm_plain", "ldsm_swizzled"),
    ("ldmatrix_sm90a", "ldsm_swizzled", "ldsm_plain"),
    # stmatrix.trans (STSM.16.MT88.4) against the same staging with 2-byte scalar stores (STS.U16)
    ("ldmatrix_sm90a", "stsm_swizzled", "scalar_stores"),
    ("ldmatrix_sm90a", "scalar_stores", "stsm_swizzled"),
    ("ldmatrix_sm90a", "ldsm_swizzled", "stsm_swizzled"),  # and the two directions against each other
    ("ldmatrix_sm90a", "stsm_swizzled", "ldsm_swizzled"),
]


def _named(found: dict[str, sass.Kernel]) -> dict[str, sass.Kernel]:
    for mangled, name in sass.demangle(sorted(found)).items():
        found[mangled].name = name
    return found


def _cross_check(kernels: dict[str, sass.Kernel]) -> list[tuple[str, list[str], list[str]]]:
    """(variant, mismatches on its own kernels, mismatches on the other variant's kernels) of each pair."""
    out = []
    for artifact, name, other in MUST_NOT_MATCH:
        m = load_manifest(REPO / "artifacts" / artifact, REPO)
        v, o = m.variant(name), m.variant(other)
        assert v is not None and o is not None and v.sass is not None
        _, own = sass.check_variant(v, "sm_90a", kernels, {})
        _, theirs = sass.check_variant(v.model_copy(update={"kernels": o.kernels}), "sm_90a", kernels, {})
        out.append((name, own, theirs))
    return out


def test_each_mechanism_expectation_holds_on_its_kernel_and_fails_on_the_variant_without_it():
    for name, own, theirs in _cross_check(_named(sass.parse_listing(MECHANISMS.read_text()))):
        assert own == [], name
        assert theirs, f"{name}'s SASS expectations also hold on the variant without its mechanism"
        assert not any("matches no kernel" in t for t in theirs), theirs  # it failed on the kernel, not on a name


def test_a_wgmma_waits_depth_is_spelled_as_a_modifier_and_registers_are_capped():
    found = _named(sass.parse_listing(MECHANISMS.read_text()))
    depths = {s for k in found.values() for s in k.opcodes if s.startswith("WARPGROUP.DEPBAR")}
    assert depths == {"WARPGROUP.DEPBAR.LE.DEPTH0", "WARPGROUP.DEPBAR.LE.DEPTH1"}
    capped = Variant.model_validate({"name": "v", "kernels": ["*read_kernel<16, 8, *"],
                                     "sass": {"max_registers": 32}})
    _, bad = sass.check_variant(capped, "sm_90a", found, {})
    assert bad and "max_registers 32: uses 56" in bad[0]


def test_an_fp8_atom_requires_16_of_its_own_qgmma_and_forbids_bf16_and_the_other_8_bit_format():
    found = _named(sass.parse_listing(MECHANISMS.read_text()))
    m = load_manifest(REPO / "artifacts" / "wgmma_sm90a", REPO)
    e4m3, e5m2, bf16 = m.variant("e4m3_n256_wg1"), m.variant("e5m2_n256_wg1"), m.variant("n256_wg1")
    assert e4m3 is not None and e5m2 is not None and bf16 is not None

    def problems(v: Variant, kernels: dict[str, sass.Kernel], of: Variant) -> str:
        return "\n".join(sass.check_variant(v.model_copy(update={"kernels": of.kernels}), "sm_90a", kernels, {})[1])

    assert problems(e4m3, found, e4m3) == "" and problems(e5m2, found, e5m2) == ""
    on_bf16 = problems(e4m3, found, bf16)
    assert "require 'QGMMA.64x256x32.F32.E4M3.E4M3 >= 16': expected at least 16, found 0" in on_bf16
    assert "forbid 'HGMMA.BF16': found 20" in on_bf16
    on_e5m2 = problems(e4m3, found, e5m2)
    assert "forbid 'QGMMA.E5M2': found 20" in on_e5m2 and "require 'QGMMA.64x256x32.F32.E4M3.E4M3" in on_e5m2
    assert "forbid 'QGMMA.E4M3': found 20" in problems(e5m2, found, e4m3)
    # the count rule: a kernel with 15 of them (one k-block unrolled fewer times) fails, not only one with none
    mangled = next(k for k, v in found.items() if v.name.startswith("void wgmma_loop<__nv_fp8_e4m3, 256, 1>"))
    short = dict(found)
    short[mangled] = sass.Kernel(found[mangled].mangled, found[mangled].name, found[mangled].arch,
                                 {"QGMMA.64x256x32.F32.E4M3.E4M3": 15})
    assert "expected at least 16, found 15" in problems(e4m3, short, e4m3)


@pytest.mark.nvcc
def test_the_mechanism_expectations_fail_on_freshly_built_binaries_of_the_variants_without_them(capsys):
    tools = sass.find_tools()
    if tools is None:
        pytest.skip("no cuobjdump")
    main(["verify", "--compile-only", "--no-write", "--quiet", "--json", "--root", str(REPO),
          "algorithm-warp-specialization", "technique-vectorized-loads", "skill-wgmma-ptx",
          "technique-shared-memory-layout"])
    report = json.loads(capsys.readouterr().out)
    kernels: dict[str, sass.Kernel] = {}
    for b in report["builds"]:
        if b["ok"] and b["binary"] and b["target"] == "sm_90a" and b["artifact"] in ("gemm_bf16_sm90a",
                                                                                    "vector_loads_sm90a",
                                                                                    "wgmma_sm90a",
                                                                                    "ldmatrix_sm90a"):
            kernels.update(sass.disassemble(Path(b["binary"]), tools)[0])
    for name, own, theirs in _cross_check(_named(kernels)):
        assert own == [] and theirs, name
        assert not any("matches no kernel" in t for t in theirs), theirs


def test_a_run_writes_a_variants_evidence_on_its_first_record_only():
    """One binary runs every shape of a variant: the store says its SASS evidence once a run (kwiki.results.summary),
    on the run's first record of each artifact, target and variant."""
    from kwiki.verify import history

    report = sass.MechanismReport([sass.VariantMechanism("a", v, "sm_90a", "passed", "artifacts/a/artifact.yaml", 9)
                                   for v in ("wide", "narrow")])
    recs = [Record(kwiki_record=1, variant=v, params={"n": n}, check=Check(passed=True))
            for n in (1, 2, 3) for v in ("wide", "narrow")]
    plan = SimpleNamespace(artifacts={"artifacts/a": SimpleNamespace(name="a", hash="h")})
    outcomes = {"artifacts/a": [SimpleNamespace(target="sm_90a", records=recs[:4], sweep=False),
                                SimpleNamespace(target="sm_90a", records=recs[4:], sweep=True)]}
    common = {"gpu": "g", "date": "2026-01-01T00:00:00+00:00", "run_id": "r"}
    rows = history._record_rows(plan, outcomes, common, {}, [], {}, None, report)  # type: ignore[arg-type]
    said = [(r.variant, r.params["n"]) for r in rows if r.mechanism is not None]  # type: ignore[union-attr]
    assert said == [("wide", 1), ("narrow", 1)] and len(rows) == 6
