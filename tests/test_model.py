"""The page model: normalization of tags and architectures, claim shapes, evidence, located errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kwiki.wiki.evidence import AUTHOR_LEVELS, KWIKI_LEVELS, LADDER, EvidenceLevel, at_least
from kwiki.wiki.model import Claim, FieldError, Measurements, PageMeta

BASE = {"id": "p", "title": "A page", "type": "technique"}


def meta(**fields) -> PageMeta:
    return PageMeta.model_validate({**BASE, **fields})


def errors(**fields) -> list[dict]:
    with pytest.raises(ValidationError) as exc:
        PageMeta.model_validate({**BASE, **fields})
    return exc.value.errors(include_url=False)


def claim(**fields) -> dict:
    return {"id": "c", "statement": "Reaches it.", "metric": "time", "unit": "us", **fields}


# ---------------------------------------------------------------- core fields


def test_minimal_page_has_defaults():
    m = meta()
    assert (m.architectures, m.tags, m.claims, m.evidence_level, m.measurements) == ([], [], [], EvidenceLevel.spec,
                                                                                     None)
    assert m.unknown_fields == []


@pytest.mark.parametrize("tags, normalized", [
    (["GEMM", "Warp Specialization", "cuda_cpp", "  tma  "], ["gemm", "warp-specialization", "cuda-cpp", "tma"]),
    (["gemm", "GEMM", "Gemm"], ["gemm"]),
    ("gemm", ["gemm"]),
    (["c++", "sm90a", "fp8*", "a/b"], ["c++", "sm90a", "fp8*", "a/b"]),
])
def test_tags_are_normalized_and_deduplicated(tags, normalized):
    assert meta(tags=tags).tags == normalized


@pytest.mark.parametrize("bad", [[42], [""], ["  "], [None], [{"name": "x"}], ["a!b"], ["tab\tx!"], 5])
def test_bad_tags_are_refused(bad):
    assert errors(tags=bad)[0]["loc"][0] == "tags"


def test_architectures_are_normalized_and_deduplicated():
    assert meta(architectures=["sm90", "sm_90", "SM90A", "sm100"]).architectures == ["sm_90", "sm_90a", "sm_100"]
    assert meta(architectures="sm90a").architectures == ["sm_90a"]


def test_bad_architecture_is_located():
    err = errors(architectures=["sm_90", "sm_42"])[0]
    assert err["loc"] == ("architectures", 1) and "not a known architecture" in err["msg"]


@pytest.mark.parametrize("page_id", ["Bad", "a b", "-a", "a-", "a--b", "", "x" * 121, 5])
def test_ids_must_be_slugs(page_id):
    assert errors(id=page_id)[0]["loc"] == ("id",)


@pytest.mark.parametrize("page_id", ["a", "kernel-gemv-bf16", "a.b_c-d", "x" * 120, "sm90a"])
def test_slug_ids_are_accepted(page_id):
    assert meta(id=page_id).id == page_id


def test_unknown_fields_are_kept_and_listed():
    m = meta(colour="blue", aardvark=1)
    assert m.unknown_fields == ["aardvark", "colour"]


def test_lone_source_entries_become_lists():
    m = meta(source={"path": "spec", "anchor": "x"}, sources="blog-a")
    assert [s.path for s in m.source] == ["spec"] and m.sources == ["blog-a"]


def test_references_lists_every_page_reference():
    m = meta(prerequisites=["a"], related=["b", "c"], related_skills=["d"])
    assert m.references() == [("prerequisites", 0, "a"), ("related", 0, "b"), ("related", 1, "c"),
                              ("related_skills", 0, "d")]


@pytest.mark.parametrize("constraint, ok",
                         [(">=9.0a", True), ("9.0", True), ("< 10", True), ("sm_90", False), ("=>9", False)])
def test_requires_sm(constraint, ok):
    if ok:
        assert meta(requires_sm=constraint).requires_sm == constraint
    else:
        assert errors(requires_sm=constraint)[0]["loc"] == ("requires_sm",)


# ---------------------------------------------------------------- claims


@pytest.mark.parametrize("fields", [
    {"value": 22.4},
    {"value": 22.4, "tolerance": 0.1},
    {"at_least": 3.0},
    {"at_most": 5.0},
    {"at_least": 3.0, "at_most": 5.0},
    {"metric": "outcome", "unit": "outcome", "expect": "check-failed"},
])
def test_claim_shapes_accepted(fields):
    Claim.model_validate(claim(**fields))


@pytest.mark.parametrize("fields, loc, message", [
    ({}, (), "needs either 'value'"),
    ({"value": 1, "at_least": 0.5}, ("at_least",), "not both"),
    ({"value": 1, "at_most": 2}, ("at_most",), "not both"),
    ({"at_least": 2, "tolerance": 0.1}, ("tolerance",), "'tolerance' applies to a point 'value' only"),
    ({"at_least": 5, "at_most": 3}, ("at_least",), "is above at_most"),
    ({"value": 1, "expect": "passed"}, ("expect",), "only for claims whose metric is 'outcome'"),
    ({"metric": "outcome", "unit": "-"}, ("expect",), "needs 'expect'"),
    ({"metric": "outcome", "unit": "-", "expect": "passed", "value": 1}, ("value",), "takes 'expect'"),
    ({"value": 1, "evidence": "source-reported"}, ("source",), "needs its 'source'"),
    ({"value": 1, "measure": {"artifact": "a", "of": {"variant": "v", "figure": "gb_per_s"}}}, ("unit",), "is in GB/s"),
    ({"value": 1, "measure": {"artifact": "a", "of": {"variant": "v"}, "per": {"variant": "w"}}}, ("unit",),
     "a ratio of two figures"),
])
def test_claim_shapes_refused_with_the_field(fields, loc, message):
    with pytest.raises(ValidationError) as exc:
        Claim.model_validate(claim(**fields))
    err = exc.value.errors(include_url=False)[0]
    assert message in err["msg"]
    assert isinstance(err["ctx"]["error"], FieldError) and err["ctx"]["error"].loc == loc


@pytest.mark.parametrize("fields", [{"tolerance": -0.1, "value": 1}, {"tolerance": 11, "value": 1}, {"value": "fast"},
                                    {"metric": "speed", "value": 1}, {"unit": "", "value": 1},
                                    {"value": 1, "extra": 2}])
def test_claim_field_types(fields):
    with pytest.raises(ValidationError):
        Claim.model_validate(claim(**fields))


def test_ratio_claim_with_unit_x():
    c = Claim.model_validate(claim(unit="x", metric="ratio", at_least=1.1,
                                   measure={"artifact": "a", "of": {"variant": "v"}, "per": {"variant": "cublas"}}))
    assert c.describe() == ">= 1.1 x"


def test_describe_and_default_tolerance():
    assert Claim.model_validate(claim(value=4.45, unit="TB/s", metric="bandwidth")).describe() == "4.45 TB/s ±5%"
    assert Claim.model_validate(claim(value=10, tolerance=0.1)).tolerance_or_default == 0.1
    assert Claim.model_validate(claim(at_least=1, at_most=2)).describe() == ">= 1 and <= 2 us"
    assert Claim.model_validate(claim(metric="outcome", unit="-", expect="timeout")).describe() == "ends: timeout"


def test_claim_conditions_arch_is_normalized():
    c = Claim.model_validate(claim(value=1, conditions={"arch": "SM90A", "gpu": "H200"}))
    assert c.conditions.arch == "sm_90a"


def test_page_level_claim_rules_name_the_claim_field():
    dup = errors(claims=[claim(value=1), claim(value=2)])[0]
    assert dup["ctx"]["error"].loc == ("claims", 1, "id") and "appears twice" in dup["msg"]
    art = errors(artifacts={"code": "artifacts/x.cu"},
                 claims=[claim(value=1, measure={"artifact": "kernel", "of": {"variant": "v"}})])[0]
    assert art["ctx"]["error"].loc == ("claims", 0, "measure", "artifact")


def test_claim_measuring_a_listed_artifact_is_accepted():
    m = meta(artifacts={"code": "artifacts/x.cu"},
             claims=[claim(value=1, measure={"artifact": "code", "of": {"variant": "v"}})])
    assert m.claims[0].measure.of.figure == "time_us"


# ---------------------------------------------------------------- evidence


def test_ladder_order_is_by_rank_not_by_text():
    spec, src, measured, verified = LADDER
    assert spec < src < measured < verified
    assert verified > measured > src > spec
    assert src <= src and src >= src and not src < src
    assert sorted([verified, measured, spec, src]) == LADDER
    assert max(LADDER) is verified


def test_at_least_and_level_sets():
    assert at_least("measured", "source-reported") and not at_least("spec", "measured")
    assert AUTHOR_LEVELS | KWIKI_LEVELS == set(LADDER) and not AUTHOR_LEVELS & KWIKI_LEVELS
    with pytest.raises(ValueError):
        at_least("anecdotal", "spec")


def test_effective_evidence_prefers_kwiki_measurements():
    assert meta(evidence_level="source-reported").effective_evidence == EvidenceLevel.source_reported
    m = meta(evidence_level="source-reported", measurements={"evidence_level": "verified", "date": "2026-01-01"})
    assert isinstance(m.measurements, Measurements)
    assert m.effective_evidence == EvidenceLevel.verified


def test_measurements_are_strict():
    err = errors(measurements={"evidence_level": "verified", "date": "2026-01-01", "by": "me"})[0]
    assert err["loc"] == ("measurements", "by") and err["type"] == "extra_forbidden"


# ---------------------------------------------------------------- kwiki.wiki.fields: the index's plain rules

_VALUES = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=" \t\n\x1c\u00a0\u2003_-AbZ09+#./*!é", max_size=8),
    st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(),
)
_SIMPLE_VALUES = st.one_of(_VALUES, st.lists(_VALUES, max_size=4),
                           st.dictionaries(st.text(max_size=3), _VALUES, max_size=2))


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(["title", "summary", "tags"]), value=_SIMPLE_VALUES)
def test_what_the_plain_rules_accept_the_model_accepts_and_stores_alike(name, value):
    from kwiki.wiki.fields import SIMPLE, Unsure
    from kwiki.wiki.model import PageMeta

    normalize, _ = SIMPLE[name]
    try:
        expected = normalize(value)
    except Unsure:
        return  # the index then asks the model
    meta = PageMeta.model_validate({"id": "a-page", "title": "A page", "type": "technique", name: value})
    assert getattr(meta, name) == expected
    assert meta.model_dump(mode="json", exclude_unset=True)[name] == expected


def test_the_plain_rules_refuse_what_they_cannot_vouch_for():
    from kwiki.wiki.fields import SIMPLE, Unsure

    for name, value in [("title", ""), ("title", " padded "), ("title", 3), ("summary", 4.5),
                        ("tags", ["ok", "not ok!"]), ("tags", {"a": 1}), ("tags", 7)]:
        with pytest.raises(Unsure):
            SIMPLE[name][0](value)
    assert SIMPLE["tags"][0](["GEMM", "gemm", "warp_specialization"]) == ["gemm", "warp-specialization"]
