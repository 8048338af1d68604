"""kwiki's side of the Python harness (kwiki/verify/pyjudge.py), without a harness: the messages it answers, the
re-checks it draws after a sample ran, and the records it writes (judge verdicts, its own clock)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from kwiki.results import recheck
from kwiki.verify import pyjudge


@pytest.fixture
def referee():
    r = pyjudge.Referee()
    yield r
    r.close()


def record(variant: str = "v", passed: bool = True, median: float = 100.0) -> dict[str, Any]:
    return {"kwiki_record": 1, "variant": variant, "params": {"n": 4}, "timing": {"median_us": median} if passed
            else None, "check": {"passed": passed, "detail": "" if passed else "wrong"}, "extra": {}}


def feed(r: pyjudge.Referee, samples: int, bracket_us: float, reported_us: float, *, variant: str = "v",
         judged_ok: bool = True) -> None:
    """Calibration windows (1 us beyond the report), then `samples` timed samples of `variant` whose "go" to
    "done" took bracket_us by the referee's clock (forced) and whose harness reported reported_us."""
    r.handle({"op": "hello", "max_samples": 2000, "fresh": False, "device": "cuda"})
    r.handle({"op": "params", "params": {"n": 4}})
    for k in range(42):
        r.handle({"op": "go", "v": "", "k": k})
        r.handle({"op": "done", "v": "", "k": k})
        log = r.case("")
        log.brackets[k] = 11.0
        r.handle({"op": "time", "v": "", "k": k, "us": 10.0})
    for k in ["check", *range(samples)]:
        r.handle({"op": "prep", "v": variant, "k": k, "fresh": False})
        r.handle({"op": "go", "v": variant, "k": k})
        reply = r.handle({"op": "done", "v": variant, "k": k})
        assert reply is not None
        if reply["positions"] is not None:
            r.handle({"op": "checked", "v": variant, "k": k, "ok": judged_ok, "detail": "", "out": {"y": [1.0]},
                      "in": {"x": [0.5]}})
        if k != "check":
            r.case(variant).brackets[k] = bracket_us
            r.handle({"op": "time", "v": variant, "k": k, "us": reported_us})


def test_the_check_call_is_always_judged_and_timed_samples_as_p_of_i(referee):
    referee.handle({"op": "hello", "max_samples": 2000, "fresh": False, "device": "cuda"})
    assert referee.handle({"op": "done", "v": "v", "k": "check"})["positions"] is not None
    assert referee.handle({"op": "done", "v": "", "k": 0})["positions"] is None  # calibration: never
    drawn = [referee.handle({"op": "done", "v": "v", "k": k})["positions"] is not None for k in range(4000)]
    expected = recheck.expected_rechecks(4000)
    assert abs(sum(drawn) - expected) < 5 * expected ** 0.5, (sum(drawn), expected)
    # early samples are drawn at RATE, late ones at SCALE / (i + 1): none of the first 40 drawn has probability
    # 2.5e-7, and the last 2000 expect 5 (more than 30: far below 1e-9), so neither bound flakes
    assert sum(drawn[:40]) >= 1 and sum(drawn[2000:]) <= 30


def test_every_sample_is_judged_when_max_samples_is_below_20(referee):
    referee.handle({"op": "hello", "max_samples": 10, "fresh": False, "device": "cuda"})
    assert all(referee.handle({"op": "done", "v": "v", "k": k})["positions"] is not None for k in range(10))


def test_fresh_inputs_get_a_new_seed_per_sample_and_sets_rotate_otherwise(referee):
    referee.handle({"op": "hello", "max_samples": 100, "fresh": True, "device": "cuda"})
    seeds = {referee.handle({"op": "prep", "v": "v", "k": k, "fresh": True})["seed"] for k in range(20)}
    assert len(seeds) == 20
    referee.fresh = False
    referee.handle({"op": "sets", "n": 3})
    assert {referee.handle({"op": "prep", "v": "v", "k": k, "fresh": False})["set"] for k in range(60)} == {0, 1, 2}
    assert referee.case("v").seeds[59] - referee.seed in (0, 1, 2)  # the judge makes set i again from seed + i


