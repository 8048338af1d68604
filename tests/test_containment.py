"""The containment rule (kwiki.core.paths) as every command applies it: nothing outside the
repository is read, built, run or published, and no build empties one of the repository's folders.

Each test is an attack from issue 14 replayed on a fixture project (tests/fixtures/containment):
`project/` is the repository, `outside/` a folder beside it that no command may touch.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.core.paths import inside, links_out, within
from kwiki.wiki.check import check

FIXTURE = Path(__file__).parent / "fixtures" / "containment"
SECRET = "KWIKI-OUTSIDE-SECRET"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The fixture project at tmp/repo, with the outside folder at tmp/outside."""
    shutil.copytree(FIXTURE / "project", tmp_path / "repo")
    shutil.copytree(FIXTURE / "outside", tmp_path / "outside")
    return tmp_path / "repo"


def only_pages(repo: Path, *keep: str) -> None:
    for page in (repo / "wiki").glob("*.md"):
        if page.stem not in keep:
            page.unlink()


def tree(directory: Path) -> dict[str, str]:
    """Every file under `directory` (links not followed) with the hash of its bytes or its link target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(directory).as_posix()
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def site_text(site: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(site.rglob("*")) if p.is_file())


def verify_json(capsys, repo: Path, *argv: str) -> tuple[int, dict, str]:
    code = main(["verify", "--root", str(repo), "--quiet", "--json", "--no-write", *argv])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


# ---------------------------------------------------------------- the rule


def test_within_resolves_links(tmp_path: Path):
    (tmp_path / "repo" / "in").mkdir(parents=True)
    (tmp_path / "secret").write_text("x", encoding="utf-8")
    (tmp_path / "repo" / "out").symlink_to(tmp_path / "secret")
    (tmp_path / "repo" / "ok").symlink_to(tmp_path / "repo" / "in")
    assert within(tmp_path / "repo", tmp_path / "repo" / "ok")
    assert not within(tmp_path / "repo", tmp_path / "repo" / "out")
    assert not within(tmp_path / "repo", tmp_path / "repo" / "missing")
    assert links_out(tmp_path / "repo", tmp_path / "repo") == [tmp_path / "repo" / "out"]


def test_inside_may_accept_a_missing_path_but_never_an_escaping_one(tmp_path: Path):
    assert inside(tmp_path, "not/yet", must_exist=False) is None
    assert "absolute" in inside(tmp_path, "/", must_exist=False)
    assert "leaves the repository" in inside(tmp_path, "a/../../b", must_exist=False)
    assert "not a valid file name" in inside(tmp_path, "a\0b", must_exist=False)


# ---------------------------------------------------------------- verify: never build or run what lies outside


def test_verify_compile_only_does_not_build_an_artifact_outside(repo: Path, capsys):
    code, report, err = verify_json(capsys, repo, "--compile-only", "escape", "inside")
    assert not (repo.parent / "outside" / "evil_host" / "BUILT").exists()
    assert (repo / "artifacts" / "inside_host" / "BUILT").exists()  # the neighbour inside is built
    assert [b["artifact"] for b in report["builds"]] == ["inside_host"]
    assert code == 1 and "internal error" not in err
    problem = next(p for p in report["problems"] if p["field"] == "artifacts.x")
    assert problem["path"] == "wiki/escape.md" and problem["line"] == 7
    assert "leaves the repository" in problem["message"]
    claim = next(c for c in report["claims"] if c["claim"] == "escape-time")
    assert claim["verdict"] == "error" and "leaves the repository" in claim["detail"]


def test_verify_does_not_build_or_run_an_artifact_outside(repo: Path, capsys):
    code, report, _ = verify_json(capsys, repo, "escape")
    assert not (repo.parent / "outside" / "evil_host" / "BUILT").exists()
    assert report["builds"] == [] and report["runs"] == []
    assert [(p["path"], p["field"]) for p in report["problems"]] == [("wiki/escape.md", "artifacts.x")]
    assert code == 1


def test_verify_refuses_an_absolute_artifact_path_without_an_internal_error(repo: Path, capsys):
    only_pages(repo)
    outside = repo.parent / "outside"
    page = (FIXTURE / "templates" / "absolute.md").read_text(encoding="utf-8")
    (repo / "wiki" / "absolute.md").write_text(page.replace("@OUTSIDE@", str(outside)), encoding="utf-8")
    code, report, err = verify_json(capsys, repo, "--compile-only")
    assert "internal error" not in err and code == 1
    assert not (outside / "evil_host" / "BUILT").exists()
    assert report["builds"] == []
    assert [(p["path"], p["field"]) for p in report["problems"]] == [("wiki/absolute.md", "artifacts.x")]
    assert "is an absolute path" in report["problems"][0]["message"]


def test_verify_refuses_a_symlinked_artifact_directory_leading_out(repo: Path, capsys):
    only_pages(repo, "escape")
    (repo / "artifacts" / "evil_host").symlink_to(repo.parent / "outside" / "evil_host", target_is_directory=True)
    page = repo / "wiki" / "escape.md"
    page.write_text(page.read_text(encoding="utf-8").replace("../outside/evil_host", "artifacts/evil_host"),
                    encoding="utf-8")
    code, report, _ = verify_json(capsys, repo, "--compile-only")
    assert not (repo.parent / "outside" / "evil_host" / "BUILT").exists()
    assert report["builds"] == [] and code == 1
    assert "link that leads out of the repository" in report["problems"][0]["message"]


def test_verify_refuses_a_manifest_source_linked_out(repo: Path, capsys):
    only_pages(repo, "inside")
    script = repo / "artifacts" / "inside_host" / "build.sh"
    script.unlink()
    script.symlink_to(repo.parent / "outside" / "evil_host" / "build.sh")
    code, report, _ = verify_json(capsys, repo, "--compile-only")
    assert report["builds"] == [] and code == 1
    assert not (repo / "artifacts" / "inside_host" / "BUILT").exists()
    assert "'build.sh' is a link that leads out of the repository" in report["problems"][0]["message"]


def test_a_manifest_that_is_a_link_out_is_not_read(repo: Path):
    from kwiki.core.errors import ManifestError
    from kwiki.wiki.manifest import load_manifest

    directory = repo / "artifacts" / "evil_host"
    directory.mkdir()
    (directory / "build.sh").write_text("exit 1\n", encoding="utf-8")
    (directory / "artifact.yaml").symlink_to(repo.parent / "outside" / "evil_host" / "artifact.yaml")
    with pytest.raises(ManifestError, match="outside the repository"):
        load_manifest(directory, repo)


def test_artifact_hash_does_not_read_a_link_out(repo: Path):
    from kwiki.verify.build import artifact_hash

    directory = repo / "artifacts" / "inside_host"
    before = artifact_hash(directory, repo)
    (directory / "notes.txt").symlink_to(repo.parent / "outside" / "secret.txt")
    assert artifact_hash(directory, repo) == before


def test_the_index_does_not_read_a_page_replaced_by_a_link_out(repo: Path):
    """The index's fast path (front matter unchanged, body re-read) must not follow a link out either."""
    from kwiki.agents.query import Query, search

    only_pages(repo, "inside")
    page = repo / "wiki" / "inside.md"
    assert [r["id"] for r in search(repo, Query(limit=0, text="neighbour"))["results"]] == ["inside"]
    copy = repo.parent / "outside" / "inside.md"
    copy.write_text(page.read_text(encoding="utf-8") + "\nKwikiOutsideSecret\n", encoding="utf-8")
    page.unlink()
    page.symlink_to(copy)
    assert search(repo, Query(limit=0, text="KwikiOutsideSecret"))["results"] == []


