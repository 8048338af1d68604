"""Drafts: pages that are not ready to be read, left out of everything kwiki publishes.

A page is a draft while its front matter says `status: draft`, or while its summary still holds the
placeholder text `kwiki new` writes (an author who set another status but never wrote the summary).
The site (pages, listings, llms.txt, index.json), the query index (so `query`, `show`, the MCP tools
and the skills export) leave drafts out; `kwiki check --strict` warns about each, naming why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kwiki.wiki.model import PageMeta

PLACEHOLDER = "(Written by kwiki new; replace it.)"  # in kwiki.wiki.skeletons.PAGE_TEMPLATE's summary


def draft_reason(meta: PageMeta) -> str | None:
    """Why the page is a draft ('status: draft', or the placeholder summary), or None when it is not one."""
    if meta.status == "draft":
        return "its status is draft"
    if meta.summary is not None and PLACEHOLDER in " ".join(meta.summary.split()):
        return f"its summary still holds kwiki new's placeholder text {PLACEHOLDER!r}"
    return None


def is_draft(meta: PageMeta) -> bool:
    """Whether the page is left out of the site, the query index, MCP and the skills export."""
    return draft_reason(meta) is not None
