// roof_host_test.cu: the read roof's fit and size sweep (kwiki_ceiling.cuh), host only (no GPU needed).
// Build: nvcc -std=c++17 -I artifacts/common -o roof_host_test artifacts/common/test/roof_host_test.cu
// Run:   roof_host_test fit BYTES:US BYTES:US ...   one line: ok gb_per_s t0_us r2 max_residual bw_rse points
//                                                    (or "no <why>"), for tests/test_roof.py to compare with Python's
//        roof_host_test sizes L2 TOP                 the sweep's sizes, one line, space-separated
#include "kwiki_ceiling.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
    if (argc >= 2 && std::strcmp(argv[1], "fit") == 0) {
        std::vector<kwiki::RoofPoint> pts;
        for (int i = 2; i < argc; ++i) {
            kwiki::RoofPoint p;
            char* end = nullptr;
            p.bytes = std::strtod(argv[i], &end);
            p.us = std::strtod(end + 1, nullptr);
            pts.push_back(p);
        }
        const kwiki::RoofFit f = kwiki::fit_roof(pts);
        if (!f.ok) std::printf("no %s\n", f.why.c_str());
        else std::printf("ok %.17g %.17g %.17g %.17g %.17g %d\n", f.gb_per_s, f.t0_us, f.r2, f.max_residual, f.bw_rse, f.points);
        return 0;
    }
    if (argc == 4 && std::strcmp(argv[1], "sizes") == 0) {
        for (size_t s : kwiki::roof_sizes(std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10)))
            std::printf("%zu ", s);
        std::printf("\n");
        return 0;
    }
    std::fprintf(stderr, "usage: roof_host_test fit BYTES:US ... | sizes L2 TOP\n");
    return 2;
}
