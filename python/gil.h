// Releasing the GIL around C++ work so that a thread still inside dsc when the program exits cannot
// abort it.
//
// A thread that takes the GIL back while the interpreter finalizes is ended by Python (pthread_exit:
// a forced unwind of its stack). Started in a destructor, such as pybind11's gil_scoped_release's,
// that unwind std::terminate()s the process (SIGABRT, exit status 134: a daemon thread iterating a
// loader at exit). WithoutGil takes the GIL back in ordinary code instead, after parking while the
// interpreter is already finalizing, so the thread either waits for the process to end or unwinds
// cleanly (pybind11 lets a forced unwind through).
#pragma once
#include <Python.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <type_traits>
#include <utility>

namespace dsc::python {

// Waits here, for good, while the interpreter finalizes: the process is about to end. Not on the
// process's main thread, which is the one finalizing (it runs the loaders' destructors then, and takes
// the GIL back freely): parking it would hang the exit.
inline void ParkIfFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  const auto finalizing = [] { return Py_IsFinalizing() != 0; };
#else
  const auto finalizing = [] { return _Py_IsFinalizing() != 0; };
#endif
  if (!finalizing() || ::syscall(SYS_gettid) == ::getpid()) return;
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// f() with the GIL released (the calling thread must hold it); its result or exception after the GIL
// is taken back.
template <class F>
auto WithoutGil(F&& f) {
  PyThreadState* state = PyEval_SaveThread();
  const auto back = [state] {
    ParkIfFinalizing();
    PyEval_RestoreThread(state);  // may end the thread (see above): never from a destructor
  };
  // back() stays outside the try blocks: a forced unwind it starts must not meet their catch (...).
  if constexpr (std::is_void_v<decltype(f())>) {
    try {
      std::forward<F>(f)();
    } catch (...) {
      back();
      throw;
    }
    back();
  } else {
    auto r = [&] {
      try {
        return std::forward<F>(f)();
      } catch (...) {
        back();
        throw;
      }
    }();
    back();
    return r;
  }
}

}  // namespace dsc::python