# ---------------------------------------------------------------- the site: never publish what lies outside


def test_build_does_not_publish_host_files_named_by_a_page(repo: Path):
    """The issue's reproduction: `artifacts: {env: /proc/self/environ, pw: /etc/passwd}`, built by the CLI."""
    only_pages(repo, "host-files", "inside")
    token = "kwiki-secret-" + hashlib.sha256(str(repo).encode()).hexdigest()[:12]
    env = {**os.environ, "KWIKI_SECRET_TEST": token}
    done = subprocess.run([sys.executable, "-m", "kwiki.cli", "build", "--root", str(repo)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1  # strict: `kwiki check` fails the page, so the build does (issue 40)
    assert "wiki/host-files.md:8: artifacts.pw: '/etc/passwd' is an absolute path" in done.stderr
    assert not (repo / "site").exists()
    done = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from kwiki.site.stage import "
                           "build_site; build_site(Path(sys.argv[1]), Path(sys.argv[1]) / 'site', strict=False)",
                           str(repo)], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr  # as `kwiki serve` builds: the rest is published
    text = site_text(repo / "site")
    assert token not in text
    passwd = Path("/etc/passwd").read_text(encoding="utf-8", errors="replace").splitlines()
    assert not any(line in text for line in passwd if line.strip())
    page = (repo / "site" / "host-files" / "index.html").read_text(encoding="utf-8")
    assert "is an absolute path" in page  # the reader is told why


def test_build_does_not_publish_a_link_out_under_wiki(repo: Path, capsys):
    only_pages(repo, "inside")
    outside = repo.parent / "outside"
    (repo / "wiki" / "leak.txt").symlink_to(outside / "secret.txt")
    assert main(["build", "--root", str(repo)]) == 1  # strict: refused, with the reason
    assert "wiki/leak.txt' is a link that leads out of the repository" in capsys.readouterr().err
    (repo / "wiki" / "leak.md").symlink_to(outside / "secret.md")
    assert {(p.path, p.message.split(";")[0]) for p in check(repo).errors} == {
        ("wiki/leak.md", "a link that leads out of the repository"),
        ("wiki/leak.txt", "'wiki/leak.txt' is a link that leads out of the repository"),
    }
    assert main(["build", "--root", str(repo)]) == 1  # strict: refused
    assert not (repo / "site").exists() or SECRET not in site_text(repo / "site")
    from kwiki.site.stage import build_site

    build_site(repo, repo / "site", strict=False)  # as `kwiki serve` builds: the rest is published
    assert (repo / "site" / "inside" / "index.html").is_file()
    assert SECRET not in site_text(repo / "site")


def test_build_does_not_publish_a_link_out_in_an_artifact_directory(repo: Path):
    """A folder's listing, a named file and a manifest's build script, each a link to the outside."""
    only_pages(repo, "inside")
    script = repo / "artifacts" / "inside_host" / "build.sh"
    script.unlink()
    script.symlink_to(repo.parent / "outside" / "secret.txt")
    (repo / "artifacts" / "plain").mkdir()
    (repo / "artifacts" / "plain" / "kernel.cu").write_text("// in the repository\n", encoding="utf-8")
    (repo / "artifacts" / "plain" / "leak.txt").symlink_to(repo.parent / "outside" / "secret.txt")
    page = repo / "wiki" / "inside.md"
    page.write_text(page.read_text(encoding="utf-8").replace(
        "  ok: artifacts/inside_host\n", "  ok: artifacts/inside_host\n  plain: artifacts/plain\n"
        "  leak: artifacts/plain/leak.txt\n"), encoding="utf-8")
    assert main(["build", "--root", str(repo)]) == 1  # strict: `kwiki check` names both links
    from kwiki.site.stage import build_site

    build_site(repo, repo / "site", strict=False)  # as `kwiki serve` builds: the rest is published
    text = site_text(repo / "site")
    assert "// in the repository" in text and SECRET not in text
    assert "build: 'build.sh' is a link that leads out of the repository" in html.unescape(text)  # shown why


# ---------------------------------------------------------------- the site directory


@pytest.mark.parametrize("site_dir", ["artifacts", "results", "wiki", ".", "wiki/out", "..", ".kwiki"])
def test_build_refuses_a_site_dir_that_would_empty_a_folder_of_the_repository(repo: Path, capsys, site_dir):
    (repo / "results").mkdir()
    (repo / "results" / "nvidia-h200.jsonl").write_text("{}\n", encoding="utf-8")
    before = tree(repo.parent)
    assert main(["build", "--root", str(repo), "--site-dir", site_dir]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kwiki build: output directory ") and "empties its output directory" in err
    assert len(err.strip().splitlines()) == 1
    assert tree(repo.parent) == before  # nothing written, nothing deleted


def test_build_refuses_a_site_dir_whose_parent_is_missing(repo: Path, capsys):
    assert main(["build", "--root", str(repo), "--site-dir", str(repo.parent / "no" / "such" / "site")]) == 2
    err = capsys.readouterr().err
    assert "parent directory" in err and "does not exist" in err and "internal error" not in err
    assert not (repo.parent / "no").exists()


def test_build_refuses_a_folder_it_did_not_write(repo: Path, capsys):
    other = repo.parent / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine\n", encoding="utf-8")
    assert main(["build", "--root", str(repo), "--site-dir", str(other)]) == 2
    assert "no kwiki build wrote" in capsys.readouterr().err
    assert (other / "keep.txt").read_text(encoding="utf-8") == "mine\n"


def test_build_rebuilds_its_own_site_dir_even_after_a_failed_build(repo: Path):
    only_pages(repo, "inside")
    page = repo / "wiki" / "inside.md"
    good = page.read_text(encoding="utf-8")
    page.write_text(good + '\n<img src="https://example.com/x.png">\n', encoding="utf-8")
    assert main(["build", "--root", str(repo), "--site-dir", "public"]) == 1  # MkDocs wrote, then strict failed
    assert any((repo / "public").iterdir()) and not (repo / "public" / "llms.txt").exists()
    page.write_text(good, encoding="utf-8")
    assert main(["build", "--root", str(repo), "--site-dir", "public"]) == 0
    assert (repo / "public" / "inside" / "index.html").is_file()
