#include "kernels/cpu.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cstdlib>
#include <cstring>

namespace dsc::kernels {

namespace {

std::atomic<bool> g_scalar{false};

bool CpuHasAvx2() {
#if defined(__x86_64__)
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));  // init: may run before libgcc's
  return have;
#else
  return false;
#endif
}

// DSC_FORCE_SCALAR in the environment: applied before main (and so before any decode or thread), and
// this file is always linked in, since every SIMD dispatch reads detail::g_simd_level.
[[maybe_unused]] const bool g_env_scalar = [] {
  const char* v = std::getenv("DSC_FORCE_SCALAR");
  if (v && *v && std::strcmp(v, "0") != 0) ForceScalar();
  return true;
}();

bool CpuHasAvx512() {
#if defined(__x86_64__)
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f")) && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl");
  return have;
#else
  return false;
#endif
}

std::atomic<bool> g_avx2_only{false};

void SetLevel() {
  const bool avx2 = CpuHasAvx2() && !g_scalar.load(std::memory_order_relaxed);
  const bool avx512 = avx2 && CpuHasAvx512() && !g_avx2_only.load(std::memory_order_relaxed);
  detail::g_simd_level.store(avx512 ? 2 : avx2 ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace

namespace detail {
std::atomic<uint8_t> g_simd_level{0};
}  // namespace detail

namespace {
// After DSC_FORCE_SCALAR's initialiser above (the same file: in order).
[[maybe_unused]] const bool g_level_set = [] {
  SetLevel();
  return true;
}();
}  // namespace

void LimitToAvx2(bool limit) {
  g_avx2_only.store(limit, std::memory_order_relaxed);
  SetLevel();
}

void ForceScalar() {
  setenv("JSIMD_FORCENONE", "1", 1);
  g_scalar.store(true, std::memory_order_relaxed);
  SetLevel();
}

bool ScalarForced() { return g_scalar.load(std::memory_order_relaxed); }

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, int(std::thread::hardware_concurrency()));
}

}  // namespace dsc::kernels
