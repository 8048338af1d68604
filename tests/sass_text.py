"""A binary's SASS as text, by kernel, for the tests that read operands kwiki's opcode counts leave out (the
`%globaltimer` reads of a trace build, for one): kwiki.verify.sass counts opcodes, these tests need the lines."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest


def sass_of(binary: Path) -> dict[str, str]:
    """Each kernel's SASS text, by mangled name (cuobjdump from kwiki's tools); the test skips without one."""
    from kwiki.verify.sass import find_tools

    tools = find_tools()
    if tools is None:
        pytest.skip("no cuobjdump")
    text = subprocess.run([tools.cuobjdump, "-sass", str(binary)], capture_output=True, text=True, check=True,
                          timeout=120).stdout
    out: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        m = re.match(r"^\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out
