// kwiki_record.cuh: a case's timing summary and its result record, one JSON line on stdout (the format of
// kwiki/results/record.py, carrying PROTOCOL_VERSION), and the exit code that counts failed checks. Part of
// kwiki_bench.cuh; includes kwiki_device.cuh (and through it kwiki_check.cuh).
#pragma once

#include "kwiki_device.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace kwiki {

// The measurement protocol a record was taken under (kwiki/results/record.py reads it). 2: every timed sample
// poisoned and flushed, a random subset re-checked, CUPTI spans over every stream, clocks and power per case.
// 3: re-checks spread over the whole sampling window, what the timer saw (bracket, span, kernels, this process's
// bracket cost) against work it cannot see, one process on the GPU, fresh inputs, sustained blocks, the clock
// the kernel ran at.
inline constexpr int PROTOCOL_VERSION = 3;

// ===================================================================================================
// Timing figures and options
// ===================================================================================================

struct Timing {
    double median_us = 0, q1_us = 0, q3_us = 0, min_us = 0;
    int samples = 0;
    double rse = 0;
};

// What the timer saw beside the busy time (record.py's Timer).
struct TimerInfo {
    double event_median_us = 0, span_median_us = 0, kernels = 0, fixed_us = 0, per_launch_us = 0;
    std::string contexts;  // "listed", "own-not-listed", "unavailable"; empty: not asked
};

// Blocks of back-to-back launches after the clock and power settled (record.py's Sustained).
struct SustainedInfo {
    Timing timing;
    int launches = 0;
    double duty = 0, settle_s = 0;
    std::optional<double> sm_mhz, power_w;
    bool settled = false;
};


inline double quantile(const std::vector<double>& sorted, double q) {  // linear interpolation
    if (sorted.empty()) return 0;
    double pos = q * double(sorted.size() - 1);
    size_t lo = size_t(pos);
    size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

// Median, quartiles, min and rse (1.2533 * (IQR/1.349) / sqrt(n) / median) of samples in microseconds.
inline Timing summarize(std::vector<double> us) {
    Timing t;
    std::sort(us.begin(), us.end());
    t.samples = int(us.size());
    if (us.empty()) return t;
    t.min_us = us.front();
    t.q1_us = quantile(us, 0.25);
    t.median_us = quantile(us, 0.5);
    t.q3_us = quantile(us, 0.75);
    double sd = (t.q3_us - t.q1_us) / 1.349;
    t.rse = t.median_us > 0 ? 1.2533 * sd / std::sqrt(double(us.size())) / t.median_us : 0;
    return t;
}

// ===================================================================================================
// Result records (JSON, one per line on stdout)
// ===================================================================================================

// A JSON scalar: integer, number, string or bool.
struct Scalar {
    enum Kind { Int, Num, Str, Bool } kind;
    long long i = 0;
    double d = 0;
    std::string s;
    bool b = false;
    Scalar(int v) : kind(Int), i(v) {}
    Scalar(long v) : kind(Int), i(v) {}
    Scalar(long long v) : kind(Int), i(v) {}
    Scalar(unsigned v) : kind(Int), i(v) {}
    Scalar(unsigned long v) : kind(Int), i(static_cast<long long>(v)) {}
    Scalar(unsigned long long v) : kind(Int), i(static_cast<long long>(v)) {}
    Scalar(double v) : kind(Num), d(v) {}
    Scalar(float v) : kind(Num), d(v) {}
    Scalar(const char* v) : kind(Str), s(v) {}
    Scalar(std::string v) : kind(Str), s(std::move(v)) {}
    Scalar(bool v) : kind(Bool), b(v) {}
};

using Fields = std::vector<std::pair<std::string, Scalar>>;

struct Record {
    std::string variant;
    Fields params;                   // shape, dtype, ... (what identifies the configuration)
    std::optional<double> bytes;     // bytes one launch moves (declared)
    std::string bytes_level = "dram";  // where those bytes move: "dram", "l2" or "smem" (the physical gate's level)
    std::optional<double> flops;     // floating-point operations of one launch
    std::string flops_dtype;         // the dtype they run in: "bf16", "tf32", "fp8", "fp16", "fp32"; empty: none
    std::optional<Timing> timing;    // dropped when the check failed
    std::string timing_source;       // "cupti" or "events" (empty without timing)
    int rechecked = 0;               // timed samples compared with the reference
    CheckResult check;
    Clocks clocks;
    Fields extra;                    // registers, local_bytes, event_median_us, other numbers
    std::optional<std::vector<std::string>> kernels;  // kernels CUPTI saw in the timed samples (demangled); none: unseen
    std::optional<TimerInfo> timer;                   // what the timer saw (CUPTI timing only)
    std::optional<SustainedInfo> sustained;           // --sustained's figure

    void set_regs(const KernelRegs& r) {
        extra.emplace_back("registers", r.registers);
        extra.emplace_back("local_bytes", static_cast<unsigned long long>(r.local_bytes));
    }
};

namespace detail {
inline std::string quote(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            case '\r': o += "\\r"; break;
            default:
                if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
                else o += char(c);
        }
    }
    return o + "\"";
}
inline std::string number(std::optional<double> v) {  // non-finite and absent become null
    if (!v || !std::isfinite(*v)) return "null";
    char b[40];
    std::snprintf(b, sizeof b, "%.17g", *v);
    return b;
}
inline std::string scalar(const Scalar& v) {
    switch (v.kind) {
        case Scalar::Int: return std::to_string(v.i);
        case Scalar::Num: return std::isfinite(v.d) ? number(v.d) : "null";
        case Scalar::Str: return quote(v.s);
        case Scalar::Bool: return v.b ? "true" : "false";
    }
    return "null";
}
inline std::string object(const Fields& f) {  // non-finite numbers are left out (records hold finite ones only)
    std::string o = "{";
    for (auto& [k, v] : f) {
        if (v.kind == Scalar::Num && !std::isfinite(v.d)) continue;
        if (o.size() > 1) o += ",";
        o += quote(k) + ":" + scalar(v);
    }
    return o + "}";
}
inline int& failures() { static int n = 0; return n; }
}  // namespace detail

