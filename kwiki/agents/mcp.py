"""`kwiki mcp`: the wiki as read-only MCP tools over stdio, for coding agents.

Tools (typed inputs, typed structured outputs, all read-only):

* ``find_techniques(arch, tags, op, text)``: pages of every type that apply to a GPU, the page
  whose tags and ops match best first, then best evidence;
* ``search_pages(text, tags, ...)``: every filter of `kwiki query`;
* ``get_page(id)``: front matter, claims with latest measurements, body (`kwiki show`);
* ``get_measurements(id)``: a page's claims with claimed and measured figures, verdicts;
* ``get_ladder(id, shape)``: a page's ladders as data: each variant's time, rate, ratio to the
  baseline and share of the speed of light, by shape (`kwiki show --ladder`);
* ``list_tags()``: tags with page counts.

Answers are compact (kwiki.agents.views): no nulls, no empty fields, JSON without indentation,
each run's provenance once (`runs`, referenced by `measured.run`); a search hit is brief (id,
title, type, evidence, summary, the claims that match; about half a kilobyte) unless
`detail="full"`. Every call reads the same index as `kwiki query` (kwiki/agents/index.py),
refreshed first, so an edit to a page shows in the next call. Works with the official MCP Python
SDK, 1.x (`FastMCP`) and 2.x (`MCPServer`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from kwiki.agents.outputs import LadderOutput, MeasurementsOutput, PageOutput, QueryOutput, TagsOutput
from kwiki.agents.views import measurements_view
from kwiki.core.errors import KwikiError

INSTRUCTIONS = """\
KernelWiki: GPU kernel-optimization techniques (CUDA, PTX, CUTLASS/CuTe, Triton) whose
numbers are re-measured by a machine. Each page has an evidence level: spec <
source-reported < measured < verified (verified: `kwiki verify` reproduced every claim
that could run on matching hardware). Claims carry the claimed figure, the latest
measured figure, a verdict (reproduced, better, worse, failed, ...) and the GPU and date.
A page whose measured figures do not trace to the results store (`traceable: false`,
evidence level and state "untraceable") was edited or written by hand: treat none of its
verdicts as verified.

Start with find_techniques(arch="H200", tags=[...], op="gemm", text=...) or
search_pages(text=...): each hit carries the page's summary and the claims that match, with
claimed and measured figures and verdicts, often enough to answer. `covered: false` means no
page is about it: `nearest_tags`, `nearest_pages` and `mentions` (pages that only mention
the words) say what is near; do not present a mention as an answer. Then
get_measurements(id) for every claim of a page with its provenance (`state_reason`: why the
page is not verified), get_ladder(id) for the best, baseline and ceiling row of each shape
of its benchmark (shape="8192x8192" for every row of a shape, with occupancy), get_page(id)
for the prose. Fields that would be null are left out; `runs` holds each run's provenance
once. `arch` takes a GPU (H100, H200, Hopper, B200, Blackwell, A100) or a target (sm_90,
sm_90a, sm_100a); a query names the hardware and matches pages whose code runs on it (sm_90a
code runs on sm_90 GPUs such as the H100/H200; sm_100a code does not). Prefer verified
or measured pages; treat source-reported figures as claims, not facts."""

Arch = Annotated[
    str,
    Field(description="the target hardware: a GPU or family ('H100', 'H200', 'Hopper', 'B200', 'Blackwell', "
                      "'A100') or an architecture ('sm_90', 'sm_90a', 'sm_100')"),
]
Tags = Annotated[
    list[str] | None,
    Field(description="tags the page must all have, e.g. ['tma', 'warp-specialization']; list_tags() shows them"),
]
Op = Annotated[
    str | None,
    Field(description="operation the page applies to, e.g. 'gemm', 'gemv', 'attention', 'reduction'"),
]
Evidence = Annotated[
    str | None,
    Field(description="minimum evidence level: 'spec', 'source-reported', 'measured' or 'verified'"),
]
Limit = Annotated[int, Field(ge=1, le=500, description="maximum number of results")]
Detail = Annotated[
    str,
    Field(description="'brief' (default): id, title, type, evidence, summary and the claims that match; "
                      "'full': every field and every claim"),
]
Text = Annotated[str | None, Field(description="words to search for, e.g. 'tma multicast cluster'")]
PageId = Annotated[
    str,
    Field(description="page id, as in the 'id' of a search result, e.g. 'technique-vectorized-loads'"),
]


MAX_ARGUMENT_CHARS = 1000  # a string argument (an id, a tag, a shape, the search text: MAX_TEXT_CHARS too)
MAX_ARGUMENTS_BYTES = 64 * 1024  # all of a call's arguments, as JSON


def oversized(arguments: Any) -> str | None:
    """Why a tool call's arguments are refused unread (too large), or None; never quotes them."""
    import json

    try:
        size = len(json.dumps(arguments, default=str))
    except (TypeError, ValueError, RecursionError):
        return "arguments that are not JSON data"
    for key, value in (arguments or {}).items() if isinstance(arguments, dict) else ():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and len(v) > MAX_ARGUMENT_CHARS for v in values):
            return f"argument {str(key)[:40]!r}: at most {MAX_ARGUMENT_CHARS} characters"
    if size > MAX_ARGUMENTS_BYTES:
        return f"arguments of {size} bytes, over the {MAX_ARGUMENTS_BYTES} bytes a tool takes"
    return None


