"""Bring what several GPU-machine calls wrote (their `written.tgz`, from bench/gpu_pages.sh) into this checkout.

Each call of the device tool runs on a fresh copy of this working tree, so the archive of a later call holds the
results stores as they were here plus that call's lines only, and the pages it did not write as they were here.
Extracting the archives one after another therefore throws away what the earlier calls wrote. This merges them
against HEAD instead:

    python3 bench/merge_written.py CALL1/written.tgz CALL2/written.tgz ...

- an append-only store under results/ (`*.jsonl`: the runs, the audits): every archive's copy must start with the
  file as committed at HEAD (else it was not made from this commit: refused); what follows is appended here, in
  the order of the arguments (a later audit line replaces an earlier one, as when they were written in turn);
  A call's `kwiki verify` may have summarised a store that grew past its bound (kwiki.results.summary): its copy
  then does not start with HEAD's. It is accepted when it holds every claim row and every run of HEAD's, each
  whole or under its series' summary row (`summarised_from`), and what is appended from it is its new runs: the
  lines of the runs HEAD does not hold. Several calls may each have summarised it; a store so merged is then
  summarised here, as `kwiki verify` would have done after the last call's run;
- results/audits/ (kwiki.results.keyed: a later audit replaces the line of the same record, so a call's copy
  need not start with HEAD's): HEAD's lines less those any call replaced, then each call's new lines in turn (a
  reader keeps the last line of each record);
- results/timelines/ (a later trace replaces an earlier one, kwiki.results.timelines): the last archive's copy;
- any other file (a page, a generated file): taken from the archive that changed it against HEAD; two archives
  that changed it differently are a conflict (refused, nothing written), unless `--last-wins`: then the last
  archive's copy, which was judged over HEAD's runs and its own only (each call saw a fresh copy of HEAD), so the
  page says fewer runs than the store then holds until the next `kwiki verify` of it re-judges over all of them.

Nothing is written unless every archive merges; wiki/ and results/ must have no uncommitted change here.
Run `kwiki check` afterwards.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEPT = ("wiki/", "results/")


class MergeError(Exception):
    """An archive that cannot be merged: the message names it and the file."""


def committed(root: Path, rel: str) -> bytes | None:
    """The file as committed at HEAD (None: not in HEAD)."""
    done = subprocess.run(["git", "-C", str(root), "show", f"HEAD:{rel}"], capture_output=True, check=False)
    return done.stdout if done.returncode == 0 else None


def members(archive: Path) -> dict[str, bytes]:
    """Regular files of wiki/ and results/ in one archive, by path."""
    out = {}
    try:
        with tarfile.open(archive) as tar:
            for m in tar.getmembers():
                name = m.name.removeprefix("./")
                if not m.isfile() or not name.startswith(KEPT) or ".." in Path(name).parts:
                    continue
                f = tar.extractfile(m)
                if f is not None:
                    out[name] = f.read()
    except (OSError, tarfile.TarError) as e:
        raise MergeError(f"{archive}: not a readable archive ({e})") from e
    return out


def is_store(rel: str) -> bool:
    return rel.startswith("results/") and rel.endswith(".jsonl") and not is_replaced(rel) and not is_keyed(rel)


def is_keyed(rel: str) -> bool:
    """A store whose later line replaces the earlier one of the same record (the audits, kwiki.results.keyed)."""
    return rel.startswith("results/audits/") and rel.endswith(".jsonl")


def is_replaced(rel: str) -> bool:
    """A file whose newer copy replaces the older (the traces of a later run)."""
    return rel.startswith("results/timelines/")


def summarised_from(base: bytes, data: bytes) -> bool:
    """`data` is `base` summarised (and perhaps appended to): every line of base that is not a record row of a
    run `data` no longer holds whole is in `data` (less its mechanism evidence, which summarising keeps on a run's
    first row of each variant: kwiki.results.summary.identity), and each such run's records are stood for by a
    summary row of their artifact (its run id `summary:<artifact>:<series>`; rows written before series: `none`)."""
    from kwiki.results.summary import identity

    def rows(text: bytes) -> list[dict[str, Any]]:
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                return []
        return out

    old, new = rows(base), rows(data)
    if not old or not new:
        return False
    lines = {identity(d) for d in new}
    runs = {(d.get("run_id"), d.get("artifact")) for d in new if d.get("kind") == "record"}  # a run: artifacts
    summaries = {d["run_id"] for d in new if str(d.get("run_id", "")).startswith("summary:")}
    for d in old:
        run = d.get("run_id")
        if identity(d) in lines or str(run).startswith("summary:"):
            continue  # kept, or an older summary folded into a newer one
        if d.get("kind") == "commit" or (d.get("kind") == "record" and (run, d.get("artifact")) not in runs):
            if f"summary:{d.get('artifact')}:{d.get('series') or 'none'}" in summaries or d.get("kind") == "commit":
                continue
        return False
    return True


def run_ids(text: bytes) -> set[str]:
    """The run ids of a store's lines (summary rows and unreadable lines left out)."""
    out = set()
    for line in text.splitlines():
        try:
            run = json.loads(line).get("run_id")
        except (ValueError, AttributeError):
            continue
        if isinstance(run, str) and not run.startswith("summary:"):
            out.add(run)
    return out


