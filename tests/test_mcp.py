"""`kwiki mcp`: the read-only tools, called over stdio with the MCP SDK's own client.

Each test starts `python -m kwiki.cli mcp --root <copy of tests/fixtures/query>` as a
subprocess, as a coding agent would, and talks to it with `mcp.ClientSession`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# the MCP SDK is a declared test dependency (kwiki[mcp]): its absence fails the run, it is not skipped
import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"find_techniques", "get_ladder", "get_measurements", "get_page", "list_tags", "search_pages"}


@pytest.fixture
def root(fixture_copy) -> Path:
    return fixture_copy("query", "wiki-root")


def session_run(root: Path, steps) -> Any:
    """Start the server on `root`, run `await steps(session)`, return its result."""

    async def go():
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "kwiki.cli", "mcp", "--root", str(root)],
            env={"PYTHONPATH": str(REPO),
                 **({"KWIKI_DEBUG": os.environ["KWIKI_DEBUG"]} if "KWIKI_DEBUG" in os.environ else {})},
            cwd=str(REPO),
        )
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await steps(session)

    return anyio.run(go)


def dump(result: Any) -> dict[str, Any]:
    """A result as plain JSON with the protocol's field names (the same in SDK 1.x and 2.x)."""
    return result.model_dump(by_alias=True, mode="json")


async def call(session, name: str, **arguments) -> dict[str, Any]:
    return dump(await session.call_tool(name, arguments))


def test_tools_are_read_only_typed_and_described(root):
    async def steps(session):
        return dump(await session.list_tools())["tools"]

    tools = {t["name"]: t for t in session_run(root, steps)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool["description"]) > 40
        assert tool["annotations"]["readOnlyHint"] is True
        assert tool["inputSchema"]["type"] == "object"
        assert tool["outputSchema"]["type"] == "object"
        for name, prop in tool["inputSchema"].get("properties", {}).items():
            assert prop.get("description"), f"{tool['name']}.{name} has no description"
    assert tools["find_techniques"]["inputSchema"]["required"] == ["arch"]
    assert set(tools["get_page"]["inputSchema"]["required"]) == {"id"}


def test_find_techniques_best_evidence_first(root):
    async def steps(session):
        return await call(session, "find_techniques", arch="sm_90", tags=["gemm"], op="gemm")

    result = session_run(root, steps)
    assert result["isError"] is False
    found = result["structuredContent"]["results"]
    assert [(r["id"], r["evidence_level"]) for r in found] == [
        ("technique-tma-multicast", "measured"),  # issue 40: a block written before run ids is never verified
        ("technique-wgmma-pipeline", "measured"),
        ("pattern-split-k", "source-reported"),
    ]


def test_search_pages_text_and_filters(root):
    async def steps(session):
        ranked = await call(session, "search_pages", text="coalescing")
        filtered = await call(session, "search_pages", tags=["tma", "split-k"], match_any_tag=True,
                              evidence="source-reported")
        return ranked, filtered

    ranked, filtered = session_run(root, steps)
    # the page about coalescing is the answer; the one whose body only mentions it is listed apart
    assert [r["id"] for r in ranked["structuredContent"]["results"]] == ["concept-memory-coalescing"]
    assert ranked["structuredContent"]["covered"] is True
    assert [m["id"] for m in ranked["structuredContent"]["mentions"]] == ["technique-vectorized-loads"]
    assert [r["id"] for r in filtered["structuredContent"]["results"]] == ["pattern-split-k", "technique-tma-multicast"]


