// bench_host_test.cu: exercises the pure-host parts of kwiki_bench.cuh (no GPU needed).
// Build: nvcc -std=c++17 -I artifacts/common -o bench_host_test artifacts/common/test/bench_host_test.cu
// Run:   bench_host_test <case> [args...]; records go to stdout, one per line, for tests/test_bench_protocol.py.
//   args     print a record whose params echo the parsed arguments (variants, want(), get_int, get_double)
//   sizes    print a record whose param "sizes" echoes get_sizes("sizes", "1x2,3x4", 2, ...) as "AxB;AxB"
//   records  print a passed record with timing and a failed one (which must drop its timing); exit_code()
//   compare  print one record per compare() case (exact, within, outside, NaN, Inf) with extra.passed
//   stats    print summarize() of fixed samples and random_unit() values in extra
//   variants kwiki::Args over a VariantInfo table (and a derived one): --list-variants prints the names and
//            exits 0 inside Args; otherwise a record "reached" (so nothing after Args ran when it is absent)
//   variants_cuda  kwiki::Args, then a CUDA call (exits 2 where no device is visible): --list-variants must
//            print and exit before it
//   recheck  --seed S --cases C --n N --max-samples M: one record per case, extra.samples = the re-checked
//            sample indices ("i;j;..."), extra.needed, extra.sets = the input set of each of N samples (2 sets)
//   clocks   a ClockTally fed fixed NVML readings (reason bits and power; violation counters only; no NVML);
//            the records' clocks are its summaries
//   window   cupti::summarize and cupti::parse_record over fixed activity records
//   kernels  the distinct kernel names of a window (cupti::parse_record reads them), demangled into Record::kernels
//   protocol a complete protocol-2 record (every new field set), as an artifact run prints it
#include "kwiki_bench.cuh"

// The activity-record offsets kwiki_cupti.cuh reads, against the installed CUPTI header where there is one.
#if __has_include(<cupti_activity.h>)
#include <cupti_activity.h>
#include <cstddef>
static_assert(offsetof(CUpti_ActivityKernel10, start) == kwiki::cupti::kStartOffset, "kernel start");
static_assert(offsetof(CUpti_ActivityKernel10, end) == kwiki::cupti::kEndOffset, "kernel end");
static_assert(offsetof(CUpti_ActivityKernel9, start) == kwiki::cupti::kStartOffset, "kernel9 start");
static_assert(offsetof(CUpti_ActivityKernel10, name) == kwiki::cupti::kNameOffset, "kernel name");
static_assert(offsetof(CUpti_ActivityKernel9, name) == kwiki::cupti::kNameOffset, "kernel9 name");
static_assert(offsetof(CUpti_ActivityKernel4, name) == kwiki::cupti::kNameOffset, "kernel4 name");
static_assert(offsetof(CUpti_ActivityMemcpy6, start) == kwiki::cupti::kStartOffset, "memcpy start");
static_assert(offsetof(CUpti_ActivityMemcpy6, end) == kwiki::cupti::kEndOffset, "memcpy end");
static_assert(offsetof(CUpti_ActivityMemcpyPtoP4, start) == kwiki::cupti::kStartOffset, "memcpy2 start");
static_assert(offsetof(CUpti_ActivityMemset4, start) == kwiki::cupti::kStartOffset, "memset start");
static_assert(offsetof(CUpti_ActivityMemset4, end) == kwiki::cupti::kEndOffset, "memset end");
static_assert(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL == kwiki::cupti::kKindConcurrentKernel, "kind");
static_assert(CUPTI_ACTIVITY_KIND_MEMCPY == kwiki::cupti::kKindMemcpy && CUPTI_ACTIVITY_KIND_MEMSET == kwiki::cupti::kKindMemset &&
              CUPTI_ACTIVITY_KIND_MEMCPY2 == kwiki::cupti::kKindMemcpy2 && CUPTI_ACTIVITY_KIND_KERNEL == kwiki::cupti::kKindKernel, "kinds");
static_assert(CUPTI_ERROR_MAX_LIMIT_REACHED == kwiki::cupti::kErrorMaxLimitReached, "max limit");
static_assert(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED == kwiki::cupti::kFlushForced, "flush forced");
#define KWIKI_TEST_CUPTI_HEADER 1
#else
#define KWIKI_TEST_CUPTI_HEADER 0
#endif


static kwiki::CheckResult ok_check() {
    kwiki::CheckResult c;
    c.passed = true;
    c.reference = "exact";
    return c;
}

