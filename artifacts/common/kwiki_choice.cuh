// kwiki_choice.cuh: what a timed run's selection passes chose, told to a run that times nothing.
//
// A `tuned` rung (a configuration) or a library's best algorithm is chosen per shape in a selection pass that times
// every candidate (kwiki_runner.cuh's select_fastest), and its record names the choice (extra.selected). A run that
// only checks (--profile-mode, --check-only) times nothing, so its pass takes the first candidate that passes: the
// profile audit (kwiki/verify/profile.py) would count another kernel than the timed record ran. kwiki tells such a
// run the timed run's choices instead, from those records:
//   --choose="tuned@7168x16384x1=r4_u1_t128;cublaslt_best@4096x7168=heuristic algorithm 0"
// one VARIANT@SHAPE=CHOICE per selection (SHAPE: the record's params.shape), ';' between them. A timed run refuses
// the option: its records must say what its own selection chose, not what it was told.
//   const kwiki::Choices told{kwiki::Args(argc, argv)};      // first thing in main: refused before any CUDA call
//   if (auto name = told.of("tuned", shape)) tuned = kwiki::told_selection(kwiki::names_of(configs()), *name, "tuned", shape);
//   else tuned = kwiki::select_config(*selector, configs(), fill);
#pragma once

#include "kwiki_bench.cuh"

#include <optional>
#include <string>
#include <vector>

namespace kwiki {

class Choices {
  public:
    // --choose parsed; exit 2 (a usage error naming the entry) when an entry is not VARIANT@SHAPE=CHOICE, names a
    // variant and shape twice, or the run times its cases (neither --profile-mode nor --check-only).
    explicit Choices(const Args& args) {
        const std::optional<std::string> text = args.get("choose");
        if (!text) return;
        if (!args.has("profile-mode") && !args.has("check-only"))
            Args::usage("--choose is for a run that times nothing (--profile-mode, --check-only): a timed run selects");
        size_t start = 0;
        while (start <= text->size()) {
            size_t end = text->find(';', start);
            if (end == std::string::npos) end = text->size();
            const std::string item = text->substr(start, end - start);
            start = end + 1;
            if (item.empty()) continue;
            const size_t at = item.find('@'), eq = item.find('=');
            if (at == 0 || at == std::string::npos || eq == std::string::npos || eq < at + 2 || eq + 1 == item.size())
                Args::usage("--choose wants VARIANT@SHAPE=CHOICE entries separated by ';', got '" + item + "'");
            Entry e{item.substr(0, at), item.substr(at + 1, eq - at - 1), item.substr(eq + 1)};
            if (of(e.variant, e.shape))
                Args::usage("--choose names " + e.variant + "@" + e.shape + " twice");
            entries_.push_back(std::move(e));
        }
    }

    // The choice told for `variant` at `shape`, if any.
    std::optional<std::string> of(const std::string& variant, const std::string& shape) const {
        for (const Entry& e : entries_)
            if (e.variant == variant && e.shape == shape) return e.choice;
        return std::nullopt;
    }

  private:
    struct Entry {
        std::string variant, shape, choice;
    };
    std::vector<Entry> entries_;
};

// The Selection of a told choice among `names` (the candidates, in the selection pass's order); exit 2 when no
// candidate has that name. No median: nothing was timed.
inline Selection told_selection(const std::vector<std::string>& names, const std::string& choice,
                                const std::string& variant, const std::string& shape) {
    Selection out;
    out.tried = int(names.size());
    for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == choice) out.index = int(i);
    if (out.index < 0)
        Args::usage("--choose: " + variant + "@" + shape + " names '" + choice + "', which is not one of its " +
                    std::to_string(names.size()) + " candidates");
    return out;
}

// The names of a candidate table (anything iterable whose items have a `name`), in order.
template <class Table>
std::vector<std::string> names_of(const Table& table) {
    std::vector<std::string> out;
    for (const auto& c : table) out.emplace_back(c.name);
    return out;
}

}  // namespace kwiki
