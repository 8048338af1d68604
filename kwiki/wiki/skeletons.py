"""The skeletons `kwiki new` writes, as data: a page, an artifact manifest and its CUDA source.

The variant ladder of the artifact skeleton is declared once (`RUNGS`) and rendered into the
manifest, the .cu's header comment and the .cu's table of variants alike. `kwiki.wiki.new` plans,
validates and writes what these functions render.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kwiki.core.arch import parse_arch
from kwiki.wiki.catalog import ARTIFACTS_DIR, WIKI_DIR
from kwiki.wiki.fields import tag as _tag

PAGE_KEY = "bench"  # the key of a new page's `artifacts` mapping, as the wiki's pages name theirs


# page type -> the folder under wiki/ where pages of that type live
PAGE_FOLDERS: dict[str, str] = {
    "technique": "nvidia/techniques",
    "algorithm": "nvidia/techniques",
    "pitfalls": "nvidia/techniques",
    "kernel": "nvidia/kernels",
    "pattern": "nvidia/patterns",
    "hardware": "nvidia/hardware",
    "skill": "nvidia/hardware",
    "api": "nvidia/apis",
    "concept": "nvidia/concepts",
    "guide": "guides",
    "reference": "references",
}

# section headings of a page body, each with a short guidance comment
SECTIONS: tuple[tuple[str, str], ...] = (
    ("When it pays", ("The regime where it helps (memory-bound? latency-bound? which shapes and "
                      "architectures) and where it does not.")),
    ("How it works", ("The mechanism, with the code or PTX that matters and the numbers that decide it "
                      "(bytes in flight, registers, shared memory).")),
    ("How to check", "What shows it working: ptxas -v, SASS (cuobjdump -sass), Nsight Compute metrics."),
    ("Pitfalls", "What goes wrong, and how it shows."),
)


@dataclass(frozen=True)
class Rung:
    """One variant of the artifact skeleton: its name in the .cu's table, the rest in the manifest."""

    name: str
    rung: int
    description: str
    adds: str
    launcher: str  # the C++ launcher
    kernel: str  # the C++ kernel whose registers the record reports, or nullptr for a library call
    scales: bool  # its output is alpha * x (else a copy of x)


RUNGS: tuple[Rung, ...] = (
    Rung("device_copy", 0, "cudaMemcpyAsync device to device of the same bytes (the baseline)",
         "the library baseline: the driver's own device-to-device copy of the same bytes", "launch_device_copy",
         "nullptr", False),
    Rung("naive", 1, "one thread per element, 4-byte loads and stores",
         "a kernel: one thread per element, 4-byte accesses", "launch_naive", "naive_kernel", True),
    Rung("vec4", 2, "16-byte loads and stores (float4), a scalar tail for the last n % 4 elements",
         "16-byte accesses: a quarter of the instructions, four times the bytes in flight per thread",
         "launch_vec4", "vec4_kernel", True),
)
BASELINE = "device_copy"
SIZE_VALUES = ("16777216", "16777219")  # the manifest's shapes; the second is off the vector width: the tail is checked
SIZES = ", ".join(f"'{v}'" for v in SIZE_VALUES)

PAGE_TEMPLATE = """\
---
id: {id}
title: {title_yaml}
type: {type}
status: draft
vendor: nvidia
architectures: [{arch}]
tags: [{tag}]
evidence_level: spec
summary: >-
  One or two sentences for listings and agents: what this is, when it pays, what it buys.
  (Written by kwiki new; replace it.)
# public sources only, each {{id, title, url}}; a claim with evidence source-reported names one by its id
sources: []
{artifacts}{claims}---
# {title}

<!-- What it is: the idea in one paragraph, for a reader who knows CUDA but not this {type}. -->

{sections}## Measurements

<!-- Numbers on this page come from kwiki verify only: {measured_by} -->
{regions}"""