static int case_args(int argc, char** argv) {
    kwiki::Args args(argc, argv);
    kwiki::Record r;
    r.variant = "args";
    std::string joined;
    for (auto& v : args.variants()) joined += (joined.empty() ? "" : ",") + v;
    r.params = {{"variants", joined}, {"want_a", args.want("a")}, {"want_z", args.want("z")},
                {"m", args.get_int("m", -1)}, {"x", args.get_double("x", 0.5)}, {"name", args.get_str("name", "none")},
                {"flag", args.has("flag")}};
    r.check = ok_check();
    kwiki::emit(r);
    args.require_known({"a", "b", "c"});
    return kwiki::exit_code();
}

static int case_sizes(int argc, char** argv) {
    kwiki::Args args(argc, argv);
    std::string joined;
    for (const auto& d : args.get_sizes("sizes", "1x2,3x4", 2, "AxB pairs"))
        joined += (joined.empty() ? "" : ";") + std::to_string(d[0]) + "x" + std::to_string(d[1]);
    kwiki::Record r;
    r.variant = "sizes";
    r.params = {{"sizes", joined}};
    r.check = ok_check();
    kwiki::emit(r);
    return kwiki::exit_code();
}

static int case_records() {
    kwiki::Record r;
    r.variant = "good \"quoted\"\n";
    r.params = {{"shape", "4096x7168"}, {"dtype", "bf16"}, {"M", 4096}, {"big", 1ull << 40}};
    r.bytes = 58720256.0;
    r.flops = 2.0 * 4096 * 7168;
    r.timing = kwiki::summarize({10.0, 11.0, 12.0, 13.0, 14.0});
    r.check = ok_check();
    r.check.max_abs_err = 0.0;
    r.clocks.sm_mhz_before = 1980.0;
    r.extra = {{"registers", 32}, {"local_bytes", 0}, {"nan_dropped", std::nan("")}, {"ratio", 0.25}};
    kwiki::emit(r);
    int after_good = kwiki::exit_code();
    kwiki::Record bad = r;
    bad.variant = "bad";
    bad.check.passed = false;
    bad.check.max_abs_err = INFINITY;
    kwiki::emit(bad);
    std::fprintf(stderr, "exit codes %d %d\n", after_good, kwiki::exit_code());
    return after_good == 0 ? kwiki::exit_code() : 3;
}

static int case_compare() {
    const double ref[4] = {1.0, -2.0, 0.0, 1000.0};
    struct Case { const char* name; float got[4]; };
    const Case cases[] = {
        {"exact", {1.0f, -2.0f, 0.0f, 1000.0f}},
        {"within", {1.001f, -2.002f, 0.0005f, 1000.9f}},
        {"outside", {1.0f, -2.0f, 0.0f, 1010.0f}},
        {"nan", {1.0f, NAN, 0.0f, 1000.0f}},
        {"inf", {1.0f, -2.0f, INFINITY, 1000.0f}},
    };
    for (const Case& c : cases) {
        kwiki::Record r;
        r.variant = c.name;
        kwiki::CheckResult res = kwiki::compare(c.got, ref, 4, {1e-3, 2e-3}, "fixed values");
        r.check = ok_check();  // report compare()'s verdict in extra, keep the record itself valid
        r.extra = {{"passed", res.passed}, {"bad", static_cast<unsigned long long>(res.bad)},
                   {"max_abs_err", res.max_abs_err}};
        kwiki::emit(r);
    }
    unsigned char a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 2, 9, 4, 5};
    kwiki::Record r;
    r.variant = "bytes";
    kwiki::CheckResult same = kwiki::compare_bytes(a, a, 5, "copy"), diff = kwiki::compare_bytes(a, b, 5, "copy");
    r.check = ok_check();
    r.extra = {{"same", same.passed}, {"diff", diff.passed}, {"diff_bad", static_cast<unsigned long long>(diff.bad)}};
    kwiki::emit(r);
    return kwiki::exit_code();
}

static int case_stats() {
    std::vector<double> s;
    for (int i = 100; i >= 1; --i) s.push_back(double(i));
    kwiki::Timing t = kwiki::summarize(s);
    kwiki::Record r;
    r.variant = "stats";
    r.timing = t;
    r.check = ok_check();
    r.extra = {{"u0", double(kwiki::random_unit(7, 0, -1.f, 1.f))}, {"u1", double(kwiki::random_unit(7, 1, -1.f, 1.f))},
               {"u0_again", double(kwiki::random_unit(7, 0, -1.f, 1.f))}, {"h", static_cast<unsigned long long>(kwiki::hash64(1, 2) >> 1)}};
    kwiki::emit(r);
    return kwiki::exit_code();
}


