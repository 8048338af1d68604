"""Atomic writes: a link is never replaced or written through; a killed writer's temporary file
is removed by the next write into its directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kwiki.core.errors import WriteBackError
from kwiki.core.writefile import STALE_S, write_atomic
from kwiki.verify.writeback import write_page

REPO = Path(__file__).resolve().parent.parent
PAGE = (b"---\nid: p\ntitle: P\ntype: technique\n---\n# P\n\n"
        b"<!-- kwiki:claims -->\n<!-- /kwiki:claims -->\n")


def test_write_back_refuses_a_linked_page_and_leaves_link_and_target_alone(tmp_path: Path):
    target = tmp_path / "elsewhere.md"
    target.write_bytes(PAGE)
    link = tmp_path / "wiki" / "p.md"
    link.parent.mkdir()
    link.symlink_to(target)
    with pytest.raises(WriteBackError, match="is a symbolic link"):
        write_page(link, "wiki/p.md", PAGE.decode(), None, {"claims": "T\n"})
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == PAGE


def test_a_link_to_a_file_outside_is_not_replaced(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"keep\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "schema.json").symlink_to(secret)
    with pytest.raises(WriteBackError):
        write_atomic(tmp_path / "out" / "schema.json", b"{}\n")
    assert secret.read_bytes() == b"keep\n" and (tmp_path / "out" / "schema.json").is_symlink()


# a writer that stops for good between writing its temporary file and renaming it
STUCK = r"""
import os, sys, time
from pathlib import Path
from kwiki.core import writefile
real = os.fsync
def stuck(fd):
    real(fd)
    print("written", flush=True)
    time.sleep(600)
writefile.os.fsync = stuck
writefile.write_atomic(Path(sys.argv[1]), b"new\n" * 1000)
"""


def test_a_sigkilled_writers_temporary_file_is_removed_by_the_next_write(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_bytes(b"old\n")
    proc = subprocess.Popen([sys.executable, "-c", STUCK, str(page)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stdout.readline() == "written\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    [left] = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert page.read_bytes() == b"old\n"
    old = time.time() - STALE_S - 5
    os.utime(left, (old, old))
    live = tmp_path / f".q.md.kwiki-{os.getppid()}-0000.tmp"  # a writer still running: kept
    live.write_bytes(b"")
    os.utime(live, (old, old))

    write_atomic(tmp_path / "other.md", b"x\n")  # any write into the directory
    assert not left.exists() and live.exists()
    assert {p.name for p in tmp_path.iterdir()} == {live.name, "other.md", "p.md"}