def test_get_page_and_get_measurements(root):
    async def steps(session):
        return (await call(session, "get_page", id="technique-tma-multicast"),
                await call(session, "get_page", id="technique-tma-multicast", include_body=False),
                await call(session, "get_measurements", id="technique-wgmma-pipeline"),
                await call(session, "get_measurements", id="technique-tma-multicast"))

    page, no_body, numbers, multicast = session_run(root, steps)
    doc = page["structuredContent"]
    # get_page gives the claim ids, not what get_measurements returns, and nothing of its top level twice
    text = page["content"][0]["text"]
    assert "multicast-speedup" in doc["claims"] and "runs" not in doc and "measurements" not in text
    assert not {"id", "title", "type", "claims", "measurements"} & set(doc["front_matter"])
    claim = {c["id"]: c for c in multicast["structuredContent"]["claims"]}["multicast-speedup"]
    assert (claim["measured"]["value"], claim["unit"], claim["verdict"]) == (1.31, "x", "reproduced")
    assert "unit" not in claim["measured"]  # the claim's own unit, said once
    assert doc["body"].lstrip().startswith("# TMA multicast")
    assert no_body["structuredContent"].get("body") is None
    numbers = numbers["structuredContent"]
    assert numbers["evidence_level"] == "measured" and numbers["verified_on"] == "NVIDIA H200"
    assert numbers["claims"][0]["verdict"] == "worse" and numbers["claims"][0]["measured"]["value"] == 612.5


def test_list_tags(root):
    async def steps(session):
        return await call(session, "list_tags")

    tags = session_run(root, steps)["structuredContent"]["tags"]
    assert {"tag": "gemm", "pages": 3} in tags and tags[0]["pages"] >= tags[-1]["pages"]


def test_mistakes_come_back_as_tool_errors_with_the_reason(root):
    async def steps(session):
        return (await call(session, "get_page", id="no-such-page"),
                await call(session, "find_techniques", arch="sm_42"),
                await call(session, "search_pages", evidence="proven"))

    missing, bad_arch, bad_level = session_run(root, steps)
    assert missing["isError"] and "no page with id 'no-such-page'" in missing["content"][0]["text"]
    assert bad_arch["isError"] and "not a known architecture" in bad_arch["content"][0]["text"]
    assert bad_level["isError"] and "not an evidence level" in bad_level["content"][0]["text"]


def test_an_edit_between_calls_is_seen(root):
    page = root / "wiki" / "nvidia" / "kernels" / "nvfp4-gemv.md"

    async def steps(session):
        before = await call(session, "search_pages", text="ocelot")
        page.write_text(page.read_text(encoding="utf-8") + "\nAn ocelot wrote this line.\n", encoding="utf-8")
        after = await call(session, "search_pages", text="ocelot")
        return before, after

    before, after = session_run(root, steps)
    assert before["structuredContent"]["total"] == 0 and before["structuredContent"]["covered"] is False
    # a word only in the body: the page mentions it, it does not cover it
    assert [r["id"] for r in after["structuredContent"]["mentions"]] == ["kernel-nvfp4-gemv"]


def test_unknown_arguments_types_and_oversized_searches_are_tool_errors(root):
    """An argument a tool does not take, a type that is not a page type, and a search of 20,000
    words each come back at once as a tool error that says what was wrong."""
    async def steps(session):
        return (await call(session, "search_pages", txt="tma"),
                await call(session, "search_pages", type="kernal"),
                await call(session, "search_pages", text=" ".join(["tma"] * 20_000)),
                await call(session, "search_pages", text=" ".join(f"w{i}" for i in range(100))),
                await call(session, "find_techniques", arch="sm_90", tags=[f"t{i}" for i in range(1000)]),
                await call(session, "list_tags", verbose=True))

    misspelt, bad_type, long_text, many_words, many_tags, extra = session_run(root, steps)
    for result in (misspelt, bad_type, long_text, many_words, many_tags, extra):
        assert result["isError"], result
    assert "unknown argument 'txt' (did you mean 'text'?)" in misspelt["content"][0]["text"]
    assert "not a page type" in bad_type["content"][0]["text"]
    assert "did you mean 'kernel'" in bad_type["content"][0]["text"]
    assert "at most 1000 characters" in long_text["content"][0]["text"]
    assert "at most 64" in many_words["content"][0]["text"]
    assert "at most 64" in many_tags["content"][0]["text"]
    assert "list_tags: unknown argument 'verbose'" in extra["content"][0]["text"]


