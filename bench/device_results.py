"""Bring back what `kwiki verify` wrote on the GPU machine without clobbering local edits.

    python3 bench/device_results.py snapshot            # before the device run: hash wiki/ and results/
    python3 bench/device_results.py apply written.tgz   # after: take each file the run changed,
                                                        # unless it was also edited here meanwhile
"""

from __future__ import annotations

import hashlib
import json
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / ".kwiki" / "device-snapshot.json"
TRACKED = ("wiki", "results")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot() -> dict[str, str]:
    out = {}
    for top in TRACKED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file():
                out[path.relative_to(ROOT).as_posix()] = digest(path.read_bytes())
    return out


def apply(tarball: Path) -> int:
    before = json.loads(SNAPSHOT.read_text())
    taken, kept = [], []
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("./")
            if not member.isfile() or not name.startswith(tuple(t + "/" for t in TRACKED)):
                continue
            data = tar.extractfile(member).read()
            local = ROOT / name
            now = digest(local.read_bytes()) if local.exists() else None
            if now == digest(data):
                continue
            if now != before.get(name):
                kept.append(name)  # edited here during the run: keep ours, report it
                continue
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(data)
            taken.append(name)
    for name in taken:
        print(f"took   {name}")
    for name in kept:
        print(f"KEPT local edit of {name} (the device run also wrote it)")
    return 1 if kept else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["snapshot"]:
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(snapshot(), indent=1))
        return 0
    if len(argv) == 2 and argv[0] == "apply":
        return apply(Path(argv[1]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
