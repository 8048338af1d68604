// kwiki_main.cuh: the shared main of a CUDA artifact: its start, input sets bound once to their references, poison
// and comparison, and the ladder runner over the variant table and the shapes. Part of kwiki_bench.cuh; includes
// kwiki_runner.cuh.
//
//   int main(int argc, char** argv) {
//       kwiki::Main m(argc, argv, kVariants);                        // --list-variants exits in here (no CUDA call)
//       const auto sizes = m.args.get_sizes("sizes", "", 1, "n");     // the manifest's shapes (--list-shapes exits)
//       kwiki::Runner& runner = m.start("scale");                     // seed and device on stderr; the Runner
//       for (const auto& size : sizes) {
//           const size_t n = size_t(size[0]);
//           kwiki::DeviceBuffer<float> y(n);
//           kwiki::InputSets<Inputs> in(m.sets, m.seed + n, [&](Inputs& s, uint64_t seed) { ...fill, reference... });
//           kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
//               kwiki::Case c;                                        // params, bytes, launch (reads in.current())
//               in.bind(c, [&](cudaStream_t s) { kwiki::poison(y.get(), y.bytes(), s); },
//                       [&](const Inputs& s) { return kwiki::compare(..., s.ref.data(), ...); });
//               return c;
//           });
//       }
//       return kwiki::exit_code();
//   }
//
// What it guarantees on top of the Runner: every case of a shape reads the same input sets, each filled once from
// its own seed (set 0 from the shape's seed) with its reference computed once; every check compares the outputs
// with the reference of the set the last launch read (the Runner picks one at random per timed sample); every
// variant of the table that --variants asks for gets a case, in the table's order, at every shape.
#pragma once

#include "kwiki_runner.cuh"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kwiki {

// An artifact's start: its arguments (--list-variants exits in there, before any CUDA call), the seed and the
// number of input sets. start() is the first CUDA call: the seed and the device on stderr, and the Runner.
struct Main {
    Args args;
    uint64_t seed;
    int sets;

    template <class Table>
    Main(int argc, char** argv, const Table& variants)
        : args(argc, argv, variants), seed(args.seed()), sets(args.input_sets()) {}

    Runner& start(const char* name) {
        std::fprintf(stderr, "%s: seed %llu, %d SMs, L2 %zu bytes\n", name, (unsigned long long)seed, sm_count(),
                     l2_bytes());
        runner_ = std::make_unique<Runner>(args);
        return *runner_;
    }

  private:
    std::unique_ptr<Runner> runner_;
};

// n elements of T on the device, freed when it goes out of scope.
template <class T>
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t n) : n_(n) { KWIKI_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T))); }
    ~DeviceBuffer() { if (p_) cudaFree(p_); }
    DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    T* get() const { return p_; }
    size_t size() const { return n_; }
    size_t bytes() const { return n_ * sizeof(T); }

  private:
    T* p_ = nullptr;
    size_t n_ = 0;
};

// One shape's input sets: `sets` of them, each filled once by fill(Set&, seed) (its inputs and its reference; set 0
// from `seed` itself, set i from hash64(seed, 0x5e7 + i)). use(i) selects the set the next launch and check read.
template <class Set>
class InputSets {
  public:
    template <class Fill>
    InputSets(int sets, uint64_t seed, Fill fill) : sets_(size_t(std::max(sets, 1))) {
        for (size_t i = 0; i < sets_.size(); ++i) fill(sets_[i], i == 0 ? seed : hash64(seed, 0x5e7 + uint64_t(i)));
    }
    InputSets(const InputSets&) = delete;
    InputSets& operator=(const InputSets&) = delete;

    int size() const { return int(sets_.size()); }
    int index() const { return current_; }
    void use(int i) { current_ = i; }
    const Set& current() const { return sets_[size_t(current_)]; }
    Set& operator[](int i) { return sets_[size_t(i)]; }

    // Bind a case to these sets once: the Runner's input-set rotation, the poison of every output the launch writes,
    // and the check, check(set) against the reference of the set the last launch read.
    template <class Poison, class Check>
    void bind(Case& c, Poison poison, Check check) {
        c.input_sets = size();
        c.use_inputs = [this](int i) { use(i); };
        c.poison = std::move(poison);
        c.check = [this, check = std::move(check)] { return check(current()); };
        use(0);
    }

  private:
    std::vector<Set> sets_;
    int current_ = 0;
};

// The ladder at one shape: a case per variant of `table` that --variants asks for and `runs(variant)` accepts (e.g.
// not an sm_100 rung on sm_90: no case, no record), in the table's order; make(variant) builds it (its variant name
// is the table's); checked, timed and emitted by `runner`.
template <class Table, class Make, class Runs>
void run_ladder(Runner& runner, const Args& args, const Table& table, Make make, Runs runs) {
    std::vector<Case> cases;
    for (const auto& v : table) {
        if (!args.want(v.name) || !runs(v)) continue;
        Case c = make(v);
        c.variant = v.name;
        cases.push_back(std::move(c));
    }
    runner.run(cases);
}

// The same for a table whose every variant runs everywhere.
template <class Table, class Make>
void run_ladder(Runner& runner, const Args& args, const Table& table, Make make) {
    run_ladder(runner, args, table, std::move(make), [](const auto&) { return true; });
}

}  // namespace kwiki
