"""`kwiki mcp`: the wiki as read-only MCP tools over stdio, for coding agents.

Tools (typed inputs, typed structured outputs, all read-only):

* ``find_techniques(arch, tags, op)``: techniques, algorithms, kernels and patterns that
  apply to a GPU, best evidence first;
* ``search_pages(text, tags, ...)``: every filter of `kwiki query`;
* ``get_page(id)``: front matter, claims with latest measurements, body (`kwiki show`);
* ``get_measurements(id)``: a page's claims with claimed and measured figures, verdicts;
* ``list_tags()``: tags with page counts.

Every call reads the same index as `kwiki query` (kwiki/agents/index.py), refreshed first, so an
edit to a page shows in the next call. Works with the official MCP Python SDK, 1.x
(`FastMCP`) and 2.x (`MCPServer`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from kwiki.agents.outputs import MeasurementsOutput, QueryOutput, ShowOutput, TagsOutput
from kwiki.agents.views import measurements_view
from kwiki.core.errors import KwikiError

TECHNIQUE_TYPES = ["technique", "algorithm", "kernel", "pattern"]

INSTRUCTIONS = """\
KernelWiki: GPU kernel-optimization techniques (CUDA, PTX, CUTLASS/CuTe, Triton) whose
numbers are re-measured by a machine. Each page has an evidence level: spec <
source-reported < measured < verified (verified: `kwiki verify` reproduced every claim
that could run on matching hardware). Claims carry the claimed figure, the latest
measured figure, a verdict (reproduced, better, worse, failed, ...) and the GPU and date.
A page whose measured figures do not trace to the results store (`traceable: false`,
evidence level and state "untraceable") was edited or written by hand: treat none of its
verdicts as verified.

Start with find_techniques(arch="sm_90", tags=[...], op="gemm") or search_pages(text=...);
then get_page(id) for the whole page or get_measurements(id) for its numbers only.
Architectures are GPU targets such as sm_80, sm_90, sm_90a, sm_100a; a query names the
hardware, and matches pages whose code runs on it (sm_90a code runs on sm_90 GPUs such as
the H100/H200; sm_100a code does not). Prefer verified or measured pages; treat
source-reported figures as claims, not facts."""

Arch = Annotated[
    str,
    Field(description="GPU architecture of the target hardware, e.g. 'sm_90' (H100/H200), 'sm_100' (B200), "
                      "'sm_80' (A100)"),
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
PageId = Annotated[
    str,
    Field(description="page id, as in the 'id' of a search result, e.g. 'technique-vectorized-loads'"),
]


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


def build_server(root: Path) -> Any:
    """The MCP server for the wiki at `root`, its tools registered."""
    from kwiki.agents.index import page_detail, with_index
    from kwiki.agents.query import Query, search_conn, tags_conn

    Server, ToolError, ToolAnnotations = _sdk()
    params: dict[str, list[str]] = {}  # tool -> the arguments it takes

    class StrictServer(Server):  # type: ignore[misc, valid-type]  # the SDK's class, chosen at run time
        """Refuses an argument a tool does not take (the SDK would drop it silently)."""

        async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any, **kw: Any) -> Any:
            known = params.get(name)
            unknown = sorted(set(arguments or {}) - set(known or []))
            if known is not None and unknown:
                from kwiki.core.suggest import did_you_mean

                raise ToolError(f"{name}: unknown argument {unknown[0]!r}{did_you_mean(unknown[0], known)}; "
                                f"{name} takes: {', '.join(known) or 'no arguments'}")
            return await super().call_tool(name, arguments, *rest, **kw)

    server = StrictServer("kwiki", instructions=INSTRUCTIONS)

    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

    def tool(name: str, description: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a read-only tool, remembering its parameters (unknown arguments are refused)."""
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            import inspect

            params[name] = list(inspect.signature(fn).parameters)
            registered: Callable[..., Any] = server.tool(name=name, annotations=read_only, description=description)(fn)
            return registered

        return register

    def search(q: Query) -> QueryOutput:
        return QueryOutput.model_validate(run(lambda conn: search_conn(conn, q)))

    def run(fn: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        try:
            return with_index(root, fn)
        except KwikiError as exc:  # a usage problem or an unknown id: tell the agent what was wrong
            raise ToolError(str(exc)) from None

    @tool(
        "find_techniques",
        (
            "Find techniques, algorithms, kernels and patterns that apply to a GPU architecture, "
            "optionally narrowed to pages having all the given tags and to one operation. Results come "
            "best evidence first (verified, measured, source-reported, spec), then by id; each has its "
            "summary and its claims with claimed and measured figures. Use get_page(id) to read one."
        ),
    )
    def find_techniques(arch: Arch, tags: Tags = None, op: Op = None, limit: Limit = 20) -> QueryOutput:
        q = Query(tags=tags or [], arch=arch, op=op, types=TECHNIQUE_TYPES, best_first=True, limit=limit)
        return search(q)

    @tool(
        "search_pages",
        (
            "Search the wiki. `text` is full-text over titles, summaries, tags and bodies (every word must "
            "occur; ranked by relevance, title matches first); the other filters narrow the results and all "
            "combine with AND. Without `text`, results are sorted by id. `total` says how many pages matched "
            "before `limit`."
        ),
    )
    def search_pages(
        text: Annotated[str | None, Field(description="words to search for, e.g. 'tma multicast cluster'")] = None,
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
        limit: Limit = 20,
    ) -> QueryOutput:
        q = Query(
            tags=tags or [], any_tag=match_any_tag, arch=arch, type=type, evidence=evidence,
            op=op, text=text, verified_on=verified_on, limit=limit,
        )
        return search(q)

    @tool(
        "get_page",
        (
            "Read one page: its front matter (title, type, architectures, tags, sources, artifacts, ...), "
            "its claims each with the claimed figure, the latest measured figure, the verdict, GPU and date, "
            "and its Markdown body (leave out with include_body=false)."
        ),
    )
    def get_page(
        id: PageId,
        include_body: Annotated[bool, Field(description="include the Markdown body")] = True,
    ) -> ShowOutput:
        return ShowOutput.model_validate(run(lambda conn: page_detail(conn, id, body=include_body)))

    @tool(
        "get_measurements",
        (
            "The numbers of one page: its effective evidence level, the GPU and date of the latest "
            "`kwiki verify` run, and each claim with claimed figure, measured figure (null if never "
            "measured), verdict and provenance (GPU, driver, CUDA, commit)."
        ),
    )
    def get_measurements(id: PageId) -> MeasurementsOutput:
        return MeasurementsOutput.model_validate(measurements_view(run(lambda conn: page_detail(conn, id, body=False))))

    @tool("list_tags", "Every tag used in the wiki with the number of pages that have it, most used first.")
    def list_tags() -> TagsOutput:
        return TagsOutput.model_validate(run(tags_conn))

    return server