NO_CLAIMS = """\
# claims: checkable statements with a number; kwiki verify measures those with a `measure`, e.g.
#   - id: read-16b-bandwidth
#     statement: A 16-byte read stream moves at least 4.45 TB/s on the H200.
#     metric: bandwidth
#     unit: TB/s
#     at_least: 4.45
#     conditions: {arch: sm_90a, gpu: H200}
#     measure: {artifact: bench, of: {variant: read_v16_x4, figure: tb_per_s}}
# (a figure from a public source instead: evidence: source-reported, source: <an id of sources>)
claims: []
"""

RATIO_CLAIM = """\
# claims: checkable statements with a number; kwiki verify measures those with a `measure`
claims:
  - id: {of}-vs-{per}
    statement: The {of} rung moves bytes at least as fast as the {per} rung in the same run.
    metric: ratio
    unit: x
    at_least: 1.0
    conditions: {{arch: {arch}}}
    measure:
      artifact: {key}
      of: {{variant: {of}, params: {{n: {n}}}, figure: gb_per_s}}
      per: {{variant: {per}, params: {{n: {n}}}, figure: gb_per_s}}
"""

OUTCOME_CLAIM = """\
# claims: checkable statements with a number; kwiki verify measures those with a `measure`
claims:
  - id: {claim_id}
    statement: The {variant} variant passes its correctness check.
    metric: outcome
    unit: outcome
    expect: passed
    conditions: {{arch: {arch}}}
    measure: {{artifact: {key}, of: {{variant: {variant}}}}}
"""

REGIONS = """
<!-- kwiki:ladder -->
<!-- /kwiki:ladder -->

<!-- kwiki:claims -->
<!-- /kwiki:claims -->
"""

MANIFEST_TEMPLATE = """\
# written by kwiki new; every field: kwiki/wiki/manifest.py (schema/artifact.schema.json)
name: {name}
title: "{name}: y = alpha * x over fp32, a template ladder of two kernels against the device copy (replace it)"
targets: [{arch}]
build:
  sources: [{source}]
  flags: [-O3, -std=c++17]
run:
  timeout_s: 300
# the one source of the shapes: kwiki passes --sizes=...; the .cu has no defaults
shapes:
  - {{option: sizes, dims: [n], values: [{sizes}]}}
# one entry per variant of the .cu's table (names only there), in its order: rung 0 is the library baseline
variants:
{variants}baseline: {baseline}
"""

