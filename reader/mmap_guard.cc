#include "reader/mmap_guard.h"

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace dsc::mmap_guard {

namespace {

// A fixed registry read by the signal handler without locks: a slot is live while `size` is non-zero.
// Writers (open / close of a dataset) take a mutex among themselves.
constexpr size_t kSlots = 1024;
struct Slot {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> size{0};
};
Slot g_slots[kSlots];
std::mutex g_registry_mu;

struct sigaction g_previous;
std::once_flag g_install_once;

// initial-exec: the handler must not trigger lazy TLS allocation.
__attribute__((tls_model("initial-exec"))) thread_local detail::Frame* t_frame = nullptr;

bool InMapping(uintptr_t a) {
  for (const Slot& s : g_slots) {
    const size_t n = s.size.load(std::memory_order_acquire);
    const uintptr_t b = s.base.load(std::memory_order_relaxed);
    if (n && a >= b && a - b < n) return true;
  }
  return false;
}

void Handler(int sig, siginfo_t* info, void* ctx) {
  detail::Frame* f = t_frame;
  if (f && info && InMapping(reinterpret_cast<uintptr_t>(info->si_addr))) {
    t_frame = f->prev;
    siglongjmp(f->env, 1);
  }
  // Not ours: hand it to whoever was there before.
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(sig, info, ctx);
    return;
  }
  // An ignored SIGBUS sent by kill() stays ignored; a real fault cannot be ignored (returning would
  // fault again forever), so it gets the default action, as the kernel gives it without a handler.
  const bool sent = info && info->si_code <= 0;
  if (g_previous.sa_handler == SIG_IGN && sent) return;
  if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    // Restore the default action and raise again: pending until this handler returns, then fatal.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);
    return;
  }
  g_previous.sa_handler(sig);
}

}  // namespace

void InstallHandler() {
  std::call_once(g_install_once, [] {
    struct sigaction sa = {};
    sa.sa_sigaction = Handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

bool Register(const void* base, size_t size) {
  if (!base || !size) return false;
  InstallHandler();
  std::lock_guard<std::mutex> l(g_registry_mu);
  for (Slot& s : g_slots) {
    if (s.size.load(std::memory_order_relaxed) == 0) {
      s.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
      s.size.store(size, std::memory_order_release);
      return true;
    }
  }
  return false;
}

void Unregister(const void* base) {
  std::lock_guard<std::mutex> l(g_registry_mu);
  for (Slot& s : g_slots) {
    if (s.size.load(std::memory_order_relaxed) && s.base.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(base)) {
      s.size.store(0, std::memory_order_release);
      s.base.store(0, std::memory_order_relaxed);
    }
  }
}

namespace detail {

void Push(Frame* f) {
  f->prev = t_frame;
  t_frame = f;
}

void Pop(Frame* f) { t_frame = f->prev; }

void AfterFault() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGBUS);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
}

}  // namespace detail

}  // namespace dsc::mmap_guard
