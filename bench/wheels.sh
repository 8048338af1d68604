# Sourced by the bench scripts that run on the GPU machine: install the pure-Python wheels carried in .whl/
# (pydantic and its dependencies, Liger-Kernel: `pip download -d .whl --only-binary=:all: --python-version 3.12 ...`
# where an index is reachable) into /tmp/site and put it, and the checkout, on PYTHONPATH.
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 2; }
  export PYTHONPATH=/tmp/site:$PWD
  # the row kernels' baselines need it; without it their variants report "not installed" and a group's repeats
  # stop after one run (it happened on 2026-12-05)
  ls .whl/liger_kernel-*.whl > /dev/null 2>&1 \
    || echo "wheels.sh: no Liger-Kernel wheel in .whl/: the Liger baselines will report it not installed" >&2
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