CU_TEMPLATE = """\
// {source}: y = alpha * x over n fp32 elements, a template ladder written by `kwiki new artifact`.
// Replace the op; keep the layout (CONTRIBUTING.md, conventions 11-17) and the protocol (../common/kwiki_bench.cuh).
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 {gencode} -I../common -Xptxas=-v -o {name} {source}
// Run: ./{name} --sizes=N,N,... [--alpha=1.5] [--variants a,b,c] [--seed=N] [--input-sets=2]
//
// Reference: fp64 on the host from the same fp32 inputs; tolerance: tolerance_for<float>(). The sizes are the
// manifest's (artifact.yaml, shapes); keep one that is not a multiple of the vector width (4), so the tail is
// checked. Variants, their rungs and what each adds: artifact.yaml; each rung's code is a marked region
// (CONTRIBUTING.md, convention 17).
// Bytes per record: n reads and n writes of 4 bytes.
#include "kwiki_bench.cuh"

namespace {{

constexpr int kThreads = 256;
constexpr size_t kVec = 4;  // floats per 16-byte access

// ===================================================================================================
// Reference: fp64 on the host
// ===================================================================================================

std::vector<double> reference(const std::vector<float>& x, double alpha) {{
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = alpha * double(x[i]);
    return y;
}}

// One input set: x (random, never zeros) and the references of both kinds of variant (alpha * x, and x itself:
// what a copy gives), computed once per set.
struct Inputs {{
    kwiki::DeviceBuffer<float> x;
    std::vector<double> scaled, copied;
}};

void fill_inputs(Inputs& s, size_t n, float alpha, uint64_t seed) {{
    s.x = kwiki::DeviceBuffer<float>(n);
    kwiki::fill_random(s.x.get(), n, seed, -1.0f, 1.0f);
    const std::vector<float> hx = kwiki::to_host_float(s.x.get(), n);
    s.scaled = reference(hx, double(alpha));
    s.copied = reference(hx, 1.0);
}}

// ===================================================================================================
// Kernels
// ===================================================================================================

// kwiki:rung naive
__global__ void naive_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, size_t n) {{
    const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}}
// /kwiki:rung naive

// kwiki:rung vec4
// One float4 per thread over the first n / 4 * 4 elements; the last n % 4 by the grid's first threads.
// x and y must be 16-byte aligned (cudaMalloc gives 256).
__global__ void vec4_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, size_t n) {{
    const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    const size_t n4 = n / kVec;
    if (i < n4) {{
        float4 v = reinterpret_cast<const float4*>(x)[i];
        v.x *= alpha; v.y *= alpha; v.z *= alpha; v.w *= alpha;
        reinterpret_cast<float4*>(y)[i] = v;
    }}
    if (i < n - n4 * kVec) y[n4 * kVec + i] = alpha * x[n4 * kVec + i];
}}
// /kwiki:rung vec4

// ===================================================================================================
// Launchers
// ===================================================================================================

struct Problem {{
    size_t n;
    float alpha;
    const float* x;
    float* y;
}};

unsigned blocks_for(size_t threads) {{ return unsigned((threads + kThreads - 1) / kThreads); }}

// kwiki:rung device_copy
void launch_device_copy(const Problem& p, cudaStream_t s) {{
    KWIKI_CHECK(cudaMemcpyAsync(p.y, p.x, p.n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}}
// /kwiki:rung device_copy

void launch_naive(const Problem& p, cudaStream_t s) {{
    naive_kernel<<<blocks_for(p.n), kThreads, 0, s>>>(p.x, p.y, p.alpha, p.n);
}}

void launch_vec4(const Problem& p, cudaStream_t s) {{
    vec4_kernel<<<blocks_for(std::max(p.n / kVec, p.n % kVec)), kThreads, 0, s>>>(p.x, p.y, p.alpha, p.n);
}}

// ===================================================================================================
// The table of variants (names only: artifact.yaml holds their rungs and what each adds, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {{
    void (*launch)(const Problem&, cudaStream_t);
    const void* kernel;  // the kernel whose registers the record reports; nullptr for a library call
    bool scales;         // the output is alpha * x (else a copy of x)
}};

const Variant kVariants[] = {{
{variant_rows}}};

}}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {{
    kwiki::Main m(argc, argv, kVariants);  // --list-variants exits in here, before any CUDA call
    const auto sizes = m.args.get_sizes("sizes", "", 1, "element counts");  // the manifest's; --list-shapes exits
    const float alpha = float(m.args.get_double("alpha", 1.5));
    kwiki::Runner& runner = m.start("{name}");
    for (const auto& size : sizes) {{
        const size_t n = size_t(size[0]);
        kwiki::DeviceBuffer<float> y(n);
        kwiki::InputSets<Inputs> in(m.sets, m.seed + n,
                                    [&](Inputs& s, uint64_t seed) {{ fill_inputs(s, n, alpha, seed); }});
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {{
            kwiki::Case c;
            c.params = {{{{"n", (unsigned long long)n}}, {{"dtype", "f32"}}}};
            c.bytes = 2.0 * double(n) * sizeof(float);
            if (v.scales) c.flops = double(n), c.flops_dtype = "fp32";
            c.launch = [&, v](cudaStream_t s) {{ v.launch({{n, alpha, in.current().x.get(), y.get()}}, s); }};
            in.bind(c, [&](cudaStream_t s) {{ kwiki::poison(y.get(), y.bytes(), s); }}, [&, v](const Inputs& s) {{
                const std::vector<float> got = kwiki::to_host_float(y.get(), n);
                return kwiki::compare(got.data(), (v.scales ? s.scaled : s.copied).data(), n,
                                      kwiki::tolerance_for<float>(), v.scales ? "host fp64 alpha * x" : "the input x");
            }});
            if (v.kernel) kwiki::add_regs(c.extra, v.kernel);
            return c;
        }});
    }}
    return kwiki::exit_code();
}}
"""


