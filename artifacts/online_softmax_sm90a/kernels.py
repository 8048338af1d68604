"""Triton kernels of online_softmax_sm90a: a row softmax in fp32, one program a row walking it in BLOCK-element
chunks, three ways (imported by online_softmax.py's load(), never at its import).

All three keep BLOCK per-lane accumulators and reduce them across lanes once, at the end of a pass, so they differ in
where the maximum comes from and how often a sum is rescaled, not in how they add."""

import triton
import triton.language as tl


# kwiki:rung two_pass
@triton.jit
def two_pass_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """The maximum first (one read), then the sum of exp(x - max) (a second read), then the output (a third read
    and the write): no sum is ever rescaled."""
    base = tl.program_id(0).to(tl.int64) * n
    c = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for s in range(0, n, BLOCK):
        m = tl.maximum(m, tl.load(x_ptr + base + s + c, mask=s + c < n, other=-float("inf")))
    mx = tl.max(m, 0)
    d = tl.zeros((BLOCK,), tl.float32)
    for s in range(0, n, BLOCK):
        d += tl.exp(tl.load(x_ptr + base + s + c, mask=s + c < n, other=-float("inf")) - mx)
    den = tl.sum(d, 0)
    for s in range(0, n, BLOCK):
        x = tl.load(x_ptr + base + s + c, mask=s + c < n, other=-float("inf"))
        tl.store(y_ptr + base + s + c, tl.exp(x - mx) / den, mask=s + c < n)
# /kwiki:rung two_pass


@triton.jit
def _write(x_ptr, y_ptr, base, n, mx, den, BLOCK: tl.constexpr):
    """The last pass of the online kernels: read the row again and write exp(x - max) / sum."""
    c = tl.arange(0, BLOCK)
    for s in range(0, n, BLOCK):
        x = tl.load(x_ptr + base + s + c, mask=s + c < n, other=-float("inf"))
        tl.store(y_ptr + base + s + c, tl.exp(x - mx) / den, mask=s + c < n)


# kwiki:rung online
@triton.jit
def online_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """One pass for the maximum and the sum: a running maximum of the chunks' maxima, the per-lane sums rescaled
    by exp(old max - new max) whenever a chunk raises it (at most once a chunk), then the output pass."""
    base = tl.program_id(0).to(tl.int64) * n
    c = tl.arange(0, BLOCK)
    mx = -float("inf")
    d = tl.zeros((BLOCK,), tl.float32)
    for s in range(0, n, BLOCK):
        x = tl.load(x_ptr + base + s + c, mask=s + c < n, other=-float("inf"))
        new = tl.maximum(mx, tl.max(x, 0))  # finite from the first chunk on: every chunk holds a real element
        d = d * tl.exp(mx - new) + tl.exp(x - new)
        mx = new
    _write(x_ptr, y_ptr, base, n, mx, tl.sum(d, 0), BLOCK)
# /kwiki:rung online


# kwiki:rung online_lanes
@triton.jit
def online_lanes_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """One pass with a (max, sum) pair per lane, each rescaled whenever its own lane's maximum grows (no reduction
    across lanes inside the loop: two exponentials an element), merged across lanes at the end. A lane past the end
    of a row shorter than BLOCK never sees an element: its maximum stays -inf and its sum becomes NaN
    (exp(-inf - -inf)); the merge leaves such lanes out. (Every other lane sees an element in the first chunk.)"""
    base = tl.program_id(0).to(tl.int64) * n
    c = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    d = tl.zeros((BLOCK,), tl.float32)
    for s in range(0, n, BLOCK):
        x = tl.load(x_ptr + base + s + c, mask=s + c < n, other=-float("inf"))
        new = tl.maximum(m, x)
        d = d * tl.exp(m - new) + tl.exp(x - new)
        m = new
    mx = tl.max(m, 0)
    den = tl.sum(tl.where(m > -float("inf"), d * tl.exp(m - mx), 0.0), 0)
    _write(x_ptr, y_ptr, base, n, mx, den, BLOCK)
# /kwiki:rung online_lanes
