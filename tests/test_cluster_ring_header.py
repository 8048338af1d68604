"""artifacts/common/kwiki_cluster.cuh's host side, compiled with nvcc and run without a GPU: the cluster size a row of
each length gets (the smallest power of two whose slices are at most 2048 16-byte vectors, none past 16 of them),
the shared memory of its two slice buffers, and that every slice of every length the three ring kernels run at is
non-empty and fits the one shared-memory limit ring_active_clusters sets (the softmax, cross-entropy and RMS rows
share this arithmetic, so a change to it shows here for all three)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cuda_artifact import host_program

_HOST = r"""
#include <cstdio>
#include "kwiki_cluster.cuh"
int main() {
    namespace kc = kwiki::cluster;
    int cols;
    while (std::scanf("%d", &cols) == 1) {
        const int C = kc::ring_cluster_size(cols);
        const int V = cols / kc::kRowVec, per = C ? (V + C - 1) / C : 0;
        int smallest = per;  // the last slice is the shortest
        if (C) smallest = V - (C - 1) * per;
        std::printf("%d %d %zu %d %d\n", cols, C, C ? kc::ring_smem(cols, C) : size_t(0), per, smallest);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return host_program(tmp_path_factory, "cluster_ring_host", _HOST)


@pytest.mark.nvcc
def test_cluster_sizes_slices_and_shared_memory(host: Path) -> None:
    lengths = [5000, 16384, 16392, 32000, 32008, 32768, 65536, 128256, 131072, 131080, 262144, 262152, 524288]
    out = subprocess.run([str(host)], input=" ".join(map(str, lengths)), capture_output=True, text=True, check=True,
                         timeout=60).stdout
    rows = {int(c): (int(k), int(smem), int(per), int(last)) for c, k, smem, per, last in
            (line.split() for line in out.splitlines())}
    assert {c: rows[c][0] for c in lengths} == {
        5000: 1, 16384: 1, 16392: 2, 32000: 2, 32008: 2, 32768: 2, 65536: 4, 128256: 8, 131072: 8, 131080: 16,
        262144: 16, 262152: 0, 524288: 0}
    for c in lengths:
        k, smem, per, last = rows[c]
        if k == 0:
            continue  # no ring: the launchers refuse it, row_reduce has no case
        assert per <= 2048 and last >= 1, c  # every slice fits a buffer and none is empty
        assert smem == 2 * per * 16 <= 65536, c  # the limit ring_active_clusters sets for every kernel
    assert rows[16392][2:] == (1025, 1024) and rows[32008][2:] == (2001, 2000)  # the off-tile entries: unequal