static constexpr kwiki::VariantInfo kTable[] = {{"cublas"}, {"tiled"}, {"read_ceiling"}};
struct Derived : kwiki::VariantInfo {
    bool tf32;
};
static constexpr Derived kDerived[] = {{{"bf16_a"}, false}, {{"tf32_b"}, true}};

static int case_variants(int argc, char** argv) {
    const bool derived = argc > 1 && std::string(argv[1]) == "derived";
    if (derived) kwiki::Args args(argc - 1, argv + 1, kDerived);
    else kwiki::Args args(argc, argv, kTable);
    kwiki::Record r;
    r.variant = "reached";
    r.params = {{"name_tiled", kTable[1].name}, {"tf32_b", kDerived[1].tf32}};
    r.check = ok_check();
    kwiki::emit(r);
    return kwiki::exit_code();
}

static int case_variants_cuda(int argc, char** argv) {
    kwiki::Args args(argc, argv, kTable);
    kwiki::Record r;
    r.variant = "after_cuda";
    r.params = {{"sms", kwiki::sm_count()}};
    r.check = ok_check();
    kwiki::emit(r);
    return kwiki::exit_code();
}

static int case_recheck(int argc, char** argv) {
    kwiki::Args args(argc, argv);
    const uint64_t seed = uint64_t(args.get_int("seed", 1));
    const int cases = int(args.get_int("cases", 4)), n = int(args.get_int("n", 40));
    const int max_samples = int(args.get_int("max-samples", 2000));
    for (int c = 0; c < cases; ++c) {
        std::string idx, sets;
        for (int i : kwiki::recheck_samples(seed, uint64_t(c), n, max_samples)) idx += (idx.empty() ? "" : ";") + std::to_string(i);
        for (int i = 0; i < n; ++i) sets += std::to_string(kwiki::input_set_for(seed, uint64_t(c), i, 2));
        kwiki::Record r;
        r.variant = "case" + std::to_string(c);
        r.check = ok_check();
        r.extra = {{"samples", idx}, {"needed", kwiki::RecheckPlan(seed, uint64_t(c), max_samples).needed()}, {"sets", sets},
                   {"rate", kwiki::RecheckPlan::kRate}, {"scale", kwiki::RecheckPlan::kScale},
                   {"min_samples", kwiki::RecheckPlan::kMinSamples}};
        kwiki::emit(r);
    }
    return kwiki::exit_code();
}

static int case_clocks() {
    using R = kwiki::SampleReading;
    kwiki::ClockTally t;
    // sample 1: 1980 MHz, 500 W for 4 ms, the SW power cap set
    t.add(R{1980.0, kwiki::kReasonSwPowerCap, 500000.0, {}, {}, {}, {}}, 0.004);
    // sample 2: 1755 MHz, 700 W for 6 ms, HW slowdown set
    t.add(R{1755.0, kwiki::kReasonHwSlowdown, 700000.0, {}, {}, {}, {}}, 0.006);
    // sample 3: 1830 MHz, no reason set, 2 ms, no power reading
    t.add(R{1830.0, 0ull, std::nullopt, {}, {}, {}, {}}, 0.002);
    kwiki::Record r;
    r.variant = "tally";
    r.check = ok_check();
    r.clocks = t.summary();
    kwiki::emit(r);

    // no reasons: the violation counters, each sample's growth at most its window (NVML updates them coarsely)
    kwiki::ClockTally counters;
    counters.add(R{1500.0, std::nullopt, std::nullopt, 5000000000ull, 5001000000ull, 7000000000ull, 7000000000ull}, 0.004);
    counters.add(R{1500.0, std::nullopt, std::nullopt, 5001000000ull, 5021000000ull, 7000000000ull, 7000500000ull}, 0.004);
    counters.add(R{1500.0, std::nullopt, std::nullopt, 5021000000ull, 1000ull, 7000500000ull, 7000500000ull}, 0.004);  // reset
    kwiki::Record b;
    b.variant = "counters";
    b.check = ok_check();
    b.clocks = counters.summary();
    kwiki::emit(b);

    kwiki::ClockTally none;  // no NVML at all
    none.add(R{}, 0.01);
    kwiki::Record z;
    z.variant = "none";
    z.check = ok_check();
    z.clocks = none.summary();
    kwiki::emit(z);
    return kwiki::exit_code();
}