def test_answers_are_compact_and_the_ladder_tool_names_what_is_wrong(root):
    """Each answer is sent once as compact JSON (no nulls, no indentation: the SDK indented it and filled
    every null in, doubling 23-65 KB searches); get_ladder answers an unknown id with the closest ids."""
    import json

    async def steps(session):
        return (await call(session, "search_pages", text="multicast"),
                await call(session, "get_ladder", id="technique-tma-multicast"),
                await call(session, "get_ladder", id="tma-multicast"),
                await call(session, "find_techniques", arch="sm_90", op="gemm", text="speedup", detail="full"))

    search, ladder, unknown, full = session_run(root, steps)
    text = search["content"][0]["text"]
    assert "null" not in text and "\n" not in text and json.loads(text) == search["structuredContent"]
    assert search["structuredContent"]["results"][0]["claims"][0]["id"] == "multicast-speedup"
    assert ladder["isError"] is False and ladder["structuredContent"]["ladders"] == []  # no manifest, no run
    assert unknown["isError"] and "did you mean 'technique-tma-multicast'" in unknown["content"][0]["text"]
    hit = full["structuredContent"]["results"][0]
    assert hit["path"] and hit["runs"] and "provenance" not in json.dumps(hit)


def test_the_tool_list_fits_in_12_kb_with_every_output_schema_referenced(root):
    """The tool list was 55 KB, 87% of it output schemas: now names and types, the described schema named."""
    import json

    from kwiki.agents.mcp import MAX_TOOL_LIST

    async def steps(session):
        return dump(await session.list_tools())

    listed = session_run(root, steps)
    size = len(json.dumps({k: v for k, v in listed.items() if v is not None}, separators=(",", ":")))
    assert MAX_TOOL_LIST == 12 * 1024 and size <= MAX_TOOL_LIST, size
    for tool in listed["tools"]:
        out = tool["outputSchema"]
        assert out["type"] == "object" and out["properties"] and "schema/" in out["description"]
        assert (REPO / "schema" / out["description"].split("schema/")[1].split(" ")[0]).is_file()
        assert "title" not in tool["inputSchema"]
        assert not [name for name, prop in tool["inputSchema"].get("properties", {}).items() if "title" in prop]


def test_nothing_here_is_covered_false_with_what_is_near_and_errors_name_parameters(root):
    async def steps(session):
        return (await call(session, "search_pages", text="structured sparsity"),
                await call(session, "find_techniques", arch="H200", op="attention"),
                await call(session, "find_techniques", arch="sm_90", tags=["tma-multicast"]),
                await call(session, "search_pages", evidence="proven"),
                await call(session, "search_pages", text="!!!"),
                await call(session, "search_pages", text="coalescing 4096x4096 H200"))

    sparsity, attention, near_tag, bad_level, no_words, shape = session_run(root, steps)
    # a shape or GPU no page's text holds with the topic is left out and named, not a "nothing here"
    assert [r["id"] for r in shape["structuredContent"]["results"]] == ["concept-memory-coalescing"]
    assert shape["structuredContent"]["ignored_words"] == ["4096x4096", "h200"]
    for miss in (sparsity, attention, near_tag):
        doc = miss["structuredContent"]
        assert miss["isError"] is False and doc["covered"] is False and doc["results"] == [] and doc["total"] == 0
    assert "tma" in near_tag["structuredContent"]["nearest_tags"]
    for error, name in ((bad_level, "evidence 'proven'"), (no_words, "text '!!!'")):
        text = error["content"][0]["text"]
        assert error["isError"] and name in text and "--" not in text, text


def test_architectures_are_named_as_agents_say_them(root):
    async def steps(session):
        return [await call(session, "find_techniques", arch=arch, tags=["gemm"])
                for arch in ("sm_90", "H100", "H200", "Hopper", "sm_90a", "nvidia h200 sxm", "B200", "Blackwell")]

    ids = [[r["id"] for r in result["structuredContent"]["results"]] for result in session_run(root, steps)]
    assert ids[0] and all(found == ids[0] for found in ids[1:6]), ids
    assert ids[6] == ids[7] and ids[6] != ids[0]
