// Turns a SIGBUS from a dsc mapping into an error instead of a dead process.
//
// A mapped file that shrinks while open (truncated, replaced in place) or whose storage fails (an I/O
// error, a network filesystem going away) raises SIGBUS on the next touch of a lost page, from whichever
// thread touched it. The reader registers each of its mappings here and runs the code that touches
// mapped payload bytes inside RunGuarded(); a SIGBUS whose address lies in a registered mapping, raised
// while the faulting thread is inside a guarded region, jumps back out of that region (siglongjmp) and
// RunGuarded returns false, so the caller can reset its decoder state and throw a dsc::Error naming the
// file and sample. Every other SIGBUS goes to the handler that was installed before ours (SIG_DFL:
// the signal is re-raised and the process dies as it would have without dsc).
//
// The handler is process-wide and installed once, when the first mapping is registered. A SIGBUS
// handler installed later by someone else (e.g. Python's faulthandler) takes precedence: ours then
// only runs if that one chains to it. Code run inside a guarded region must not hold locks or own heap
// memory that only a destructor would release: a fault skips its destructors.
#pragma once
#include <csetjmp>
#include <cstddef>
#include <utility>

namespace dsc::mmap_guard {

// Registers [base, base + size) as a dsc mapping (installing the handler on first use); Unregister
// before unmapping. Returns false (the mapping stays unguarded) when the fixed registry is full.
bool Register(const void* base, size_t size);
void Unregister(const void* base);
// Installs the process-wide handler if it is not yet installed (Register calls it).
void InstallHandler();

namespace detail {
struct Frame {
  sigjmp_buf env;
  Frame* prev = nullptr;
};
void Push(Frame* f);  // makes f the thread's innermost guarded region (f->prev: the enclosing one)
void Pop(Frame* f);   // f's enclosing region becomes the innermost again
void AfterFault();    // unblocks SIGBUS after the handler jumped out (it already popped the frame)
}  // namespace detail

// Runs f(). Returns false when a SIGBUS in a registered mapping interrupted it (f did not finish);
// exceptions thrown by f pass through. Nested regions are fine: the innermost one catches the fault.
template <typename F>
[[nodiscard]] bool RunGuarded(F&& f) {
  detail::Frame frame;
  // Signal mask not saved (no system call per region); AfterFault unblocks SIGBUS instead.
  if (sigsetjmp(frame.env, 0) != 0) {
    detail::AfterFault();
    return false;
  }
  detail::Push(&frame);
  struct PopOnExit {
    detail::Frame* f;
    ~PopOnExit() { detail::Pop(f); }
  } pop{&frame};
  std::forward<F>(f)();
  return true;
}

}  // namespace dsc::mmap_guard
