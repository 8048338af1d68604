"""The Triton artifacts' kernels, checked without a GPU under Triton's CPU interpreter, in CI's one test command.

Their tests run only in a process that starts with TRITON_INTERPRET=1 (Triton reads it once: the whole process
would stay interpreted), one file per process (artifact modules share names like `kernels`); everywhere else they
skip. This runs each such file in a process of its own with the interpreter on, where Triton is installed (the
`interpret` extra; .ci/run installs it), and fails when a file fails or checks nothing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FILES = sorted(p.name for p in TESTS.glob("test_*.py")  # those whose tests ask whether the interpreter is on
               if p.name != Path(__file__).name and "TRITON_INTERPRET" in p.read_text(encoding="utf-8"))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None or importlib.util.find_spec("numpy") is None,
                                reason="needs Triton and numpy (pip install -e '.[interpret]')")


def test_the_files_with_interpreted_tests_are_found():
    assert {"test_w4a16_gemm_triton.py", "test_attention_fwd_artifact.py", "test_moe_grouped_gemm.py"} <= set(FILES)


@pytest.mark.parametrize("name", FILES)
def test_a_triton_artifacts_kernels_pass_under_the_interpreter(name: str):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(TESTS / name)], cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=900)
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, tail
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed is not None and int(passed.group(1)) > 0, tail
