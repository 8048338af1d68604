"""artifacts/common/kwiki_ws_gemm.cuh's host-and-device code on the host: the one-GEMM schedule (Dense, grouped_tile)
that the fp8 GEMM's and the epilogue's CUDA rungs walk, and the tile geometry their launchers size shared memory with.

Compiled with nvcc into a small host program (no GPU needed): at shapes on and off the tiles, every output element
belongs to exactly one tile, each tile's B rows are its columns, no tile starts past the matrix, and consecutive tiles
stay within a band of 8 tile-rows (the grouped order that keeps A's rows and B's columns in L2 together)."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest
from cuda_artifact import host_program

REPO = Path(__file__).resolve().parent.parent

_HOST = r"""
#include "kwiki_ws_gemm.cuh"
#include <cstdio>
#include <cstdlib>
namespace g = kwiki::wsgemm;
template <int BN> void jobs(int m, int n) {
    const g::Dense<BN> d(m, n);
    std::printf("%d\n", d.tiles());
    for (int t = 0; t < d.tiles(); ++t) {
        const g::Job j = d.job(t);
        std::printf("%d %d %d %d %d\n", j.a_row, j.b_row, j.row_end, j.col0, j.group);
    }
}
int main(int argc, char** argv) {  // argv: BN M N; then the rings' geometry
    const int bn = std::atoi(argv[1]), m = std::atoi(argv[2]), n = std::atoi(argv[3]);
    if (bn == 128) jobs<128>(m, n);
    else if (bn == 192) jobs<192>(m, n);
    else jobs<256>(m, n);
    std::printf("%d %d %d %d\n", g::Tile<128>::STAGES, g::Tile<192>::STAGES, g::TileBf16<256>::STAGES,
                g::TileBf16<256>::SMEM_BYTES);
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return host_program(tmp_path_factory, "ws_gemm_host", _HOST)


@pytest.mark.nvcc
@pytest.mark.parametrize(("bn", "m", "n"), [(128, 4096, 4096), (128, 4000, 4048), (192, 4000, 4048), (192, 8192, 8192),
                                            (256, 4001, 4048), (256, 1000, 200), (128, 129, 16)])
def test_the_dense_schedule_covers_every_element_once_in_grouped_bands(program, bn, m, n):
    out = subprocess.run([str(program), str(bn), str(m), str(n)], capture_output=True, text=True, check=True,
                         timeout=60).stdout.split("\n")
    tiles = int(out[0])
    jobs = [tuple(map(int, line.split())) for line in out[1:1 + tiles]]
    assert tiles == -(-m // 128) * -(-n // bn) == len(set(jobs))
    covered = 0
    for a_row, b_row, row_end, col0, group in jobs:
        assert a_row % 128 == 0 and 0 <= a_row < m and row_end == m and group == 0
        assert col0 % bn == 0 and 0 <= col0 < n and b_row == col0
        covered += (min(a_row + 128, m) - a_row) * (min(col0 + bn, n) - col0)
    assert covered == m * n
    for (a0, *_), (a1, *_) in itertools.pairwise(jobs):  # within a band of 8 tile-rows, or on to the next
        assert a1 // 128 // 8 in (a0 // 128 // 8, a0 // 128 // 8 + 1)


@pytest.mark.nvcc
def test_the_rings_fit_a_ctas_shared_memory(program):
    last = subprocess.run([str(program), "128", "128", "128"], capture_output=True, text=True, check=True,
                          timeout=60).stdout.split("\n")[-2]
    fp8_stages, wide_stages, bf16_stages, bf16_bytes = map(int, last.split())
    assert (fp8_stages, wide_stages, bf16_stages) == (6, 5, 4)  # what the pages say the rings hold
    assert bf16_bytes + 4096 <= 227 * 1024  # with the schedule's static tables beside it
