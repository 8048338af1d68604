"""The site's listings stay bounded as the wiki grows: evidence and architectures indexes show a few pages per
group and page the rest, the tags index is split by tag, and a folder's navigation is grouped."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import yaml

from kwiki.site import listings, tagpages
from kwiki.site.stage import generate

GEN = Path(__file__).resolve().parent.parent / "bench" / "gen_wiki.py"
LINK = re.compile(r"\]\(([^)]+\.md)\)")


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("gen_wiki", GEN)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_wiki", module)
    spec.loader.exec_module(module)
    root = tmp_path_factory.mktemp("wiki")
    module.generate(root, 160, seed=1, measured=0.75, store=True)
    files, pages, _ = generate(root, strict=True, key="0" * 32)
    return {k: v.decode() for k, v in files.items()}, pages


def _pages_linked(text: str) -> list[str]:
    return [m for m in LINK.findall(text) if not m.startswith(("../indexes", "evidence/", "architectures/"))]


def test_evidence_index_shows_a_few_per_state_and_pages_list_every_page_once(staged):
    files, _ = staged
    index = files[listings.EVIDENCE]
    sections = re.split(r"^## ", index, flags=re.M)[1:]
    assert sections and all(s.count("\n| [") <= listings.PREVIEW_ROWS for s in sections)
    paged = {k: v for k, v in files.items() if k.startswith(listings.EVIDENCE_DIR + "/")}
    assert paged, "160 pages: some state holds more than the index shows"
    for text in paged.values():
        assert text.count("\n| [") <= listings.PAGE_ROWS
        assert "search:\n  exclude: true" in text
    listed = [link for text in paged.values() for link in _pages_linked(text)]
    assert len(listed) == len(set(listed))
    big = [s for s in sections if "[All " in s]
    assert len(listed) == sum(int(re.match(r".*?\((\d+)\)", s).group(1)) for s in big)


def test_architectures_index_links_each_large_group_paged(staged):
    files, _ = staged
    index = files[listings.ARCHITECTURES]
    for section in re.split(r"^## ", index, flags=re.M)[1:]:
        assert section.count("\n- [") <= listings.PREVIEW_ROWS
        count = int(re.match(r".*?\((\d+)\)", section).group(1))
        assert ("[All " in section) == (count > listings.PREVIEW_ROWS)
    assert any(k.startswith(listings.ARCHITECTURES_DIR + "/") for k in files)


def test_tags_are_split_so_each_tag_has_one_listing(staged):
    files, pages = staged
    tag_files = {k: v for k, v in files.items() if k == listings.TAGS or k.startswith(listings.TAGS_DIR + "/")}
    assert len(tag_files) > 1
    seen: list[str] = []
    for text in tag_files.values():
        args = re.search(r"<!-- material/tags (.*?) -->", text, re.S)
        assert args is not None
        include = yaml.safe_load(args.group(1))["include"]
        links = sum(1 for sp in pages for t in set(tagpages.page_tags(sp)) if t in include)
        assert links <= tagpages.TAG_LINKS or len(include) == 1
        seen += include
    every = {t for sp in pages for t in tagpages.page_tags(sp)}
    assert sorted(seen) == sorted(every)


@pytest.mark.parametrize("tag", ["<script>x</script>", "a-->b", 'say "hi"', "&lt;img src=x onerror=y&gt;", "ünï"])
def test_a_tag_in_a_listing_directive_reads_back_and_cannot_end_the_comment(tag):
    quoted = tagpages._quoted(tag)
    assert ">" not in quoted
    assert yaml.safe_load("{ include: [" + quoted + "] }")["include"] == [tag]


def test_navigation_groups_a_large_folder(staged):
    _, pages = staged

    def sizes(items):
        for item in items:
            if isinstance(item, dict):
                (children,) = item.values()
                yield len(children)
                yield from sizes(children)

    tree = listings.nav(pages)
    assert max(sizes(tree)) <= listings.NAV_ITEMS
    flat = re.findall(r"'([^']+\.md)'", repr(tree))
    indexes = [listings.HOME, listings.EVIDENCE, listings.ARCHITECTURES, listings.TAGS, listings.DECISIONS]
    assert sorted(flat) == sorted([p.rel for p in pages if p.rel != listings.HOME] + indexes)  # each page once