def new_runs(base: bytes, data: bytes) -> bytes:
    """The rows of `data` (a call's summarised copy of the store `base`) that belong to runs `base` does not hold,
    then one commit line that counts those that need one (kwiki.results.storelines): the summary may have committed
    them together with the rows it kept, in a commit line of its own."""
    from kwiki.results.store import commit_line
    from kwiki.results.storelines import needs_commit

    old = run_ids(base)
    out, committing, runs = [], 0, set()
    for line in data.splitlines():
        try:
            row = json.loads(line)
            run = row.get("run_id")
        except (ValueError, AttributeError):
            continue
        if row.get("kind") == "commit" or not isinstance(run, str) or run.startswith("summary:") or run in old:
            continue
        out.append(line + b"\n")
        if needs_commit(row):
            committing += 1
            runs.add(run)
    return b"".join(out) + (commit_line(committing, runs) if committing else b"")


def merge(root: Path, archives: list[Path], last_wins: bool = False) -> tuple[dict[str, bytes], set[str]]:
    """(path -> new content, for every file the archives changed against HEAD; the stores a call summarised, which
    main() summarises again once the merged lines are in)."""
    appended: dict[str, bytes] = {}
    keyed: dict[str, tuple[set[bytes], list[bytes]]] = {}  # a keyed store: HEAD's lines replaced, lines added
    summarised: set[str] = set()  # a store some call summarised: summarised again here after the merge
    replaced: dict[str, tuple[bytes, Path]] = {}
    bases: dict[str, bytes | None] = {}  # each file as committed, read once for all the archives
    for archive in archives:
        for rel, data in sorted(members(archive).items()):
            base = bases[rel] if rel in bases else bases.setdefault(rel, committed(root, rel))
            if is_keyed(rel):
                old, new = set((base or b"").splitlines()), data.splitlines()
                dropped, added = keyed.setdefault(rel, (set(), []))
                dropped.update(old - set(new))
                added.extend(line for line in new if line not in old and line not in added)
            elif is_store(rel):
                base = base or b""
                if data.startswith(base):
                    appended[rel] = appended.get(rel, b"") + data[len(base):]
                elif summarised_from(base, data):
                    appended[rel] = appended.get(rel, b"") + new_runs(base, data)
                    summarised.add(rel)
                else:
                    raise MergeError(f"{archive}: {rel} does not start with the file committed at HEAD, nor is it "
                                     "that file summarised (was the call made from another commit?)")
            elif data != base:
                if rel in replaced and replaced[rel][0] != data and not (last_wins or is_replaced(rel)):
                    raise MergeError(f"{archive}: {rel} was also changed, differently, by {replaced[rel][1]}")
                replaced[rel] = (data, archive)
    out: dict[str, bytes] = {}
    for rel, (dropped, added) in keyed.items():
        head = (bases[rel] or b"").splitlines()
        lines = [line for line in head if line not in dropped] + added
        if lines != head:
            out[rel] = b"".join(line + b"\n" for line in lines)
    out.update({rel: (bases[rel] or b"") + extra for rel, extra in appended.items() if extra or rel in summarised})
    out.update({rel: data for rel, (data, _) in replaced.items()})
    return out, summarised


def dirty(root: Path) -> list[str]:
    done = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", *KEPT], capture_output=True,
                          text=True, check=True)
    return [line[3:] for line in done.stdout.splitlines()]


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archives", nargs="+", type=Path, help="written.tgz of each call, in the order they ran")
    parser.add_argument("--last-wins", action="store_true",
                        help="a page several calls wrote: keep the last call's (judged over HEAD's runs and its own)")
    args = parser.parse_args(argv)
    changed = dirty(root)
    if changed:
        print(f"merge_written: wiki/ or results/ has uncommitted changes ({', '.join(changed[:5])}): commit or "
              "restore them first", file=sys.stderr)
        return 2
    try:
        out, summarised = merge(root, args.archives, last_wins=args.last_wins)
    except MergeError as e:
        print(f"merge_written: {e}; nothing written", file=sys.stderr)
        return 2
    for rel, data in sorted(out.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"merge_written: {rel}")
    for rel in sorted(summarised):  # once the pages are in: the runs they name stay whole
        from kwiki.results.summary import summarise_if_large

        done = summarise_if_large(root / rel, root)
        if done is not None:
            print(f"merge_written: {rel} summarised ({done.runs} runs under {done.rows} summary rows)")
    print(f"merge_written: {len(out)} files from {len(args.archives)} archives; now run `kwiki check`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