def _sdk() -> tuple[Any, Any, Any]:
    """(server class, ToolError, ToolAnnotations) of the installed MCP SDK, 2.x or 1.x."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:  # mcp 1.x (mypy checks against 2.x, whose mcp.server.fastmcp is an empty stub)
        from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef, attr-defined]
        from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
    from mcp.types import ToolAnnotations

    return Server, ToolError, ToolAnnotations


FIND_TECHNIQUES = (
    "Find pages of every type (techniques, algorithms, kernels, patterns, skills, pitfalls, hardware, "
    "...) that apply to a GPU architecture, optionally narrowed to pages having all the given tags, "
    "to one operation and to pages containing every word of `text`. The page whose tags and "
    "operations match best comes first (tagged with the op, applying to fewest other ops), then the "
    "best evidence (verified, measured, source-reported, spec). Each hit has its summary and the "
    "claims that match `text` (or its first measured ones), with claimed and measured figures."
)
SEARCH_PAGES = (
    "Search the wiki. `text` is full-text over titles, summaries, tags, page types, claims and bodies "
    "(every word must occur; pages naming more of the words in their title, summary or tags first, "
    "then by relevance); the other filters narrow the results and all combine with AND. Without "
    "`text`, results are sorted by id. Each hit has its summary and the claims that match `text`, "
    "with claimed and measured figures; `total` says how many pages matched before `limit`."
)
GET_PAGE = (
    "Read one page: its front matter (architectures, tags, ops, sources, artifacts, ...), its claim ids "
    "and its Markdown body without kwiki's generated tables (include_body=false leaves it out). The "
    "claims' figures, verdicts and runs are in get_measurements, the ladders in get_ladder."
)
GET_MEASUREMENTS = (
    "The numbers of one page: its effective evidence level, the GPU and date of the latest "
    "`kwiki verify` run, and each claim with claimed figure, measured figure (absent if never "
    "measured), verdict and the run it comes from; `runs` gives each run's provenance once "
    "(GPU, driver, CUDA, date, commit)."
)
GET_LADDER = (
    "The ladders of a page's benchmark artifacts as data, from the latest run on each GPU model: each "
    "variant's rung and what it adds (`variants`, once), and per shape its rows: median time (us), rate "
    "(TB/s or TFLOP/s), ratio to the baseline (e.g. cuBLAS), share of the speed of light, registers, "
    "occupancy (blocks and warps per SM; achieved, where profiled), gates that refused a figure, and "
    "`best: true` on the fastest. Without `shape`, each shape keeps its best, baseline and ceiling rows; "
    "`shape` (e.g. '8192x8192' or '4 GiB') gives every row of the shapes containing it. "
    "detail='full' adds clocks, Nsight Compute bytes and each variant's SASS check."
)
MAX_TOOL_LIST = 12 * 1024  # bytes of the tool list (tools/list as compact JSON): what an agent's context pays first
LIST_TAGS = "Every tag used in the wiki with the number of pages that have it, most used first."


def build_server(root: Path) -> Any:
    """The MCP server for the wiki at `root`, its tools registered."""
    server_class, tool_error, annotations = _sdk()
    tools = _Tools(root, server_class, tool_error, annotations)
    _search_tools(tools)
    _page_tools(tools)
    tools.server.tool_params = tools.params  # tool -> the parameters it takes (the router skill's test reads it)
    return tools.server


class _Tools:
    """The server and how its tools are registered: read-only, an argument a tool does not take refused (the SDK
    would drop it silently), a KwikiError answered as a tool error that says what was wrong."""

    def __init__(self, root: Path, server_class: Any, tool_error: Any, annotations: Any):
        self.root, self.tool_error = root, tool_error
        self.params: dict[str, list[str]] = {}  # tool -> the arguments it takes
        self.read_only = annotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True,
                                     openWorldHint=False)
        params = self.params

        class StrictServer(server_class):  # type: ignore[misc]  # the SDK's class, chosen at run time
            async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any, **kw: Any) -> Any:
                too_big = oversized(arguments)
                if too_big:  # before the SDK validates or any tool reads them; the value is never echoed back
                    raise tool_error(f"{name}: {too_big}")
                known = params.get(name)
                unknown = sorted(set(arguments or {}) - set(known or []))
                if known is not None and unknown:
                    from kwiki.core.suggest import did_you_mean

                    raise tool_error(f"{name}: unknown argument {unknown[0]!r}{did_you_mean(unknown[0], known)}; "
                                     f"{name} takes: {', '.join(known) or 'no arguments'}")
                return await super().call_tool(name, arguments, *rest, **kw)

            async def list_tools(self, *rest: Any, **kw: Any) -> Any:
                return [_trimmed(tool) for tool in await super().list_tools(*rest, **kw)]

        self.server = StrictServer("kwiki", instructions=INSTRUCTIONS)

    def tool(self, name: str, description: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a read-only tool, remembering its parameters (unknown arguments are refused)."""
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            import inspect

            self.params[name] = list(inspect.signature(fn).parameters)
            registered: Callable[..., Any] = self.server.tool(name=name, annotations=self.read_only,
                                                              description=description)(fn)
            return registered

        return register

    def indexed(self, fn: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """`fn` over the index, brought up to date first."""
        from kwiki.agents.index import with_index

        return self.guarded(lambda: with_index(self.root, fn))

    def guarded(self, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return fn()
        except KwikiError as exc:  # a usage problem or an unknown id: tell the agent what was wrong
            raise self.tool_error(str(exc)) from None


# each tool's output model and the schema file (`kwiki schema`) that describes every field of it
OUTPUTS: dict[str, tuple[Any, str]] = {
    "find_techniques": (QueryOutput, "query.schema.json"),
    "search_pages": (QueryOutput, "query.schema.json"),
    "get_page": (PageOutput, "mcp-page.schema.json"),
    "get_measurements": (MeasurementsOutput, "measurements.schema.json"),
    "get_ladder": (LadderOutput, "ladder.schema.json"),
    "list_tags": (TagsOutput, "tags.schema.json"),
}


def _trimmed(tool: Any) -> Any:
    """A tool as the tool list sends it: input schema without titles, output schema trimmed and referenced
    (kwiki.agents.toolschema), so the list stays within MAX_TOOL_LIST bytes."""
    from kwiki.agents.toolschema import slim_input, trimmed

    fields = type(tool).model_fields
    inputs, outputs = (("input_schema", "output_schema") if "output_schema" in fields
                       else ("inputSchema", "outputSchema"))
    update: dict[str, Any] = {inputs: slim_input(getattr(tool, inputs))}
    if tool.name in OUTPUTS:
        update[outputs] = trimmed(*OUTPUTS[tool.name])
    return tool.model_copy(update=update)


def _search_tools(tools: _Tools) -> None:
    """find_techniques and search_pages: `kwiki query` for agents."""
    from kwiki.agents.query import TOOL_NAMES, Query, search_conn

    def search(q: Query) -> Any:
        return reply(QueryOutput, tools.indexed(lambda conn: search_conn(conn, q)))

    @tools.tool("find_techniques", FIND_TECHNIQUES)
    def find_techniques(arch: Arch, tags: Tags = None, op: Op = None, text: Text = None, detail: Detail = "brief",
                        limit: Limit = 10) -> QueryOutput:
        q = Query(tags=tags or [], arch=arch, op=op, text=text, best_first=True, by_match=True, limit=limit,
                  detail=detail, names=TOOL_NAMES, coverage=True)
        return search(q)  # type: ignore[no-any-return]  # a CallToolResult holding a QueryOutput

    @tools.tool("search_pages", SEARCH_PAGES)
    def search_pages(
        text: Text = None,
        tags: Tags = None,
        match_any_tag: Annotated[bool, Field(description="true: a page needs only one of `tags`")] = False,
        arch: Annotated[
            str | None, Field(description="GPU architecture the page's code must run on, e.g. 'sm_90'")
        ] = None,
        type: Annotated[
            str | None,
            Field(description="page type: technique, algorithm, kernel, pattern, skill, hardware, pitfalls, api, "
                              "concept, guide, reference"),
        ] = None,
        evidence: Evidence = None,
        op: Op = None,
        verified_on: Annotated[
            str | None, Field(description="part of a GPU name the page was verified on, e.g. 'H200'")
        ] = None,
        detail: Detail = "brief",
        limit: Limit = 10,
    ) -> QueryOutput:
        q = Query(
            tags=tags or [], any_tag=match_any_tag, arch=arch, type=type, evidence=evidence,
            op=op, text=text, verified_on=verified_on, limit=limit, detail=detail, names=TOOL_NAMES, coverage=True,
        )
        return search(q)  # type: ignore[no-any-return]


def _page_tools(tools: _Tools) -> None:
    """get_page, get_measurements, get_ladder and list_tags: `kwiki show` and `kwiki tags` for agents."""
    from kwiki.agents.index import page_detail
    from kwiki.agents.query import tags_conn

    @tools.tool("get_page", GET_PAGE)
    def get_page(
        id: PageId,
        include_body: Annotated[bool, Field(description="include the Markdown body")] = True,
    ) -> PageOutput:
        from kwiki.agents.views import page_view

        doc = page_view(tools.indexed(lambda conn: page_detail(conn, id, body=include_body)))
        return reply(PageOutput, doc)  # type: ignore[no-any-return]

    @tools.tool("get_measurements", GET_MEASUREMENTS)
    def get_measurements(id: PageId) -> MeasurementsOutput:
        doc = measurements_view(tools.indexed(lambda conn: page_detail(conn, id, body=False)))
        return reply(MeasurementsOutput, doc)  # type: ignore[no-any-return]

    @tools.tool("get_ladder", GET_LADDER)
    def get_ladder(
        id: PageId,
        shape: Annotated[str | None, Field(description="every row of the shapes whose label contains this, e.g. "
                                                       "'16384x16384' or '4 GiB'")] = None,
        detail: Annotated[str, Field(description="'brief' (default) or 'full' (clocks, Nsight Compute bytes, "
                                                 "SASS checks)")] = "brief",
    ) -> LadderOutput:
        from kwiki.agents.show import page_ladders

        doc = tools.guarded(lambda: page_ladders(tools.root, id, shape, detail))
        return reply(LadderOutput, doc)  # type: ignore[no-any-return]

    @tools.tool("list_tags", LIST_TAGS)
    def list_tags() -> TagsOutput:
        return reply(TagsOutput, tools.indexed(tags_conn))  # type: ignore[no-any-return]


def reply(model: Any, doc: dict[str, Any]) -> Any:
    """A tool's answer: `doc` checked against its output model, sent compact (no nulls, no defaults, no
    indentation) as both the text an agent reads and the structured content (the SDK would indent the
    text and fill every null in)."""
    from mcp.types import CallToolResult

    data = model.model_validate(doc).model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return CallToolResult.model_validate({"content": [{"type": "text", "text": text}], "structuredContent": data})