static void put_record(std::vector<uint8_t>& buf, int kind, uint64_t start, uint64_t end, size_t size) {
    std::vector<uint8_t> rec(size, 0);
    std::memcpy(rec.data(), &kind, 4);
    std::memcpy(rec.data() + kwiki::cupti::kStartOffset, &start, 8);
    std::memcpy(rec.data() + kwiki::cupti::kEndOffset, &end, 8);
    buf.insert(buf.end(), rec.begin(), rec.end());
}

static int case_window() {
    using namespace kwiki::cupti;
    // a kernel on the launch stream, one hidden on another stream after it, a memcpy overlapping both,
    // a record CUPTI could not time, and one of a kind that is not timed (an API record, kind 4)
    std::vector<uint8_t> buf;
    put_record(buf, kKindConcurrentKernel, 1000, 3000, 128);
    put_record(buf, kKindConcurrentKernel, 5000, 9000, 128);
    put_record(buf, kKindMemcpy, 2500, 4000, 96);
    put_record(buf, kKindMemset, 0, 0, 80);
    put_record(buf, 4, 10, 100000, 64);
    std::vector<Span> spans;
    for (size_t at : {size_t(0), size_t(128), size_t(256), size_t(352), size_t(432)}) {
        Span sp;
        if (parse_record(buf.data() + at, &sp)) spans.push_back(sp);
    }
    const Window w = summarize(spans);
    const Window empty = summarize({});
    const Window only_invalid = summarize({Span{0, 0, kKindConcurrentKernel}, Span{50, 10, kKindMemset}});
    // the window opened at 2000: the kernel that started at 1000 was earlier work (a poison, a flush)
    const Window opened = summarize(spans, 2000);
    // two streams at once count once: [1,11] and [6,13] and [21,31] us are busy 12 + 10 = 22, span 30
    const Window overlap = summarize({Span{21000, 31000, 10}, Span{1000, 11000, 10}, Span{6000, 13000, 10}});
    kwiki::Record r;
    r.variant = "window";
    r.check = ok_check();
    r.extra = {{"parsed", static_cast<unsigned long long>(spans.size())}, {"records", static_cast<unsigned long long>(w.records)},
               {"invalid", static_cast<unsigned long long>(w.invalid)}, {"span_us", w.span_us()}, {"busy_us", w.busy_us()},
               {"any", w.any()}, {"empty_any", empty.any()}, {"invalid_only_any", only_invalid.any()},
               {"opened_records", static_cast<unsigned long long>(opened.records)}, {"opened_busy_us", opened.busy_us()},
               {"overlap_busy_us", overlap.busy_us()}, {"overlap_span_us", overlap.span_us()},
               {"kernel_records", static_cast<unsigned long long>(w.kernel_records)},
               {"stamp_mhz", *kwiki::stamp_mhz(kwiki::ClockStamp{1000, 5000, 1000 + 1794 * 100, 105000})},
               {"stamp_short", kwiki::stamp_mhz(kwiki::ClockStamp{1000, 5000, 2000, 6000}).has_value()},
               {"header_checked", bool(KWIKI_TEST_CUPTI_HEADER)}};
    kwiki::emit(r);
    return kwiki::exit_code();
}

// Kernel identity: the names of the kernel records in a window, distinct, demangled for the record.
static int case_kernels() {
    using namespace kwiki::cupti;
    static const char* kGemv = "_Z10gemv_blockILi128EEvPKfPfi";
    static const char* kPlain = "plain_kernel";  // extern "C": not mangled, kept as is
    static const char* kPoison = "_Z6poisonPf";  // started before the window opened: earlier work
    std::vector<uint8_t> buf;
    const char* names[] = {kGemv, kPlain, kGemv, kPoison};
    const uint64_t starts[] = {3000, 4000, 5000, 1000};
    for (int i = 0; i < 4; ++i) {
        put_record(buf, kKindConcurrentKernel, starts[i], starts[i] + 500, 128);
        std::memcpy(buf.data() + buf.size() - 128 + kNameOffset, &names[i], sizeof(const char*));
    }
    put_record(buf, kKindMemcpy, 2500, 2600, 96);
    std::vector<Span> spans;
    for (size_t at = 0; at < buf.size(); at += at < 4 * 128 ? 128 : 96) {
        Span sp;
        if (parse_record(buf.data() + at, &sp)) spans.push_back(sp);
    }
    const Window w = summarize(spans, 2000);
    kwiki::Record r;
    r.variant = "kernels";
    r.check = ok_check();
    std::vector<std::string> demangled;
    for (const std::string& k : w.kernels) demangled.push_back(demangle(k));
    r.kernels = demangled;
    r.extra = {{"mangled", static_cast<unsigned long long>(w.kernels.size())}, {"first", w.kernels.empty() ? "" : w.kernels[0]}};
    kwiki::emit(r);
    return kwiki::exit_code();
}