def test_an_honest_record_keeps_its_timing_from_the_reported_samples(referee):
    feed(referee, 30, bracket_us=130.0, reported_us=100.0)
    referee.records.append(record())
    reqs = referee.requests()
    referee.take_verdicts(reqs, "".join(json.dumps({"id": q["id"], "ok": True}) + "\n" for q in reqs))
    (line,) = referee.composed().splitlines()
    rec = json.loads(line)
    assert rec["check"]["passed"] and rec["timing"]["median_us"] == 100.0 and rec["timing"]["samples"] == 30
    assert rec["rechecked"] == len(reqs) - 1  # the check call is judged, not counted as a re-check
    assert rec["extra"]["parent_median_us"] == 130.0 and rec["extra"]["parent_fixed_us"] == 1.0


def test_a_judged_sample_the_judge_disagrees_with_fails_the_record(referee):
    feed(referee, 30, bracket_us=130.0, reported_us=100.0)
    referee.records.append(record())
    reqs = referee.requests()
    said = [{"id": q["id"], "ok": q["k"] == "check", "detail": "y: 3 of 2048 elements not within"} for q in reqs]
    referee.take_verdicts(reqs, "".join(json.dumps(s) + "\n" for s in said))
    rec = json.loads(referee.composed())
    assert not rec["check"]["passed"] and rec["timing"] is None and "kwiki's judge: y: 3 of 2048" in \
        rec["check"]["detail"]


def test_a_judged_sample_without_a_verdict_fails_the_record(referee):
    feed(referee, 30, bracket_us=130.0, reported_us=100.0)
    referee.records.append(record())
    referee.take_verdicts(referee.requests(), "")  # the judge died
    rec = json.loads(referee.composed())
    assert not rec["check"]["passed"] and "the judge gave no verdict" in rec["check"]["detail"]


def test_a_sample_that_was_to_be_judged_and_shipped_nothing_fails_the_record(referee):
    feed(referee, 30, bracket_us=130.0, reported_us=100.0)
    log = referee.case("v")
    k = next(k for k in log.positions if k != "check")
    del log.shipped[k]
    referee.records.append(record())
    reqs = referee.requests()
    referee.take_verdicts(reqs, "".join(json.dumps({"id": q["id"], "ok": True}) + "\n" for q in reqs))
    rec = json.loads(referee.composed())
    assert not rec["check"]["passed"] and f"sample {k} was to be judged" in rec["check"]["detail"]


# the calibration's fixed cost is 1 us (no per-launch cost): the allowance over 100 us reported
ALLOWANCE = pyjudge.PARENT_FACTOR * 1 + pyjudge.PARENT_FLOOR_US["cuda"] + pyjudge.PARENT_SHARE * 100


@pytest.mark.parametrize(("bracket", "passed"), [(100.0 + ALLOWANCE - 1, True), (100.0 + ALLOWANCE + 1, False)])
def test_the_parents_clock_bounds_the_reported_time(referee, bracket: float, passed: bool):
    feed(referee, 30, bracket_us=bracket, reported_us=100.0)
    referee.records.append(record())
    reqs = referee.requests()
    referee.take_verdicts(reqs, "".join(json.dumps({"id": q["id"], "ok": True}) + "\n" for q in reqs))
    rec = json.loads(referee.composed())
    assert rec["check"]["passed"] is passed, rec["check"]
    if not passed:
        assert "kwiki's clock saw" in rec["check"]["detail"] and rec["timing"] is None


def test_a_record_the_harness_failed_stays_failed(referee):
    feed(referee, 0, bracket_us=0.0, reported_us=0.0)
    referee.records.append(record(passed=False))
    rec = json.loads(referee.composed())
    assert not rec["check"]["passed"] and rec["check"]["detail"] == "wrong"


def test_one_harness_connects_and_no_second(referee):
    first = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    first.connect(referee.path)
    f = first.makefile("rwb")
    f.write(b'{"op":"hello","max_samples":50,"fresh":false,"device":"cpu"}\n')
    f.flush()
    assert json.loads(f.readline())["seed"] == referee.seed
    second = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(OSError):
        second.connect(referee.path)
    first.close()
    second.close()
