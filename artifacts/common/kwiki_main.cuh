// kwiki_main.cuh: the shared main of a CUDA artifact. Part of kwiki_bench.cuh; includes kwiki_runner.cuh.
#pragma once

#include "kwiki_runner.cuh"
