// kwiki_args.cuh: an artifact's arguments (--variants, --list-variants, --shapes, --name=value) and the runner's
// options parsed from them (BenchOptions). Part of kwiki_bench.cuh; includes no other kwiki header and makes no CUDA
// call (--list-variants exits from here before any).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kwiki {

struct BenchOptions {
    double target_rse = 0.005;   // stop when the median's relative standard error is at most this
    int min_samples = 20;
    int max_samples = 2000;
    double max_seconds = 2.0;    // wall time of one case's samples (poison, flush, launch and syncs; not re-checks)
    int warmup = 3;              // untimed launches per case before sampling
    bool flush_l2 = true;        // false (--no-flush): no flush, no flush self-test (development only)
    bool cupti = true;           // false (--timing=events): CUDA events even where CUPTI is available
    std::optional<uint64_t> recheck_seed;  // --recheck-seed: which samples are re-checked (default: drawn at start)
    bool selftest_record = false;          // --protocol-selftest: emit the flush self-test as a record
    std::vector<std::string> sustained;    // --sustained=a,b: these variants also get a sustained figure
    bool tail = true;                      // the tail check after sampling (off in selection passes)
};

// ===================================================================================================
// Variants and arguments: --variants a,b,c  --name=value  --name value  --flag  --list-variants
// ===================================================================================================

// One row of an artifact's variant table: its name only. The manifest (artifact.yaml) is the one source of each
// variant's rung and what it adds; kwiki compares the table's names with the manifest's, in order (--list-variants).
//   static constexpr kwiki::VariantInfo kVariants[] = {{"cublas"}, {"tiled"}};
// An artifact that needs more per variant derives from it, and still declares one table:
//   struct Variant : kwiki::VariantInfo { bool tf32; };
//   static constexpr Variant kVariants[] = {{{"cublas"}, false}, ...};
struct VariantInfo {
    const char* name;
};

class Args {
  public:
    // An artifact's arguments: the parse below; then `--list-variants` prints the table's names, one a line on
    // stdout, and exits 0 (before any CUDA call: construct Args first thing in main); then exit 2 when
    // --variants names a variant that is not in `variants` (its table: anything iterable whose items have a
    // `name`).
    template <typename Table>
    Args(int argc, char** argv, const Table& variants) : Args(argc, argv) {
        if (has("list-variants")) {
            list_variants(variants, stdout);
            std::exit(0);
        }
        require_known_in(variants);
    }

    // The names of a variant table, one a line.
    template <typename Table>
    static void list_variants(const Table& table, FILE* out) {
        for (const auto& v : table) {
            const std::string name = v.name;
            std::fprintf(out, "%s\n", name.c_str());
        }
        std::fflush(out);
    }

