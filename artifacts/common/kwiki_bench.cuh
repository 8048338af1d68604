// kwiki_bench.cuh: the one measurement protocol every KernelWiki CUDA artifact uses (protocol 3).
//
// Header-only, C++17, namespace kwiki. Include it (this umbrella, never its parts) and build with
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I<repo>/artifacts/common x.cu
// Its parts include one way (each only the ones above it):
//   kwiki_check.cuh   checked CUDA calls, random inputs, poison, compare() against a reference
//   kwiki_device.cuh  device limits, kernel registers, compare_device(), NVML clocks and power   (includes check)
//   kwiki_record.cuh  Timing, the JSON record, emit(), exit_code(), PROTOCOL_VERSION             (includes device)
//   kwiki_args.cuh    Args (--variants, --list-variants, --shapes), BenchOptions                 (includes nothing)
//   kwiki_cupti.cuh   CUPTI activity timestamps, loaded at run time                              (includes nothing)
//   kwiki_clock.cuh   the clock a kernel counted: clock64 over %globaltimer stamps              (includes check)
//   kwiki_runner.cuh  the L2 flush, Case, Runner (check, time, emit), selection passes    (record, args, clock, cupti)
//   kwiki_main.cuh    the shared main: input sets with references, the ladder over variants and shapes (runner)
//
// What the protocol guarantees when an artifact follows it (builds its cases and hands them to kwiki::Runner):
//  1. Every CUDA call is checked (KWIKI_CHECK, KWIKI_CHECK_LAST after launches, KWIKI_CHECK_STATUS for
//     library status codes where 0 means success). A failure prints file:line to stderr and exits 2.
//  2. Inputs are random, never zeros: fill_random() fills device buffers from a counter-based hash
//     (splitmix64 of seed and index), so any element can also be regenerated on the host (random_unit()).
//     A case may keep several pre-filled input sets; each timed sample draws one at random (input_sets).
//  3. Outputs are poisoned (0xFF bytes, a NaN for every float type) before the checked run AND before every
//     timed sample, so an element the timed launch does not write fails when that sample is re-checked.
//  4. compare() checks every element against a higher-precision reference: |got - ref| <= atol + rtol*|ref|.
//     NaN or Inf in the output never passes. Tolerance presets per dtype: tolerance_for<T>(). compare_device()
//     is the same test on the GPU, for outputs too large to copy back at every re-check.
//  5. Check, then time (kwiki::Runner): every case is checked first (poison, launch, compare). The cases that
//     pass are sampled round-robin (interleaved), so a kernel and its baseline see the same clocks, power and
//     temperature. Every timed sample is, in this order: reset L2 persistence, poison the outputs, flush the L2
//     (read twice its size, from the device), then the launch. A random subset of the timed samples, drawn
//     from a seed taken when the run starts (sample i with probability min(0.38, 7.2/(i+1)), at least 20
//     samples a case), is compared with the reference right after its launch, and after its samples each case
//     runs 1024-2047 more launches back to back and checks the last (the tail check): a kernel that caches,
//     skips or replays work, early or late, fails ("timed sample N differs from the reference"), with no timing.
//     Protocol 3 also: fresh inputs where the case refills them (Case::refill), NVML's list of the processes
//     on the GPU, what the timer saw (the record's `timer`), sustained blocks (--sustained) and the clock the
//     kernel counted (kwiki_clock.cuh).
//  6. All work is on the clock: a sample's time is the GPU's busy time in the sample's window, the union of the
//     intervals of every kernel, memcpy and memset the process ran, on any stream and from any thread, from
//     CUPTI's GPU timestamps (kwiki_cupti.cuh): hidden work counts, host enqueue time (and the idle gaps it
//     leaves between launches) does not. Without CUPTI the time is a CUDA event pair on the launch stream
//     (timing_source "events"). Every record keeps the event median (extra.event_median_us) and, under CUPTI,
//     the span from first start to last end (extra.span_median_us) as cross-checks; both include host time.
//     L2 persistence is reset before every sample. A flush self-test at start-up (a read of a quarter of the
//     L2, hot and after a flush, less an empty launch) must show the flushed read slower, or the run exits 2.
//  7. Stopping rule: a case stops sampling when it has at least min_samples and the relative standard
//     error of its median is <= target_rse (default 0.5%), or at max_samples, or when its samples have used
//     max_seconds (default 2 s) of wall time; never before its early re-checked samples have run. Cases timed
//     together stop together: one that met its rule samples on, in turn, while another still samples (up to its
//     own max_samples and max_seconds), so that interleaved medians cover the same stretch of time. The standard
//     error of the median is 1.2533 * sd / sqrt(n), with sd estimated robustly as IQR / 1.349.
//  8. Clocks and power over each case's sampling window (NVML, loaded at run time), read while each sample's
//     launch runs: the SM clock (min, median, max over the samples), the clock-event reasons (time under the
//     power cap, thermal and hardware slowdown: the windows in which each was set; NVML's violation counters
//     where the reasons are missing) and the board power (energy = power x window); null without NVML.
//  9. Output: emit() prints exactly one JSON record per line on stdout (the format of kwiki/results/record.py,
//     carrying protocol PROTOCOL_VERSION), finite numbers only; a record whose check failed carries no timing
//     and makes exit_code() return 1. Everything else (logs) goes to stderr.
// 10. `--list-variants` prints the artifact's variant table, one name a line, and exits 0 before any CUDA call;
//     `--list-shapes=OPTION` prints the shapes --OPTION gave (the manifest's), one a line, and exits 0 likewise.
//
// Typical main(): kwiki_main.cuh's (Main, InputSets, run_ladder; `kwiki new artifact` writes one), or by hand
// (kwiki_runner.cuh says more):
//   static constexpr kwiki::VariantInfo kVariants[] = {{"cublas"}, {"tiled"}};  // names only: artifact.yaml's order
//   kwiki::Args args(argc, argv, kVariants);  // --list-variants; exits 2 on an unknown --variants
//   kwiki::Runner runner(args);
//   std::vector<kwiki::Case> cases;  ... one per wanted variant: launch, poison, check, bytes, params ...
//   runner.run(cases);                // check, time, emit
//   return kwiki::exit_code();
#pragma once

#include "kwiki_main.cuh"  // and through it every part above