# ---------------------------------------------------------------- placement


def stem(page_id: str, page_type: str) -> str:
    """The file name of a page without '.md': its id less a leading '<type>-'."""
    prefix = f"{page_type}-"
    return page_id[len(prefix):] if page_id.startswith(prefix) and len(page_id) > len(prefix) else page_id


def page_path(page_id: str, page_type: str) -> str:
    return f"{WIKI_DIR}/{PAGE_FOLDERS[page_type]}/{stem(page_id, page_type)}.md"


# ---------------------------------------------------------------- rendering


def _yaml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def render_page(page_id: str, page_type: str, title: str, arch: str, claims: str, artifact: str | None,
                key: str = PAGE_KEY) -> str:
    sections = "".join(f"## {head}\n\n<!-- {hint} -->\n\n" for head, hint in SECTIONS)
    if artifact:
        measured_by = (f"it runs artifacts/{artifact}, checks each claim, and writes the ladder and the claims "
                       f"table between the markers below (never edit between them).")
    else:
        measured_by = "add an artifact (kwiki new artifact NAME --page " + page_id + ") and claims that measure it."
    return PAGE_TEMPLATE.format(
        id=page_id, title=title, title_yaml=_yaml_str(title), type=page_type, arch=arch,
        tag=_tag(stem(page_id, page_type)),
        artifacts=f"artifacts:\n  {key}: {ARTIFACTS_DIR}/{artifact}\n" if artifact else "",
        claims=claims, sections=sections, measured_by=measured_by, regions=REGIONS if artifact else "",
    )


def render_manifest(name: str, arch: str) -> str:
    variants = "".join(
        f"  - {{name: {r.name}, rung: {r.rung}, adds: {_yaml_str(r.adds)}, description: {_yaml_str(r.description)}}}\n"
        for r in RUNGS)
    return MANIFEST_TEMPLATE.format(name=name, arch=arch, source=f"{name}.cu", sizes=SIZES, variants=variants,
                                    baseline=BASELINE)


def render_source(name: str, arch: str) -> str:
    rows = "".join(f'    {{{{"{r.name}"}}, {r.launcher}, '
                   f'{"nullptr" if r.kernel == "nullptr" else f"reinterpret_cast<const void*>({r.kernel})"}, '
                   f'{"true" if r.scales else "false"}}},\n' for r in RUNGS)
    return CU_TEMPLATE.format(name=name, source=f"{name}.cu", gencode=parse_arch(arch).gencode(), variant_rows=rows)


# ---------------------------------------------------------------- the Python artifact skeleton (kind: python)

PY_RUNGS: tuple[tuple[str, int, str, str], ...] = (  # name, rung, description, adds
    ("torch_mul", 0, "torch.mul(x, ALPHA, out=y) (the baseline)", "the library baseline: PyTorch's own kernel"),
    ("triton_b1024", 1, "a Triton kernel, 1024 elements per program, 4 warps",
     "a Triton kernel: one program per 1024 elements, two 16-byte accesses per thread"),
    ("triton_b4096", 2, "a Triton kernel, 4096 elements per program, 8 warps",
     "4x the elements per program: more bytes in flight per thread"),
)
PY_SIZE_VALUES = (16777216, 16777219)  # the module's GRID; the second is off every block: the masked tail is checked

