// bench_host_test.cu: exercises the pure-host parts of kwiki_bench.cuh (no GPU needed).
// Build: nvcc -std=c++17 -I artifacts/common -o bench_host_test artifacts/common/test/bench_host_test.cu
// Run:   bench_host_test <case> [args...]; records go to stdout, one per line, for tests/test_bench_protocol.py.
//   args     print a record whose params echo the parsed arguments (variants, want(), get_int, get_double)
//   sizes    print a record whose param "sizes" echoes get_sizes("sizes", "1x2,3x4", 2, ...) as "AxB;AxB"
//   records  print a passed record with timing and a failed one (which must drop its timing); exit_code()
//   compare  print one record per compare() case (exact, within, outside, NaN, Inf) with extra.passed
//   stats    print summarize() of fixed samples and random_unit() values in extra
#include "kwiki_bench.cuh"

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

int main(int argc, char** argv) {
    std::string which = argc > 1 ? argv[1] : "";
    if (which == "args") return case_args(argc - 1, argv + 1);
    if (which == "sizes") return case_sizes(argc - 1, argv + 1);
    if (which == "records") return case_records();
    if (which == "compare") return case_compare();
    if (which == "stats") return case_stats();
    std::fprintf(stderr, "unknown case '%s'\n", which.c_str());
    return 2;
}
