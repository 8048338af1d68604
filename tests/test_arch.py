"""Architecture names: one canonical spelling, and the rule for which build runs on which GPU."""

from __future__ import annotations

import pytest

from kwiki.core.arch import KNOWN_CC, Arch, ArchError, compatible, device_arch, normalize_arch, parse_arch


@pytest.mark.parametrize("spelling, canonical", [
    ("sm90", "sm_90"),
    ("sm_90", "sm_90"),
    ("SM90A", "sm_90a"),
    ("SM_90a", "sm_90a"),
    ("sm90a", "sm_90a"),
    ("90a", "sm_90a"),
    ("90", "sm_90"),
    ("compute_90a", "sm_90a"),
    ("compute_80", "sm_80"),
    ("sm_100a", "sm_100a"),
    ("sm100", "sm_100"),
    ("sm_100f", "sm_100f"),
    ("sm_120", "sm_120"),
    (" sm_89 ", "sm_89"),
])
def test_accepted_spellings_normalize(spelling: str, canonical: str):
    assert normalize_arch(spelling) == canonical


@pytest.mark.parametrize("bad, why", [
    ("sm_42", "is not a known architecture"),
    ("sm_91", "is not a known architecture"),
    ("sm_80a", "suffix 'a' does not exist for sm_80"),
    ("sm_89a", "suffix 'a' does not exist for sm_89"),
    ("sm_90f", "suffix 'f' does not exist for sm_90"),
    ("sm_9", "is not an architecture name"),
    ("sm_90x", "is not an architecture name"),
    ("hopper", "is not an architecture name"),
    ("", "is not an architecture name"),
    ("sm_90 a", "is not an architecture name"),
    (90, "expected a string"),
    (None, "expected a string"),
    (["sm_90"], "expected a string"),
])
def test_unknown_or_malformed_names_are_refused(bad, why: str):
    with pytest.raises(ArchError) as exc:
        parse_arch(bad)
    assert why in str(exc.value)


def test_arch_error_is_a_value_error_for_pydantic():
    assert issubclass(ArchError, ValueError)


def test_every_known_cc_has_a_generic_name():
    for cc in KNOWN_CC:
        assert parse_arch(f"sm_{cc}") == Arch(cc)


def test_parts_and_gencode():
    arch = parse_arch("sm_90a")
    assert (arch.cc, arch.suffix, arch.major, arch.name, str(arch)) == (90, "a", 9, "sm_90a", "sm_90a")
    assert arch.gencode() == "-gencode=arch=compute_90a,code=sm_90a"
    assert parse_arch("sm_80").gencode() == "-gencode=arch=compute_80,code=sm_80"
    assert device_arch(9, 0) == 90 and device_arch(12, 1) == 121


# the compatibility rule of kwiki/core/arch.py's docstring
@pytest.mark.parametrize("target, device, runs", [
    # arch-specific: exactly that compute capability
    ("sm_90a", 90, True),
    ("sm_90a", 100, False),
    ("sm_90a", 89, False),
    ("sm_100a", 100, True),
    ("sm_100a", 103, False),
    ("sm_100a", 90, False),
    # family: same major, equal or higher minor
    ("sm_100f", 100, True),
    ("sm_100f", 103, True),
    ("sm_103f", 100, False),
    ("sm_100f", 110, False),
    ("sm_100f", 120, False),
    ("sm_120f", 121, True),
    # generic: its own and every later compute capability
    ("sm_80", 80, True),
    ("sm_80", 86, True),
    ("sm_80", 90, True),
    ("sm_80", 120, True),
    ("sm_80", 75, False),
    ("sm_90", 90, True),
    ("sm_90", 89, False),
])
def test_runs_on(target: str, device: int, runs: bool):
    assert parse_arch(target).runs_on(device) is runs


@pytest.mark.parametrize("page, query, applies", [
    ("sm_90a", "sm_90", True),
    ("sm_90a", "sm_90a", True),  # the query names hardware: its suffix is ignored
    ("sm_90a", "sm90", True),
    ("sm_90", "sm_90a", True),
    ("sm_80", "sm_90a", True),
    ("sm_90a", "sm_100a", False),
    ("sm_100a", "sm_90", False),
    ("sm_100", "sm_90", False),
    ("sm_100f", "sm_103", True),
])
def test_compatible(page: str, query: str, applies: bool):
    assert compatible(page, query) is applies


def test_compatible_refuses_unknown_names():
    with pytest.raises(ArchError):
        compatible("sm_42", "sm_90")
    with pytest.raises(ArchError):
        compatible("sm_90", "h100")


def test_arch_orders_by_compute_capability_then_suffix():
    names = ["sm_100a", "sm_80", "sm_90a", "sm_90", "sm_100"]
    assert [a.name for a in sorted(parse_arch(n) for n in names)] == ["sm_80", "sm_90", "sm_90a", "sm_100", "sm_100a"]
