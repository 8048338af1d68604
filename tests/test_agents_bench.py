"""The agent benchmark (bench/agents.py) on this repository's wiki: its goal holds in CI.

Every question of bench/agent_questions.yaml answered from the MCP tools' responses, the median
question at most 8 KB of responses, none more than 2 calls (issue 17: 35-92 KB before).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_agent_benchmark_meets_its_goal(capsys):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import agents
    finally:
        sys.path.remove(str(REPO / "bench"))
    rc = agents.main([])
    out = capsys.readouterr().out
    with capsys.disabled():  # the table, in the CI log
        sys.stdout.write(out)
    assert "goal met" in out and rc == 0, out
    questions = agents.load_questions(REPO / "bench" / "agent_questions.yaml")
    assert len(questions) >= 12 and all(len(q["script"]) <= agents.MAX_CALLS for q in questions)
