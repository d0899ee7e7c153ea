// Which SIMD code paths run. Every fast path has a scalar twin that gives the same bits; forcing the
// scalar paths checks that (dsc bench --digest --scalar against a normal run) and reproduces a run on a
// machine without the instructions.
//
// Forcing scalar turns off our AVX2 kernels (UseAvx2() is false) and libjpeg-turbo's SIMD (it sets
// JSIMD_FORCENONE=1). Two ways:
// - the environment variable DSC_FORCE_SCALAR=1 (any value but empty or "0"), read when the program
//   starts (a static initialiser in kernels/cpu.cc);
// - ForceScalar(), e.g. `dsc bench --scalar`: call it before the first JPEG decode and before other
//   threads run. libjpeg-turbo (2.1+) reads JSIMD_FORCENONE once per thread, at that thread's first
//   SIMD query, and keeps the answer: a thread that has already decoded keeps its SIMD choice.
#pragma once

#include <atomic>
#include <cstdint>

namespace dsc::kernels {

namespace detail {
// The SIMD level the dispatchers read: 0 scalar, 1 AVX2, 2 AVX-512; set when the program starts and by
// ForceScalar / LimitToAvx2. Read inline: kernels dispatch per row, and on CIFAR's 32-pixel rows two
// out-of-line calls and their static guards per row were a visible share of the work. Zero (scalar, the
// same bits) for whatever runs before kernels/cpu.cc's static initialiser.
extern std::atomic<uint8_t> g_simd_level;
}  // namespace detail

// True when the CPU has AVX2 and the scalar paths are not forced.
inline bool UseAvx2() { return detail::g_simd_level.load(std::memory_order_relaxed) >= 1; }
// True when UseAvx2() and the CPU has AVX-512 F, BW and VL, unless LimitToAvx2(true) was called: the few
// kernels with a 512-bit twin (the resampler's vertical pass) then use it.
inline bool UseAvx512() { return detail::g_simd_level.load(std::memory_order_relaxed) >= 2; }
// Turns the AVX-512 twins off (true) or back on, so that tests and benchmarks on an AVX-512 machine
// also run the AVX2 code.
void LimitToAvx2(bool limit);
// Turns every SIMD path off for the rest of the process (see above). setenv is not thread-safe: call it
// while the process has one thread.
void ForceScalar();
bool ScalarForced();

// The cores this process may run on (its CPU affinity, which taskset, a container's cpuset or a job
// scheduler narrow), at least 1: what "all cores" means for a default thread count.
// std::thread::hardware_concurrency() counts the machine's, and oversubscribes a narrowed process.
int UsableCores();

}  // namespace dsc::kernels
