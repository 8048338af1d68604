"""online_softmax_sm90a: the online softmax rule against two passes, in fp32, for its error and its cost.

A row softmax in fp32 in and fp32 out, so that what is measured is the arithmetic of the rule, not a bf16 rounding:
the output's error against a float64 reference (the harness's max_rel_err and max_abs_err of the check, reported as
figures), and its time. One Triton program walks a row in CHUNK-element chunks with CHUNK per-lane accumulators:
- two_pass: the maximum (a read), then the sum of exp(x - max) (a second read), then the output (a third read
  and the write); no sum is rescaled.
- online: the maximum and the sum in one read, the sums rescaled by exp(old - new) whenever a chunk raises the
  running maximum (at most once a chunk), then the output: one read fewer.
- online_lanes: a (max, sum) pair per lane, each rescaled whenever its own lane's maximum grows (two exponentials an
  element), merged across lanes at the end: the form a kernel takes when it avoids a reduction inside its loop.
- torch_eager: torch.softmax in fp32, the baseline.
Rows come in two orders (the `order` param): "random", standard normal values, where a row's maximum is found early
and rises rarely; and "ascending", the same values sorted along the row, where every chunk raises the maximum, so
`online` rescales at every chunk and `online_lanes` at every element: the rule's worst case.
Every shape holds 2^26 elements (256 MiB in, 256 MiB out); the off-tile entry has a row length no chunk divides.
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

ELEMENTS = 1 << 26
LENGTHS = [1024, 16384, 262144]
OFF_TILE = {"rows": 1001, "cols": 5000}  # 5000 = one full chunk of 4096 and a partial one
CHUNK = 4096
ORDERS = ("random", "ascending")

FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)
GRID = [
    *({"order": o, "rows": ELEMENTS // n, "cols": n, "dtype": "float32"} for o in ORDERS for n in LENGTHS),
    *({"order": o, **OFF_TILE, "dtype": "float32"} for o in ORDERS),
]
VARIANTS = ["torch_eager", "two_pass", "online", "online_lanes"]
TOLERANCES = {
    "float32": (0.0, 1e-4, "fp32 probabilities from fp32 exponentials (ex2.approx, about 2 ulp, and the rounding of "
                "x - max scaled by log2 e) and an fp32 sum over up to 262144 terms in chunk order, against float64: "
                "a few 1e-6 relative expected; 1e-4 leaves room and still fails a dropped rescale (an error of order "
                "1) or a wrong maximum. No absolute term: the smallest probabilities are judged relatively too"),
}


def applies(name, params):
    return True


def make_inputs(params, seed, device):
    import torch

    if params.get("order") not in ORDERS or params["rows"] <= 0 or params["cols"] <= 0:
        raise ValueError(f"online_softmax: params {params}: order must be one of {ORDERS}, rows and cols positive")
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(params["rows"], params["cols"], generator=g, device=device, dtype=torch.float32)
    return {"x": x.sort(dim=-1).values.contiguous() if params["order"] == "ascending" else x}


def make_outputs(params, inputs):
    import torch

    return {"y": torch.empty_like(inputs["x"])}


def reference(params, inputs):
    import torch

    return {"y": torch.softmax(inputs["x"].double(), -1)}


def work(params):
    return {"bytes": float(8 * params["rows"] * params["cols"]), "bytes_level": "dram"}  # one read, one write


def load(name):
    import torch

    if name == "torch_eager":
        return lambda i, o: {"y": torch.softmax(i["x"], -1)}
    import kernels

    kernel = {"two_pass": kernels.two_pass_kernel, "online": kernels.online_kernel,
              "online_lanes": kernels.online_lanes_kernel}[name]

    def launch(i, o):
        x, y = i["x"], o["y"]
        rows, n = x.shape
        kernel[(rows,)](x, y, n, BLOCK=CHUNK, num_warps=8)
    return launch
