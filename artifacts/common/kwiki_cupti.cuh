// kwiki_cupti.cuh: GPU-side start and end timestamps of every kernel, copy and memset the process runs, on any
// stream and from any thread, through CUPTI's activity API. Part of the protocol of kwiki_bench.cuh.
//
// Why CUPTI: a CUDA event pair on the launch stream times only that stream, and includes the host's enqueue time
// of the launch. A kernel that hides its work on a stream of its own (or launches it from another thread) is
// invisible to the events; CUPTI records every kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), memcpy and memset
// of the process with GPU timestamps, so a timed window's busy time (the union of their intervals) holds all the
// work and none of the host's enqueue time.
//
// Measured on an H200 (CUDA 13.0): after a *forced* flush the next launch takes ~200 us longer to enqueue, so
// windows are flushed with flag 0; and CUPTI adds 20-30 us of host time to each launch, which opens idle gaps
// between back-to-back kernels: the span from first start to last end counts them (a two-kernel cuBLAS GEMV:
// 33-45 us span, 18 us busy), the busy time does not.
//
// Loaded at run time (dlopen), like NVML and cuBLAS: a build needs neither CUPTI's headers nor its library, and a
// machine without it falls back to CUDA events (the record says so: timing_source "events"). The library is
// looked for as $KWIKI_CUPTI (a path), then libcupti.so.13, .so.12, .so on the loader path, then under
// $CUDA_HOME, $CUDA_PATH and /usr/local/cuda*/ (lib64 and extras/CUPTI/lib64). Each failure is one line on stderr.
//
// What it declares: exactly the values, record layout and entry points used here, from cupti_result.h and
// cupti_activity.h of CUDA 12 and 13. Every record of the kinds enabled (kernel, memcpy, memcpy2, memset) starts
// with its kind (4 bytes) and holds its start and end (uint64 ns) at byte offsets 16 and 24, in every version of
// those records (CUpti_ActivityKernel4..10, Memcpy5..6, MemcpyPtoP2..4, Memset2..4); bench_host_test checks the
// offsets against the installed header where there is one. Kernel records (CUpti_ActivityKernel4..10) also hold
// the kernel's mangled name (a const char*, CUPTI's own string) at byte offset 104: a window keeps the distinct
// names of the kernels that ran in it (Window::kernels), for kernel identity (kwiki/verify/gates.py).
//
// Use (the Runner of kwiki_runner.cuh does this around every timed sample):
//   auto& cupti = kwiki::cupti::Activity::get();      // loads and enables once; cupti.enabled(), cupti.why_not()
//   KWIKI_CHECK(cudaDeviceSynchronize());  cupti.open();        // everything before the window is discarded
//   launch(...);  KWIKI_CHECK(cudaDeviceSynchronize());
//   kwiki::cupti::Window w = cupti.close();                     // w.records, w.busy_us(), w.span_us(), w.kernels
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cxxabi.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace kwiki {
namespace cupti {

// ===================================================================================================
// Values and layouts (cupti_result.h, cupti_activity.h)
// ===================================================================================================

constexpr int kSuccess = 0;               // CUPTI_SUCCESS
constexpr int kErrorMaxLimitReached = 12;  // CUPTI_ERROR_MAX_LIMIT_REACHED: no more records in the buffer
constexpr int kKindMemcpy = 1;             // CUPTI_ACTIVITY_KIND_MEMCPY
constexpr int kKindMemset = 2;             // CUPTI_ACTIVITY_KIND_MEMSET
constexpr int kKindKernel = 3;             // CUPTI_ACTIVITY_KIND_KERNEL (never enabled here; parsed if seen)
constexpr int kKindConcurrentKernel = 10;  // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
constexpr int kKindMemcpy2 = 22;           // CUPTI_ACTIVITY_KIND_MEMCPY2 (peer to peer)
constexpr uint32_t kFlushForced = 1;       // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
constexpr size_t kStartOffset = 16, kEndOffset = 24;
constexpr size_t kNameOffset = 104;        // CUpti_ActivityKernel4..10::name (const char*, mangled)

// One record's GPU timestamps (ns, CUPTI's time base); start or end 0 means CUPTI could not time it.
struct Span {
    uint64_t start = 0, end = 0;
    int kind = 0;
    std::string name;  // kernel records: the kernel's (mangled) name; empty for copies and memsets
};

// The activity of one timed window: how many records, how many CUPTI could not time, the span from the earliest
// start to the latest end of the others, and their busy time: the length of the union of their intervals, so
// work on several streams at once counts once, and the GPU's idle gaps between launches (the host's enqueue
// time, which CUPTI's own per-launch cost lengthens by tens of microseconds) count not at all.
struct Window {
    size_t records = 0;
    size_t invalid = 0;
    uint64_t first_start = 0, last_end = 0;
    uint64_t busy_ns = 0;
    size_t kernel_records = 0;         // kernel records in the window (copies and fills not counted)
    std::vector<std::string> kernels;  // the distinct names of the kernels in the window (mangled), sorted

    bool any() const { return records > invalid; }
    double span_us() const { return any() ? double(last_end - first_start) * 1e-3 : 0.0; }
    double busy_us() const { return double(busy_ns) * 1e-3; }
};

// Pure (host-tested): the window of a set of records; those that started before `opened` (CUPTI's clock when
// the window opened; 0: no such bound) belong to earlier work and are left out.
inline Window summarize(std::vector<Span> spans, uint64_t opened = 0) {
    Window w;
    std::vector<Span> valid;
    for (const Span& s : spans) {
        if (opened && s.start != 0 && s.start < opened) continue;
        ++w.records;
        if (!s.name.empty()) w.kernels.push_back(s.name);
        if (s.kind == kKindConcurrentKernel || s.kind == kKindKernel) ++w.kernel_records;
        if (s.start == 0 || s.end == 0 || s.end < s.start) ++w.invalid;
        else valid.push_back(s);
    }
    std::sort(w.kernels.begin(), w.kernels.end());
    w.kernels.erase(std::unique(w.kernels.begin(), w.kernels.end()), w.kernels.end());
    std::sort(valid.begin(), valid.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    uint64_t cur_start = 0, cur_end = 0;
    for (size_t i = 0; i < valid.size(); ++i) {
        const Span& s = valid[i];
        if (i == 0) w.first_start = s.start, w.last_end = s.end, cur_start = s.start, cur_end = s.end;
        w.last_end = std::max(w.last_end, s.end);
        if (i > 0 && s.start > cur_end) w.busy_ns += cur_end - cur_start, cur_start = s.start, cur_end = s.end;
        else cur_end = std::max(cur_end, s.end);
    }
    if (!valid.empty()) w.busy_ns += cur_end - cur_start;
    return w;
}

// Pure (host-tested): the timestamps of one raw activity record, if it is of a kind we time.
inline bool parse_record(const uint8_t* rec, Span* out) {
    int32_t kind = 0;
    std::memcpy(&kind, rec, sizeof kind);
    if (kind != kKindConcurrentKernel && kind != kKindKernel && kind != kKindMemcpy && kind != kKindMemset &&
        kind != kKindMemcpy2)
        return false;
    out->kind = kind;
    std::memcpy(&out->start, rec + kStartOffset, sizeof out->start);
    std::memcpy(&out->end, rec + kEndOffset, sizeof out->end);
    out->name.clear();
    if (kind == kKindConcurrentKernel || kind == kKindKernel) {
        const char* name = nullptr;
        std::memcpy(&name, rec + kNameOffset, sizeof name);
        if (name) out->name = name;
    }
    return true;
}

// Pure (host-tested): a kernel's name as C++ spells it (`void k<128>(float const*, int)`), or the name itself
// when it is not a mangled C++ name (extern "C" kernels) or cannot be demangled.
inline std::string demangle(const std::string& name) {
    int status = 0;
    char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    std::string s = status == 0 && out ? out : name;
    std::free(out);
    return s;
}

// ===================================================================================================
// The library, opened once per process
// ===================================================================================================

class Activity {
  public:
    // Process-wide: CUPTI's buffer callbacks are global. The first call loads and enables CUPTI unless
    // `allow` is false (then it stays off, with the reason given).
    // It is never destroyed: CUPTI may still hand buffers back while the process exits.
    static Activity& get(bool allow = true, const char* why_off = "") {
        static Activity* a = new Activity(allow, why_off);
        return *a;
    }

    bool enabled() const { return enabled_; }
    const std::string& why_not() const { return why_not_; }

    // Turn CUPTI off for the rest of the process (a health check failed): records say "events" from then on.
    void disable(const std::string& why) {
        if (!enabled_) return;
        for (int k : enabled_kinds_) fn_.disable(k);
        enabled_ = false;
        why_not_ = why;
    }

    // Start a window: deliver and discard every record so far. Call with the device idle (after a sync), so
    // every earlier record is complete. A record of earlier work that CUPTI still holds back is left out of the
    // window by its start time (before the window opened). Flag 0, not a forced flush: after a forced flush the
    // next launch takes ~200 us longer to enqueue (measured on an H200, CUDA 13.0).
    void open() {
        if (!enabled_) return;
        flush(0, "cuptiActivityFlushAll (window start)");
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.clear();
        opened_ = 0;
        if (fn_.timestamp) fn_.timestamp(&opened_);
    }

    // End a window: with the device idle again (after a sync), deliver every record since open(). Should CUPTI
    // hold back a buffer (a record it considers incomplete) and the window look empty, a forced flush follows.
    Window close() {
        if (!enabled_) return {};
        flush(0, "cuptiActivityFlushAll (window end)");
        if (!take(false).any()) flush(kFlushForced, "cuptiActivityFlushAll (forced, window end)");
        const Window w = take(true);
        size_t dropped = 0;
        if (fn_.dropped && fn_.dropped(nullptr, 0, &dropped) == kSuccess && dropped > 0) {
            char msg[160];
            std::snprintf(msg, sizeof msg,
                          "CUPTI dropped %zu activity records (no buffer space): a window's time cannot be trusted", dropped);
            fail(msg);
        }
        return w;
    }

  private:
    using BufferRequested = void (*)(uint8_t** buffer, size_t* size, size_t* max_records);
    using BufferCompleted = void (*)(void* context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);
    struct Fns {
        int (*register_callbacks)(BufferRequested, BufferCompleted) = nullptr;  // cuptiActivityRegisterCallbacks
        int (*enable)(int kind) = nullptr;                                       // cuptiActivityEnable
        int (*disable)(int kind) = nullptr;                                      // cuptiActivityDisable
        int (*flush_all)(uint32_t flag) = nullptr;                               // cuptiActivityFlushAll
        int (*next_record)(uint8_t* buffer, size_t valid, void** record) = nullptr;  // cuptiActivityGetNextRecord
        int (*dropped)(void* context, uint32_t stream, size_t* n) = nullptr;     // cuptiActivityGetNumDroppedRecords
        int (*result_string)(int result, const char** text) = nullptr;           // cuptiGetResultString
        int (*timestamp)(uint64_t* ns) = nullptr;                                // cuptiGetTimestamp
    };
    static constexpr size_t kBufferBytes = size_t(1) << 20;

    Activity(bool allow, const char* why_off) {
        instance_ = this;  // the callbacks' way in (CUPTI may call them before get() has returned)
        if (!allow) {
            why_not_ = why_off;
            return;
        }
        std::string tried;
        void* lib = open_library(&tried);
        if (!lib) {
            why_not_ = "libcupti not found (" + tried + "); set KWIKI_CUPTI to its path";
            return;
        }
        if (!bind(lib)) return;
        int r = fn_.register_callbacks(&Activity::requested, &Activity::completed);
        if (r != kSuccess) {
            why_not_ = "cuptiActivityRegisterCallbacks: " + text(r);
            return;
        }
        for (int kind : {kKindConcurrentKernel, kKindMemcpy, kKindMemset}) {
            r = fn_.enable(kind);
            if (r != kSuccess) {
                for (int k : enabled_kinds_) fn_.disable(k);
                why_not_ = "cuptiActivityEnable(" + std::to_string(kind) + "): " + text(r);
                return;
            }
            enabled_kinds_.push_back(kind);
        }
        if (fn_.enable(kKindMemcpy2) == kSuccess) enabled_kinds_.push_back(kKindMemcpy2);  // peer copies: optional
        enabled_ = true;
    }

    static void* open_library(std::string* tried) {
        std::vector<std::string> names;
        if (const char* p = std::getenv("KWIKI_CUPTI"); p && *p) names.push_back(p);
        for (const char* n : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) names.push_back(n);
        std::vector<std::string> patterns;
        for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
            if (const char* p = std::getenv(env); p && *p) {
                patterns.push_back(std::string(p) + "/lib64/libcupti.so*");
                patterns.push_back(std::string(p) + "/extras/CUPTI/lib64/libcupti.so*");
            }
        patterns.push_back("/usr/local/cuda/lib64/libcupti.so*");
        patterns.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*");
        patterns.push_back("/usr/local/cuda-*/lib64/libcupti.so*");
        patterns.push_back("/usr/local/cuda-*/extras/CUPTI/lib64/libcupti.so*");
        for (const std::string& pat : patterns) {
            glob_t g{};
            if (glob(pat.c_str(), 0, nullptr, &g) == 0) {
                std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
                std::sort(found.rbegin(), found.rend());  // the newest version first
                names.insert(names.end(), found.begin(), found.end());
            }
            globfree(&g);
        }
        for (const std::string& n : names) {
            if (void* lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
            if (tried->size() < 400) *tried += (tried->empty() ? "" : ", ") + n;
        }
        return nullptr;
    }

    template <typename Fn>
    bool sym(void* lib, const char* name, Fn& fn, bool required = true) {
        fn = reinterpret_cast<Fn>(dlsym(lib, name));
        if (!fn && required) why_not_ = std::string("symbol ") + name + " not found in libcupti";
        return fn || !required;
    }

    bool bind(void* lib) {
        return sym(lib, "cuptiActivityRegisterCallbacks", fn_.register_callbacks) && sym(lib, "cuptiActivityEnable", fn_.enable) &&
               sym(lib, "cuptiActivityDisable", fn_.disable) && sym(lib, "cuptiActivityFlushAll", fn_.flush_all) &&
               sym(lib, "cuptiActivityGetNextRecord", fn_.next_record) &&
               sym(lib, "cuptiActivityGetNumDroppedRecords", fn_.dropped, false) &&
               sym(lib, "cuptiGetResultString", fn_.result_string, false) && sym(lib, "cuptiGetTimestamp", fn_.timestamp, false);
    }

    std::string text(int r) const {
        const char* s = nullptr;
        if (fn_.result_string && fn_.result_string(r, &s) == kSuccess && s) return s;
        return "CUPTI error " + std::to_string(r);
    }

    [[noreturn]] void fail(const char* msg) const {
        std::fprintf(stderr, "kwiki_cupti.cuh: %s\n", msg);
        std::exit(2);
    }

    void flush(uint32_t flag, const char* what) {
        const int r = fn_.flush_all(flag);
        if (r != kSuccess) fail((std::string(what) + ": " + text(r)).c_str());
    }

    // The window of the records delivered so far; `clear`: and forget them.
    Window take(bool clear) {
        std::lock_guard<std::mutex> lock(mutex_);
        Window w = summarize(pending_, opened_);
        if (clear) pending_.clear();
        return w;
    }

    // CUPTI asks for an empty buffer (from any thread): one from the pool, or a new one.
    static void requested(uint8_t** buffer, size_t* size, size_t* max_records) {
        Activity& a = *instance_;
        uint8_t* b = nullptr;
        {
            std::lock_guard<std::mutex> lock(a.mutex_);
            if (!a.pool_.empty()) b = a.pool_.back(), a.pool_.pop_back();
        }
        if (!b) b = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));  // nullptr: CUPTI counts a drop
        *buffer = b;
        *size = b ? kBufferBytes : 0;
        *max_records = 0;
    }

    // CUPTI hands back a buffer of records (from any thread): keep the timestamps, return the buffer to the pool.
    static void completed(void*, uint32_t, uint8_t* buffer, size_t, size_t valid) {
        Activity& a = *instance_;
        std::vector<Span> got;
        void* rec = nullptr;
        while (buffer && a.fn_.next_record(buffer, valid, &rec) == kSuccess) {
            Span s;
            if (parse_record(static_cast<const uint8_t*>(rec), &s)) got.push_back(std::move(s));
        }
        std::lock_guard<std::mutex> lock(a.mutex_);
        a.pending_.insert(a.pending_.end(), got.begin(), got.end());
        if (buffer) a.pool_.push_back(buffer);
    }

    static inline Activity* instance_ = nullptr;
    Fns fn_;
    bool enabled_ = false;
    std::string why_not_;
    std::vector<int> enabled_kinds_;
    std::mutex mutex_;
    std::vector<Span> pending_;
    uint64_t opened_ = 0;  // CUPTI's clock when the window opened (0: unknown)
    std::vector<uint8_t*> pool_;
};

}  // namespace cupti
}  // namespace kwiki
