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
