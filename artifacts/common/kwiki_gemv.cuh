// kwiki_gemv.cuh: what the GEMV artifacts' mains share (gemv_bf16_sm90a, nvfp4_gemv_sm90a).
//
// Block configurations by name (--sweep times each one as a variant sweep_<name>; a tuned table picks one per
// shape), the list of variants a run times, and the read roof (kwiki_ceiling.cuh), swept once per run when the
// ceiling variant is wanted and emitted as that variant's record after each shape's cases.
//   kwiki::GemvMain<Shape> m(argc, argv, kVariants, "gemv", parse_shapes);
//   auto todo = kwiki::gemv_todo(args, kVariants, configs(), Kind::Kernel, [](const Variant& v) { return true; });
//   auto roof = kwiki::gemv_roof(runner, m.args, m.seed, "read_ceiling");
//   for (const Shape& shape : m.shapes) { ... kwiki::run_shape(runner, cases, roof.get(), "read_ceiling", params, bytes); }
#pragma once

#include "kwiki_bench.cuh"
#include "kwiki_ceiling.cuh"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace kwiki {

template <class Launch>
struct GemvConfig {
    const char* name;
    Launch launch;
};

// A row of a tuned table: the configuration that measured fastest on the H200 (--sweep) at M x K x L.
struct TunedRow {
    int M, K, L;
    const char* config;
};

template <class Launch>
Launch find_config(const std::vector<GemvConfig<Launch>>& configs, const char* name) {
    for (const auto& c : configs)
        if (std::strcmp(c.name, name) == 0) return c.launch;
    fail_env(__FILE__, __LINE__, "config", name);
}

// The tuned table's configuration at M x K x L, else `fallback`.
template <class Launch, size_t N>
Launch tuned_config(const std::vector<GemvConfig<Launch>>& configs, const TunedRow (&table)[N], int M, int K, int L,
                    const char* fallback) {
    for (const TunedRow& r : table)
        if (r.M == M && r.K == K && r.L == L) return find_config(configs, r.config);
    return find_config(configs, fallback);
}

template <class Kind, class Launch>
struct GemvTodo {
    std::string name;
    Kind kind;
    Launch launch;
};

// A canary past a 16-bit output's last element (y[M-1], c[L*M-1]): set once, required intact by every check,
// so a kernel that writes past the end fails. The output buffer needs kCanary elements of room after n.
constexpr int kCanary = 64;
constexpr uint16_t kCanaryBits = 0x7bad;  // a bf16 (about 1.9e36) or fp16 (62880) no kernel writes by chance

template <class T>
void set_canary(T* out, size_t n) {
    static_assert(sizeof(T) == sizeof(uint16_t), "a 16-bit output");
    std::vector<uint16_t> v(kCanary, kCanaryBits);
    KWIKI_CHECK(cudaMemcpy(out + n, v.data(), kCanary * sizeof(uint16_t), cudaMemcpyHostToDevice));
}

// `r`, failed when the canary after out[n-1] changed.
template <class T>
CheckResult with_canary(CheckResult r, const T* out, size_t n) {
    std::vector<uint16_t> v(kCanary);
    KWIKI_CHECK(cudaMemcpy(v.data(), out + n, kCanary * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    const int bad = int(std::count_if(v.begin(), v.end(), [](uint16_t x) { return x != kCanaryBits; }));
    if (bad) {
        r.passed = false;
        r.detail = std::to_string(bad) + " of the " + std::to_string(kCanary) + " elements past the last output were written; " +
                   r.detail;
    }
    return r;
}

// The variants to run: the table's that --variants asks for and `runs` accepts (e.g. not an sm_100 rung on
// sm_90; not the ceiling, whose record run_shape emits), plus with --sweep every block configuration as sweep_<name>, of kind `sweep_kind`.
template <class Variant, size_t N, class Launch, class Kind, class Runs>
std::vector<GemvTodo<Kind, Launch>> gemv_todo(const Args& args, const Variant (&table)[N],
                                              const std::vector<GemvConfig<Launch>>& configs, Kind sweep_kind, Runs runs) {
    std::vector<GemvTodo<Kind, Launch>> todo;
    for (const Variant& v : table)
        if (args.want(v.name) && runs(v)) todo.push_back({v.name, v.kind, v.launch});
    if (args.has("sweep"))
        for (const auto& c : configs) todo.push_back({std::string("sweep_") + c.name, sweep_kind, c.launch});
    return todo;
}

// The selection pass of a `tuned` variant: every configuration a candidate `select_<name>` (`fill(case, launch)`
// makes it a case of the shape), checked and timed on `selector` (kwiki::select_fastest: samples of its own).
template <class Launch, class Fill>
Selection select_config(Runner& selector, const std::vector<GemvConfig<Launch>>& configs, Fill fill) {
    std::vector<Case> candidates;
    for (const auto& cfg : configs) {
        Case c;
        c.variant = std::string("select_") + cfg.name;
        fill(c, cfg.launch);
        candidates.push_back(std::move(c));
    }
    return select_fastest(selector, candidates);
}

// A case of `variant` at `params`; the caller fills in the rest.
inline Case named_case(const std::string& variant, const Fields& params) {
    Case c;
    c.variant = variant;
    c.params = params;
    return c;
}

// A variant with nothing to time (its selection pass chose nothing): its check fails, saying `why`.
inline void nothing_selected(Case& c, const char* why) {
    c.launch = [](cudaStream_t) {};
    c.poison = [](cudaStream_t) {};
    c.check = [why] {
        CheckResult r;
        r.detail = why;
        return r;
    };
}

// A GEMV main's start: its arguments (--list-variants exits in there, before any CUDA call), its shapes (a bad
// --shapes exits 2, still before any CUDA call), the seed and the input sets; then its name, seed and device on stderr.
template <class Shape>
struct GemvMain {
    Args args;
    std::vector<Shape> shapes;
    uint64_t seed;
    int sets;

    template <class Table, class Parse>
    GemvMain(int argc, char** argv, const Table& variants, const char* name, Parse parse_shapes)
        : args(argc, argv, variants), shapes(parse_shapes(args)), seed(args.seed()), sets(args.input_sets()) {
        std::fprintf(stderr, "%s: seed %llu, %d SMs, L2 %zu bytes\n", name, (unsigned long long)seed, sm_count(), l2_bytes());
    }
};

// The read roof of this run, swept now, when the `ceiling` variant is wanted; else null.
inline std::unique_ptr<ReadRoof> gemv_roof(Runner& runner, const Args& args, uint64_t seed, const char* ceiling) {
    if (!args.want(ceiling)) return nullptr;
    // a run that only checks (a sanitizer's, a profiler's) times nothing: the sweep's reads are checked, no roof fitted
    return std::make_unique<ReadRoof>(runner, hash64(seed, 0xce11), args.has("check-only") || args.has("profile-mode"));
}

// One shape: check, time and emit its cases, then the roof's record for its bytes (when there is a roof).
inline void run_shape(Runner& runner, std::vector<Case>& cases, const ReadRoof* roof, const char* ceiling,
                      const Fields& params, double bytes) {
    runner.run(cases);
    if (roof) emit(roof->record(ceiling, params, bytes));
}

}  // namespace kwiki