static int case_protocol() {
    kwiki::Record r;
    r.variant = "ws_persistent";
    r.params = {{"M", 8192}, {"N", 8192}, {"K", 8192}, {"dtype", "bf16"}};
    r.flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
    r.flops_dtype = "bf16";
    r.bytes = 3.0 * 8192 * 8192 * 2;
    r.bytes_level = "dram";
    r.timing = kwiki::summarize({1421.5, 1430.25, 1418.0, 1425.75, 1440.0});
    r.timing_source = "cupti";
    r.rechecked = 3;
    r.check = ok_check();
    r.check.reference = "cuBLAS (every element) and host fp64 (sampled elements)";
    r.check.detail = "vs cuBLAS: 67108864 elements within atol=0.0181 rtol=0.0156";
    kwiki::ClockTally t;
    t.add(kwiki::SampleReading{1755.0, kwiki::kReasonSwPowerCap, 690000.0, {}, {}, {}, {}}, 0.0016);
    t.add(kwiki::SampleReading{1740.0, kwiki::kReasonSwPowerCap, 700000.0, {}, {}, {}, {}}, 0.0016);
    r.clocks = t.summary();
    r.clocks.sm_mhz_effective = 1639.0;
    r.clocks.sm_mhz_effective_by = "clock64";
    r.extra = {{"tile", "128x256x64"}, {"stages", 4}, {"registers", 168}, {"event_median_us", 1428.5}};
    r.timer = kwiki::TimerInfo{1431.0, 1426.0, 1.0, 6.5, 2.25, "own-not-listed"};
    kwiki::SustainedInfo u;
    u.timing = kwiki::summarize({1650.0, 1655.0, 1660.0});
    u.launches = 14, u.duty = 0.998, u.settle_s = 1.25, u.settled = true, u.sm_mhz = 1800.0, u.power_w = 695.0;
    r.sustained = u;
    kwiki::emit(r);
    kwiki::Record l2 = r;  // a failed re-check: no timing, the failing sample named
    l2.variant = "cheat";
    l2.timing.reset();
    l2.rechecked = 1;
    l2.check.passed = false;
    l2.check.detail = "timed sample 4 differs from the reference: 67108864 of 67108864 outside atol=0.0181 rtol=0.0156";
    kwiki::emit(l2);
    return kwiki::exit_code();
}

// shapes: get_shapes("shapes", no default, 2 dims, K a multiple of 8) as the GEMV artifacts call it, then a CUDA
// call (sm_count): --list-shapes=shapes must print and exit before it.
struct Mk { int M, K; };
static int case_shapes(int argc, char** argv) {
    kwiki::Args args(argc, argv);
    const auto shapes = args.get_shapes<Mk, 2>("shapes", "", "MxK pairs with K a multiple of 8",
                                               [](const std::vector<int>& d) { return d[1] % 8 == 0; });
    kwiki::Record r;
    r.variant = "shapes";
    r.params = {{"count", int(shapes.size())}, {"sms", kwiki::sm_count()}};
    r.check = ok_check();
    kwiki::emit(r);
    return kwiki::exit_code();
}

int main(int argc, char** argv) {
    std::string which = argc > 1 ? argv[1] : "";
    if (which == "args") return case_args(argc - 1, argv + 1);
    if (which == "sizes") return case_sizes(argc - 1, argv + 1);
    if (which == "shapes") return case_shapes(argc - 1, argv + 1);
    if (which == "records") return case_records();
    if (which == "compare") return case_compare();
    if (which == "stats") return case_stats();
    if (which == "variants") return case_variants(argc - 1, argv + 1);
    if (which == "variants_cuda") return case_variants_cuda(argc - 1, argv + 1);
    if (which == "recheck") return case_recheck(argc - 1, argv + 1);
    if (which == "clocks") return case_clocks();
    if (which == "window") return case_window();
    if (which == "kernels") return case_kernels();
    if (which == "protocol") return case_protocol();
    std::fprintf(stderr, "unknown case '%s'\n", which.c_str());
    return 2;
}