// The record as one line of JSON (no newline).
inline std::string to_json(const Record& r) {
    using namespace detail;
    std::string o = "{\"kwiki_record\":1,\"protocol\":" + std::to_string(PROTOCOL_VERSION) + ",\"variant\":" + quote(r.variant);
    o += ",\"params\":" + object(r.params);
    o += ",\"bytes\":" + number(r.bytes) + ",\"bytes_level\":" + quote(r.bytes_level);
    o += ",\"flops\":" + number(r.flops) + ",\"flops_dtype\":" + (r.flops_dtype.empty() ? std::string("null") : quote(r.flops_dtype));
    const Timing* t = r.check.passed && r.timing ? &*r.timing : nullptr;
    const bool timed = t && t->samples > 0 && t->min_us > 0;
    if (timed)
        o += ",\"timing\":{\"median_us\":" + number(t->median_us) + ",\"q1_us\":" + number(t->q1_us) +
             ",\"q3_us\":" + number(t->q3_us) + ",\"min_us\":" + number(t->min_us) +
             ",\"samples\":" + std::to_string(t->samples) + ",\"rse\":" + number(t->rse) + "}";
    else
        o += ",\"timing\":null";
    o += ",\"timing_source\":" + (timed && !r.timing_source.empty() ? quote(r.timing_source) : std::string("null"));
    o += ",\"rechecked\":" + std::to_string(std::max(r.rechecked, 0));
    const CheckResult& c = r.check;
    o += ",\"check\":{\"passed\":" + std::string(c.passed ? "true" : "false") +
         ",\"max_abs_err\":" + number(c.max_abs_err) + ",\"max_rel_err\":" + number(c.max_rel_err) +
         ",\"tolerance\":" + number(c.tolerance) +
         ",\"reference\":" + (c.reference.empty() ? std::string("null") : quote(c.reference)) +
         ",\"detail\":" + (c.detail.empty() ? std::string("null") : quote(c.detail)) + "}";
    const Clocks& k = r.clocks;
    o += ",\"clocks\":{\"sm_mhz_before\":" + number(k.sm_mhz_before) + ",\"sm_mhz_after\":" + number(k.sm_mhz_after) +
         ",\"sm_mhz_min\":" + number(k.sm_mhz_min) + ",\"sm_mhz_median\":" + number(k.sm_mhz_median) +
         ",\"sm_mhz_max\":" + number(k.sm_mhz_max) + ",\"power_cap_s\":" + number(k.power_cap_s) +
         ",\"thermal_s\":" + number(k.thermal_s) + ",\"hw_slowdown_s\":" + number(k.hw_slowdown_s) +
         ",\"energy_j\":" + number(k.energy_j) + ",\"window_s\":" + number(k.window_s) +
         ",\"sm_mhz_effective\":" + number(k.sm_mhz_effective) + ",\"sm_mhz_effective_by\":" +
         (k.sm_mhz_effective && !k.sm_mhz_effective_by.empty() ? quote(k.sm_mhz_effective_by) : std::string("null")) + "}";
    o += ",\"extra\":" + object(r.extra);
    if (timed && r.timer) {
        const TimerInfo& w = *r.timer;
        o += ",\"timer\":{\"event_median_us\":" + number(w.event_median_us) + ",\"span_median_us\":" +
             number(w.span_median_us) + ",\"kernels\":" + number(w.kernels) + ",\"fixed_us\":" + number(w.fixed_us) +
             ",\"per_launch_us\":" + number(w.per_launch_us) + ",\"contexts\":" +
             (w.contexts.empty() ? std::string("null") : quote(w.contexts)) + "}";
    }
    if (timed && r.sustained && r.sustained->timing.samples > 0) {
        const SustainedInfo& u = *r.sustained;
        o += ",\"sustained\":{\"median_us\":" + number(u.timing.median_us) + ",\"q1_us\":" + number(u.timing.q1_us) +
             ",\"q3_us\":" + number(u.timing.q3_us) + ",\"min_us\":" + number(u.timing.min_us) +
             ",\"samples\":" + std::to_string(u.timing.samples) + ",\"launches\":" + std::to_string(u.launches) +
             ",\"duty\":" + number(std::min(u.duty, 1.0)) + ",\"sm_mhz\":" + number(u.sm_mhz) +
             ",\"power_w\":" + number(u.power_w) + ",\"settle_s\":" + number(u.settle_s) +
             ",\"settled\":" + (u.settled ? "true" : "false") + "}";
    }
    if (r.kernels) {
        o += ",\"kernels\":[";
        for (size_t i = 0; i < r.kernels->size(); ++i) o += (i ? "," : "") + quote((*r.kernels)[i]);
        o += "]";
    }
    return o + "}";
}

// Print one record line (stdout by default). A failed check is counted for exit_code().
inline void emit(const Record& r, FILE* out = stdout) {
    if (!r.check.passed) ++detail::failures();
    std::string line = to_json(r) + "\n";
    std::fwrite(line.data(), 1, line.size(), out);
    std::fflush(out);
}

// 0 when every emitted record passed its check, 1 otherwise: return it from main().
inline int exit_code() { return detail::failures() ? 1 : 0; }

}  // namespace kwiki
