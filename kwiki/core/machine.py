"""A secret of this machine (or of this checkout on it): what kwiki's caches are sealed with.

A checkout can carry any file under `.kwiki/` (force-added to git, or in an archive); kwiki re-derives
what its caches claim instead of trusting them. Each cache entry it writes carries a seal, an HMAC
of the entry's contents under this secret, so an entry this machine did not write (a prebuilt binary at
the build cache's public key, a forged profile, a planted site key) never matches.

The secret lives in `$KWIKI_MACHINE_KEY` (a file), else in the machine's shared build cache
(`$KWIKI_BUILD_CACHE/machine-key`, so its entries serve every clone), else in `.kwiki/machine-key` of the
checkout (nothing is written outside a clone unless asked; a file git tracks there is refused, see
kwiki.core.tracked, so a clone never starts with one). Created on first use (mode 0600); when it cannot be
written, a secret for this process alone (caches then miss: safe, only slower). Standard library only.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

KEY_ENV = "KWIKI_MACHINE_KEY"
SHARED_CACHE_ENV = "KWIKI_BUILD_CACHE"  # kwiki.verify.build's cache outside the clone
KEY_NAME = "machine-key"


def key_file(root: Path) -> Path:
    """Where the secret of this machine (for checkout `root`) is kept."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV])
    if os.environ.get(SHARED_CACHE_ENV):
        return Path(os.environ[SHARED_CACHE_ENV]) / KEY_NAME
    return root / ".kwiki" / KEY_NAME


@functools.lru_cache(maxsize=4)
def _secret(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
        if re.fullmatch(r"[0-9a-f]{64}", text):
            return bytes.fromhex(text)
    except (OSError, UnicodeDecodeError):
        pass
    key = secrets.token_hex(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a name of its own per caller: threads of one process (parallel builds) share the pid, and one thread's
        # O_TRUNC rewrite of another's temporary file made the secret on disk differ from the one it returned
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}-{secrets.token_hex(8)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(key + "\n")
        try:
            os.link(tmp, path)  # never replace a secret another process has just written
        except FileExistsError:  # another process won: its secret, when it is one
            os.unlink(tmp)
            text = path.read_text(encoding="ascii", errors="replace").strip()
            return bytes.fromhex(text) if re.fullmatch(r"[0-9a-f]{64}", text) else bytes.fromhex(key)
        os.unlink(tmp)
    except OSError:
        pass  # a secret for this process alone
    return bytes.fromhex(key)


def secret(root: Path) -> bytes:
    """This machine's secret for checkout `root` (created on first use)."""
    return _secret(key_file(root))


def seal(root: Path, *parts: str | bytes) -> str:
    """The HMAC-SHA256 (hex) of `parts` under this machine's secret: what a cache entry written here carries."""
    mac = hmac.new(secret(root), digestmod=hashlib.sha256)
    for part in parts:
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        mac.update(len(data).to_bytes(8, "big"))
        mac.update(data)
    return mac.hexdigest()


def sealed(root: Path, value: object, *parts: str | bytes) -> bool:
    """Whether `value` is the seal of `parts` on this machine."""
    return isinstance(value, str) and hmac.compare_digest(value, seal(root, *parts))