    Args(int argc, char** argv) {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (a.rfind("--", 0) != 0) {  // e.g. a YAML flow list that split "--shapes=a,b" at its commas
                std::fprintf(stderr, "unexpected argument '%s': options are --name=value (quote values with commas)\n",
                             a.c_str());
                std::exit(2);
            }
            a = a.substr(2);
            std::string key = a, value;
            size_t eq = a.find('=');
            if (eq != std::string::npos) key = a.substr(0, eq), value = a.substr(eq + 1);
            else if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) value = argv[++i];
            else value = "1";
            kv_.emplace_back(key, value);
        }
        has_variants_ = has("variants");
        variants_ = list("variants");
    }

    // The comma-separated names --name gives (empty ones dropped); none when it is absent.
    std::vector<std::string> list(const std::string& name) const {
        std::vector<std::string> out;
        const auto v = get(name);
        if (!v) return out;
        size_t start = 0;
        while (start <= v->size()) {
            size_t comma = v->find(',', start);
            if (comma == std::string::npos) comma = v->size();
            if (comma > start) out.push_back(v->substr(start, comma - start));
            start = comma + 1;
        }
        return out;
    }

    // The last value given for --name, if any.
    std::optional<std::string> get(const std::string& name) const {
        for (auto it = kv_.rbegin(); it != kv_.rend(); ++it)
            if (it->first == name) return it->second;
        return std::nullopt;
    }
    bool has(const std::string& name) const { return get(name).has_value(); }
    std::string get_str(const std::string& name, const std::string& def) const { return get(name).value_or(def); }
    long long get_int(const std::string& name, long long def) const {
        auto v = get(name);
        if (!v) return def;
        char* end = nullptr;
        long long x = std::strtoll(v->c_str(), &end, 0);
        if (end == v->c_str() || *end) usage("--" + name + " wants an integer, got '" + *v + "'");
        return x;
    }
    // --input-sets: how many pre-filled input sets the timed samples rotate through (kwiki::Case::input_sets)
    int input_sets(int def = 2) const {
        const long long n = get_int("input-sets", def);
        if (n < 1 || n > 64) usage("--input-sets wants an integer from 1 to 64");
        return int(n);
    }
    double get_double(const std::string& name, double def) const {
        auto v = get(name);
        if (!v) return def;
        char* end = nullptr;
        double x = std::strtod(v->c_str(), &end);
        if (end == v->c_str() || *end) usage("--" + name + " wants a number, got '" + *v + "'");
        return x;
    }

    // --name as a comma-separated list of sizes, each `dims` positive integers joined by 'x'
    // ("4096x4096x4096,8192x8192x8192"); `def` when absent (an empty `def`: the option is required, as for shapes
    // the manifest declares: kwiki passes them); exit 2 naming `what` otherwise. With --list-shapes=NAME the sizes
    // are printed, one a line as AxBxC, and the process exits 0 (before any CUDA call: kwiki compares them with the
    // manifest's shapes, in order, at every build).
    std::vector<std::vector<int>> get_sizes(const std::string& name, const std::string& def, int dims,
                                            const std::string& what) const {
        std::vector<std::vector<int>> out = parse_sizes(name, def, dims, what);
        list_if_asked(name, out);
        return out;
    }

    // --name as a list of shapes (get_sizes with DIMS sizes each), each built as Shape{d[0], d[1], ...} once
    // valid(d) holds for its sizes d (an artifact's alignment rules); exit 2 naming `what` when it does not.
    template <typename Shape, int DIMS, typename Valid>
    std::vector<Shape> get_shapes(const std::string& name, const std::string& def, const std::string& what, Valid valid) const {
        std::vector<Shape> out;
        const std::vector<std::vector<int>> sizes = parse_sizes(name, def, DIMS, what);
        for (const auto& d : sizes) {
            if (!valid(d)) usage("--" + name + " wants " + what);
            out.push_back(make_shape<Shape>(d, std::make_integer_sequence<int, DIMS>{}));
        }
        list_if_asked(name, sizes);
        return out;
    }

  private:
    std::vector<std::vector<int>> parse_sizes(const std::string& name, const std::string& def, int dims,
                                              const std::string& what) const {
        const std::string text = get_str(name, def);
        if (text.empty()) usage("--" + name + " is required: " + what + " (kwiki passes the manifest's shapes)");
        std::vector<std::vector<int>> out;
        size_t start = 0;
        while (start <= text.size()) {
            size_t comma = text.find(',', start);
            if (comma == std::string::npos) comma = text.size();
            const std::string item = text.substr(start, comma - start);
            std::vector<int> size;
            const char* p = item.c_str();
            for (int d = 0; d < dims; ++d) {
                char* end = nullptr;
                const long v = std::strtol(p, &end, 10);
                if (end == p || v <= 0 || v > INT32_MAX || (d + 1 < dims ? *end != 'x' : *end != '\0')) {
                    size.clear();
                    break;
                }
                size.push_back(int(v));
                p = end + 1;
            }
            if (size.empty()) usage("--" + name + " wants " + what + ", got '" + text + "'");
            out.push_back(size);
            start = comma + 1;
        }
        return out;
    }

    // --list-shapes=NAME: print the sizes of --NAME, one a line, and exit 0.
    void list_if_asked(const std::string& name, const std::vector<std::vector<int>>& sizes) const {
        const std::optional<std::string> which = get("list-shapes");
        if (!which || *which != name) return;
        for (const auto& size : sizes) {
            std::string line;
            for (size_t d = 0; d < size.size(); ++d) line += (d ? "x" : "") + std::to_string(size[d]);
            std::fprintf(stdout, "%s\n", line.c_str());
        }
        std::fflush(stdout);
        std::exit(0);
    }

  public:

    // Whether variant `name` should run: every variant when --variants is absent.
    bool want(const std::string& name) const {
        return !has_variants_ || std::find(variants_.begin(), variants_.end(), name) != variants_.end();
    }
    const std::vector<std::string>& variants() const { return variants_; }

    // Exit 2 when --variants names a variant the artifact does not have.
    void require_known(std::initializer_list<const char*> known) const { require_known(std::vector<std::string>(known.begin(), known.end())); }
    void require_known(const std::vector<std::string>& known) const {
        for (auto& v : variants_)
            if (std::find(known.begin(), known.end(), v) == known.end()) usage("unknown variant '" + v + "'");
    }

    // The same for an artifact's table of variants: anything iterable whose items have a `name`.
    template <typename Table>
    void require_known_in(const Table& table) const {
        std::vector<std::string> known;
        for (const auto& v : table) known.push_back(v.name);
        require_known(known);
    }

    // Runner options from --target-rse, --min-samples, --max-samples, --max-seconds, --warmup, --no-flush,
    // --timing=cupti|events, --recheck-seed=N, --protocol-selftest, --sustained=a,b; exit 2 on a value out of range.
    BenchOptions bench_options() const {
        BenchOptions o;
        o.target_rse = get_double("target-rse", o.target_rse);
        o.min_samples = int(get_int("min-samples", o.min_samples));
        o.max_samples = int(get_int("max-samples", o.max_samples));
        o.max_seconds = get_double("max-seconds", o.max_seconds);
        o.warmup = int(get_int("warmup", o.warmup));
        o.flush_l2 = !has("no-flush");
        const std::string timing = get_str("timing", "cupti");
        if (timing != "cupti" && timing != "events") usage("--timing wants cupti or events, got '" + timing + "'");
        o.cupti = timing == "cupti";
        if (has("recheck-seed")) o.recheck_seed = uint64_t(get_int("recheck-seed", 0));
        o.selftest_record = has("protocol-selftest");
        o.sustained = list("sustained");
        if (o.max_samples < 1 || o.min_samples < 0 || o.warmup < 0 || !(o.max_seconds > 0) || !(o.target_rse >= 0))
            usage("--max-samples wants >= 1, --min-samples and --warmup >= 0, --max-seconds > 0, --target-rse >= 0");
        return o;
    }

    // --seed=N, or a fresh seed from the clock (inputs differ from run to run; log it to reproduce).
    uint64_t seed() const {
        if (has("seed")) return uint64_t(get_int("seed", 0));
        return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ 0x5eedull;
    }


    [[noreturn]] static void usage(const std::string& msg) {
        std::fprintf(stderr, "usage error: %s\n", msg.c_str());
        std::exit(2);
    }

  private:
    template <typename Shape, int... I>
    static Shape make_shape(const std::vector<int>& d, std::integer_sequence<int, I...>) {
        return Shape{d[I]...};
    }

    std::vector<std::pair<std::string, std::string>> kv_;
    std::vector<std::string> variants_;
    bool has_variants_ = false;
};

}  // namespace kwiki