PY_MANIFEST_TEMPLATE = """\
# written by kwiki new; every field: kwiki/wiki/manifest.py (schema/artifact.schema.json)
name: {name}
title: "{name}: y = ALPHA * x over fp32 in Triton, a template ladder against torch.mul (replace it)"
kind: python
python: {{module: {module}}}  # also: input_sets (default 3), call_timeout_s (one call's watchdog, default 120)
targets: [{arch}]
run:
  args: ["--max-seconds=0.5"]  # bench options of the harness
  timeout_s: 300
# the module's VARIANTS, the same set: rung 0 is the library baseline
variants:
{variants}baseline: {baseline}
"""

PY_MODULE_TEMPLATE = '''\
"""{name}: y = ALPHA * x over n fp32 elements, a template ladder written by `kwiki new artifact --kind python`.

Replace the op and keep the contract (CONTRIBUTING.md, "Add a Python artifact"): kwiki's harness
(artifacts/common/kwiki_harness.py) makes the inputs, poisons the outputs, checks every variant against
`reference`, then times the variants that passed, interleaved. torch and Triton are imported inside the
functions (kwiki imports this module on machines without them); the Triton kernels live in kernels.py.
Smoke-test on a CPU (the torch variants; Triton needs a GPU):
  python artifacts/common/kwiki_harness.py run artifacts/{name}/{module} --device cpu --variants torch_mul
"""

ALPHA = 1.5
GRID = [{{"n": n, "dtype": "float32"}} for n in {sizes}]  # params of each measured shape; claims name them
VARIANTS = [{variants}]
TOLERANCES = {{
    "float32": (0.0, 2.0 ** -23, "one fp32 multiply: the product rounded once (2^-24 relative) against fp64"),
}}


def make_inputs(params, seed, device):
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    return {{"x": torch.rand(params["n"], generator=g, device=device) + 0.5}}  # random, never zero


def make_outputs(params, inputs):
    import torch

    return {{"y": torch.empty_like(inputs["x"])}}


def reference(params, inputs):
    return {{"y": inputs["x"].double() * ALPHA}}


def work(params):
    return {{"bytes": 8.0 * params["n"], "bytes_level": "dram", "flops": float(params["n"]), "flops_dtype": "fp32"}}


def load(name):
    """The variant's callable fn(inputs, outputs): it writes the outputs it is given (or returns fresh ones)."""
    if name == "torch_mul":
        import torch

        def torch_mul(i, o):
            torch.mul(i["x"], ALPHA, out=o["y"])
        return torch_mul
    import kernels
    import triton

    block, warps = {{"triton_b1024": (1024, 4), "triton_b4096": (4096, 8)}}[name]

    def scale(i, o):
        x, y = i["x"], o["y"]
        kernels.scale_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), ALPHA, BLOCK=block, num_warps=warps)
    return scale
'''

PY_KERNELS_TEMPLATE = '''\
"""Triton kernels of {name} (imported by {module}'s load(), never when kwiki imports {module})."""

import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    """y = alpha * x over one block of BLOCK elements; the mask covers the last, partial block."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)
'''


def render_python_manifest(name: str, arch: str) -> str:
    variants = "".join(f"  - {{name: {v}, rung: {r}, adds: {_yaml_str(a)}, description: {_yaml_str(d)}"
                       + (', kernels: ["scale_kernel*"]' if v.startswith("triton") else "") + "}\n"
                       for v, r, d, a in PY_RUNGS)
    return PY_MANIFEST_TEMPLATE.format(name=name, arch=arch, module=f"{name}.py", variants=variants,
                                       baseline=PY_RUNGS[0][0])


def render_python_module(name: str) -> str:
    return PY_MODULE_TEMPLATE.format(name=name, module=f"{name}.py", sizes=list(PY_SIZE_VALUES),
                                     variants=", ".join(f'"{v}"' for v, *_ in PY_RUNGS))


def render_python_kernels(name: str) -> str:
    return PY_KERNELS_TEMPLATE.format(name=name, module=f"{name}.py")
