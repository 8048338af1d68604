"""The agent benchmark (bench/agents.py) on this repository's wiki: its goal holds in CI, and its scripts
cannot be written with what only a reply tells.

Every question of bench/agent_questions.yaml answered from the MCP tools' responses, the median
question at most 4 KB of responses, none more than 2 calls (issue 28: 16.2 KB median over 24 calls
before); each call checked as the benchmark makes it: the first uses only the question's words and its
architecture, a later one only ids and shapes an earlier reply returned.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def agents():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import agents
    finally:
        sys.path.remove(str(REPO / "bench"))
    return agents


def test_the_agent_benchmark_meets_its_goal(agents, capsys):
    rc = agents.main([])
    out = capsys.readouterr().out
    with capsys.disabled():  # the table, in the CI log
        sys.stdout.write(out)
    assert "goal met" in out and rc == 0, out
    assert agents.MEDIAN_BYTES == 4 * 1024 and agents.MAX_CALLS == 2
    questions = agents.load_questions(REPO / "bench" / "agent_questions.yaml")
    assert len(questions) >= 27 and all(len(q["script"]) <= agents.MAX_CALLS for q in questions)
    assert any(n.get("nothing") for q in questions for n in q["needs"])  # a clean "nothing here" is asked for


QUESTION = {"question": "What is the fastest bf16 GEMV on the H200 at 16384x16384?", "arch": "H200"}
REPLY = '{"results":[{"id":"kernel-gemv-bf16","claims":[{"id":"vs-cublaslt-best-16384x16384"}]}]}'


@pytest.mark.parametrize("n, tool, arguments, replies, problem", [
    (0, "get_ladder", {"id": "kernel-gemv-bf16"}, [], "a first call has no reply to take an id from"),
    (0, "search_pages", {"text": "GEMV tuned warp_r4_v16"}, [], "'tuned', 'warp', 'r4', 'v16' not in the question"),
    (0, "find_techniques", {"arch": "sm_90", "op": "gemv"}, [], "the question's architecture is 'H200'"),
    (0, "search_pages", {"tags": ["gemv", "memory-bound"]}, [], "'memory', 'bound' not in the question"),
    (1, "get_ladder", {"id": "kernel-nvfp4-gemv"}, [REPLY], "no earlier reply returned it"),
    (1, "get_ladder", {"id": "kernel-gemv-bf16", "shape": "8192x8192"}, [REPLY], "no earlier reply returned it"),
    (0, "search_pages", {"text": "GEMV", "detail": "everything"}, [], "not a str setting"),
])
def test_a_call_with_what_the_question_does_not_say_is_refused(agents, n, tool, arguments, replies, problem):
    found = agents.check_call(n, tool, arguments, QUESTION, replies)
    assert found and problem in found[0], found


def test_a_call_with_the_questions_words_and_what_replies_returned_passes(agents):
    assert agents.check_call(0, "find_techniques", {"arch": "H200", "op": "gemv", "text": "fastest bf16",
                                                    "limit": 1}, QUESTION, []) == []
    assert agents.check_call(1, "get_ladder", {"id": "kernel-gemv-bf16", "shape": "16384x16384"}, QUESTION,
                             [REPLY]) == []
    assert agents.alike("specialization", "specialized") and not agents.alike("gemm", "gemv")


def test_a_small_figure_must_be_the_rows_own(agents):
    need = agents.Need("warps", ["read_v16"], 16.0, key="warps_per_sm", row="read_v16")
    assert agents.found(need, ['{"rows":[{"variant":"read_v16","warps_per_sm":16}]}'])
    assert not agents.found(need, ['{"rows":[{"variant":"read_v16","warps_per_sm":64},{"registers":16}]}'])
