// dsc._dsc: the C++ loader and builder for Python (the package dsc/ wraps it; see dsc/__init__.py).
//
// - Batches are handed out as NumPy arrays over leased batch memory (reader/loader.h, BatchLease):
//   zero copy; the arrays of one batch share a capsule that owns the lease, so the memory stays valid
//   as long as any array (or a torch tensor made from it) is alive.
// - The GIL is released while waiting for a batch and while building; the wait wakes every 100 ms to
//   run Python's signal handlers (Ctrl-C stops an epoch) through LoaderOptions::wait_poll.
// - A loader's worker threads do not survive fork(): a child that uses an inherited loader gets
//   dsc.Error instead of a hang, and inherited objects are leaked, not destroyed, in the child.
#include <cxxabi.h>
#include <pthread.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#ifdef DSC_HAVE_REMOTE
#include "remote/client.h"
#endif
#include "format/checksum.h"
#include "format/error.h"
#include "format/ffcv.h"
#include "reader/ffcv_info.h"
#include "reader/file_source.h"
#include "kernels/limits.h"
#include "python/args.h"
#include "python/gil.h"
#include "python/loader_options.h"
#include "python/trace.h"
#include "python/transforms.h"
#include "reader/info.h"
#include "reader/bottleneck.h"
#include "reader/executor.h"
#include "reader/loader.h"
#include "reader/option_table.h"
#include "writer/build.h"
#include "writer/coco.h"
#include "writer/seg_build.h"
#include "writer/table_build.h"
#include "writer/merge.h"

namespace py = pybind11;
using dsc::python::ParkIfFinalizing;
using dsc::python::WithoutGil;
using namespace dsc::python;  // argument checks (python/args.h), loader options

namespace {

// Bumped in every forked child: objects made under an older generation belong to the parent.
std::atomic<uint64_t> g_fork_generation{0};
void AtForkChild() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }
bool Inherited(uint64_t generation) { return generation != g_fork_generation.load(std::memory_order_relaxed); }

PyObject* g_error = nullptr;         // dsc.Error(RuntimeError)
PyObject* g_option_error = nullptr;  // dsc.OptionError(dsc.Error, ValueError)

// Raises `type` with the message, bytes that are not UTF-8 (a file name's) shown as U+FFFD: with
// PyErr_SetString such a message failed to decode and the user saw dsc.Error('').
void SetError(PyObject* type, const char* what) {
  PyObject* text = PyUnicode_DecodeUTF8(what, Py_ssize_t(std::strlen(what)), "replace");
  if (!text) return;  // the decode's own error (memory) is set
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}

// Thrown by the wait hook when a signal handler raised (the Python error is already set).
struct SignalRaised {};

template <typename M>
std::vector<std::string> Names(const M& m) {
  std::vector<std::string> v;
  for (const auto& [k, _] : m) v.push_back(k);
  return v;
}

// ---- the loader ----

py::dtype NumpyDType(dsc::DType t) {
  switch (t) {
    case dsc::DType::kFloat32: return py::dtype("float32");
    case dsc::DType::kFloat16: return py::dtype("float16");
    case dsc::DType::kUint8: return py::dtype("uint8");
  }
  return py::dtype("uint8");
}

// Makes one empty array of each type a batch has, so that numpy is imported by the thread that
// creates the loader. Left to the first batch, the import ran numpy's module code on the iterating
// thread; a daemon thread that Python ended inside it at exit unwound through Next, whose Py_DECREFs then
// ran without the GIL beside the final collection (SIGSEGV at exit, 1 run in 3 on a loaded machine).
void ImportNumpyFor(dsc::DType t) {
  for (const py::dtype& d : {NumpyDType(t), py::dtype("int32"), py::dtype("int64"), py::dtype("uint32"), py::dtype("bool")})
    (void)py::array(d, std::vector<py::ssize_t>{0});
}

// Owns one lease; the capsule's destructor gives it back (or leaks it in a forked child, whose
// copy of the pool's mutex may be held by a thread that no longer exists).
struct LeaseHolder {
  dsc::BatchLease lease;
  uint64_t generation;
};

class PyLoader {
 public:
  PyLoader(const std::string& path, const std::optional<std::string>& preset, const py::dict& kwargs,
           std::shared_ptr<dsc::python::PyTracer> tracer)
      : generation_(g_fork_generation.load()), tracer_(std::move(tracer)) {
    dsc::LoaderOptions o = MakeLoaderOptions(preset, kwargs);
    ImportNumpyFor(o.dtype);
    if (tracer_) o.tracer = &tracer_->tracer();  // worker rows "loader worker N"; kept alive by tracer_
    max_leases_ = o.max_leases;
    label_bits_ = o.label_bits;
    lease_memory_ = o.lease_memory;
    // Runs on the thread in Next (this outlives loader_): Ctrl-C, and a wait that only Python can end.
    o.wait_poll = [this] {
      ParkIfFinalizing();
      {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw SignalRaised{};
      }
      if (close_requested_) throw CloseRequested{};  // close() from a signal handler, just now
      // More batches held than max_leases and the awaited batch has no buffer: the wait ends only when
      // one is dropped. Python code that holds them itself never will; say so instead of hanging (a
      // thread that drops them within the grace period is still waited for; a batch that is merely
      // slow to make is waited for however long it takes).
      if (++polls_ >= kHeldGracePolls && loader_->leased() > 0 && loader_->awaits_buffer())
        throw dsc::Error("Python holds " + std::to_string(loader_->leased()) + " batches of this loader, all the buffers it may lend (" +
                         std::to_string(max_leases_) + " spares and lease_memory = " + std::to_string(lease_memory_ >> 20) +
                         " MiB), and the next batch needs one: keep fewer (a loss as loss.item(), outputs detached) or keep "
                         "copies (iterate with copy=True, or .clone() what you keep); or raise lease_memory");
    };
    o.wait_poll_ms = 100;
    // Opening the file and starting the threads.
    loader_ = WithoutGil([&] { return std::make_shared<dsc::Loader>(path, o); });
  }

  ~PyLoader() {
    if (Inherited(generation_)) {  // joining threads that do not exist here would hang
      (void)range_.release();
      new std::shared_ptr<dsc::Loader>(std::move(loader_));  // leaked on purpose
      return;
    }
    // Stopping the workers may wait for a sample to finish. (A destructor cannot use WithoutGil: the
    // GIL is taken back here, after parking if the interpreter finalizes.)
    PyThreadState* state = PyEval_SaveThread();
    range_.reset();
    loader_.reset();
    ParkIfFinalizing();
    PyEval_RestoreThread(state);
  }

  // The loader, kept alive for the caller: close() from another thread (or a signal handler) then
  // cannot free it under a call in progress; it goes when the last of them returns.
  std::shared_ptr<dsc::Loader> loader() {
    if (Inherited(generation_))
      throw dsc::Error("create the Loader after fork: this one was created in the parent process, and its worker threads "
                       "do not exist in this child (e.g. a DataLoader worker); build the dsc.Loader inside the worker");
    std::lock_guard<std::mutex> l(ptr_mu_);
    if (!loader_) throw dsc::Error("the Loader is closed");
    return loader_;
  }

  // Python threads sharing a loader take turns (mu_ is always taken with the GIL released, so that
  // the wait hook, which takes the GIL while mu_ is held, cannot deadlock with them). The thread in
  // next() holds mu_ while it waits and runs Python's signal handlers: a handler on that thread that
  // starts, restores or closes the loader must not take mu_ again.
  // Start and Resume return the new range's id: next(copy, id) reads only that range, so an iterator
  // of an older range on another thread ends instead of taking the new range's batches.
  uint64_t Start(uint64_t epoch, uint64_t first_batch) {
    NotFromTheWait("start an epoch");
    return WithoutGil([&] {
      std::lock_guard<std::mutex> lock(mu_);
      const std::shared_ptr<dsc::Loader> l = loader();
      // The new range first: a refused call (a batch past the end) leaves the running epoch alone.
      auto range = std::make_unique<dsc::Loader::EpochRange>(l->epoch(epoch, first_batch));
      range_size_ = range->size();
      range_ = std::move(range);
      started_ = false;
      return ++range_id_;
    });
  }

  uint64_t Resume() {
    NotFromTheWait("resume");
    return WithoutGil([&] {
      std::lock_guard<std::mutex> lock(mu_);
      const std::shared_ptr<dsc::Loader> l = loader();
      auto range = std::make_unique<dsc::Loader::EpochRange>(l->resume());
      range_size_ = range->size();
      range_ = std::move(range);
      started_ = false;
      return ++range_id_;
    });
  }

  // The next batch of the current range as a tuple (images, [labels...], indices, padding, epoch,
  // index), or None at its end or when `range` (non-zero) is no longer the current range's id.
  py::object Next(bool copy, uint64_t range) {
    NotFromTheWait("iterate");
    loader();
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    WithoutGil([&] { lock.lock(); });
    if (!range_ || (range != 0 && range != range_id_)) return py::none();
    const dsc::Batch* b = nullptr;
    polls_ = 0;
    close_requested_ = false;
    struct Waiting {  // this thread holds mu_ while it waits (NotFromTheWait)
      std::atomic<std::thread::id>& owner;
      explicit Waiting(std::atomic<std::thread::id>& o) : owner(o) { owner = std::this_thread::get_id(); }
      ~Waiting() { owner = std::thread::id(); }
    } waiting(waiter_);
    try {
      WithoutGil([&] {
        if (!started_) {
          it_ = range_->begin();
          started_ = true;
        } else {
          ++it_;
        }
        if (it_ != range_->end()) b = &*it_;
      });
    } catch (abi::__forced_unwind&) {  // Python ends this thread at exit: let it go
      throw;
    } catch (const SignalRaised&) {
      range_.reset();
      if (close_requested_) CloseLocked();
      throw py::error_already_set();
    } catch (const CloseRequested&) {  // closed by a signal handler: the iteration ends
      CloseLocked();
      return py::none();
    } catch (...) {
      range_.reset();
      throw;
    }
    if (!b) {
      range_.reset();
      return py::none();
    }
    py::object base = py::none();
    if (!copy) {
      auto* holder = new LeaseHolder{it_.lease(), g_fork_generation.load()};
      base = py::capsule(holder, [](void* p) {
        auto* h = static_cast<LeaseHolder*>(p);
        if (Inherited(h->generation)) return;
        delete h;
      });
      b = holder->lease.get();
    }
    // Without a base the array constructor copies (owned memory); with one it is a view.
    auto array = [&](py::dtype dt, std::vector<py::ssize_t> shape, const void* data) {
      return copy ? py::array(dt, shape, data) : py::array(dt, shape, data, base);
    };
    std::vector<py::ssize_t> shape;
    if (b->layout == dsc::Layout::kNCHW) shape = {b->size, b->channels, b->height, b->width};
    else shape = {b->size, b->height, b->width, b->channels};
    // Labels, indices and padding flags are owned copies (a few KiB): holding them (a confusion matrix
    // over the test set) keeps no image buffer leased. Labels as int64 unless label_dtype='int32'.
    py::list labels;
    for (size_t f = 0; f < b->label_fields; ++f) {
      if (label_bits_ == 32) {
        labels.append(py::array(py::dtype("int32"), std::vector<py::ssize_t>{b->size}, b->labels[f]));
        continue;
      }
      py::array_t<int64_t> wide(b->size);
      std::copy(b->labels[f], b->labels[f] + b->size, wide.mutable_data());
      labels.append(wide);
    }
    // Typed fields (format 1.2): (name, type, array, offsets or None) per field; python/dsc/writer.py's
    // _field_value makes them tensors, lists of tensors, bytes or str.
    py::list fields;
    for (size_t k = 0; k < b->field_count; ++k) {
      const dsc::FieldColumn& c = b->fields[k];
      const auto type = dsc::format::FieldType(c.type);
      const bool fixed = c.offsets == nullptr;  // fixed fields, and masks at the batch's image size
      const std::string dt = c.dtype ? dsc::format::DTypeName(dsc::format::DType(c.dtype)) : "uint8";
      const size_t es = c.dtype ? dsc::format::DTypeSize(dsc::format::DType(c.dtype)) : 1;
      const uint64_t bytes = fixed ? uint64_t(b->size) * c.elem_bytes : c.offsets[b->size];
      py::object values = array(py::dtype(dt == "float16" ? "float16" : dt == "bool" ? "bool" : dt), {py::ssize_t(bytes / es)}, c.data);
      py::object offsets = fixed ? py::none() : py::object(array(py::dtype("uint64"), {py::ssize_t(b->size) + 1}, c.offsets));
      std::vector<py::ssize_t> shape(c.shape, c.shape + c.ndim);
      fields.append(py::make_tuple(c.name, dsc::format::FieldTypeName(type), values, offsets, shape));
    }
    return py::make_tuple(array(NumpyDType(b->dtype), shape, b->images), labels,
                          py::array(py::dtype("uint32"), std::vector<py::ssize_t>{b->size}, b->indices),
                          py::array(py::dtype("bool"), std::vector<py::ssize_t>{b->size}, b->padding), b->epoch, b->index,
                          fields);
  }

  // Batches in the plan of the range last started (Loader::EpochRange::size).
  uint64_t RangeSize() const { return range_size_.load(); }

  py::bytes State() { return py::bytes(loader()->state().Serialize()); }

  void Restore(const py::bytes& state) {
    NotFromTheWait("restore a state");
    const std::string bytes = state;
    WithoutGil([&] {
      std::lock_guard<std::mutex> lock(mu_);
      const std::shared_ptr<dsc::Loader> l = loader();
      // Checked (bytes, run, rank count, position) before the running epoch is ended: a refused state
      // leaves it going.
      l->restore(dsc::LoaderState::Deserialize(bytes));
      range_.reset();
    });
  }

  void Close() {
    if (Inherited(generation_)) return;
    if (waiter_.load() == std::this_thread::get_id()) {
      // A signal handler while this thread waits in next(), holding mu_: the wait ends, then closes.
      close_requested_ = true;
      return;
    }
    WithoutGil([&] {
      std::lock_guard<std::mutex> lock(mu_);
      CloseLocked();
    });
  }

  py::dict Info() {
    const std::shared_ptr<dsc::Loader> lp = loader();
    dsc::Loader& l = *lp;
    const dsc::LoaderOptions& o = l.options();
    py::dict d;
    d["batch_size"] = o.batch_size;
    d["global_batch_size"] = o.global_batch_size;
    d["rank"] = o.rank;
    d["world_size"] = o.world_size;
    d["threads"] = l.threads();
    d["active_threads"] = l.active_threads();
    py::list remote;
    for (const auto& w : l.remote_stats()) {
      py::dict r;
      r["address"] = w.address;
      r["up"] = w.up;
      r["samples"] = w.samples;
      r["requests"] = w.requests;
      r["failures"] = w.failures;
      r["wire_bytes"] = w.wire_bytes;
      remote.append(r);
    }
    d["remote"] = remote;
    d["height"] = l.height();
    d["width"] = l.width();
    d["samples"] = l.dataset().size();
    d["max_leases"] = o.max_leases;
    d["lease_memory"] = o.lease_memory;
    d["prefetch"] = o.prefetch;
    d["cache_budget"] = o.cache_budget;
    d["readahead_bytes"] = o.readahead_bytes;
    // The image's and the label fields' names, as the file's schema gives them (an FFCV file's as
    // its view maps them): the keys of a typed file's dict batches.
    // The image is the one this loader decodes (LoaderOptions::image: format 1.3 files hold several).
    py::list names;
    const auto& fields = l.dataset().meta().fields;
    names.append(fields[l.dataset().ImageField(o.image)].name);
    for (const auto& f : fields)
      if (f.type == dsc::format::FieldType::kLabel) names.append(f.name);
    d["image_and_labels"] = names;
    return d;
  }

  // Per-stage worker time since the last reset (zeros unless collect_stats), and the largest stage.
  py::dict Stats(bool reset) {
    const std::shared_ptr<dsc::Loader> lp = loader();
    dsc::Loader& l = *lp;
    const dsc::StageStats s = l.stats();
    if (reset) l.reset_stats();
    py::dict d;
    d["read_s"] = s.read_ns / 1e9;
    d["decode_s"] = s.decode_ns / 1e9;
    d["augment_s"] = s.augment_ns / 1e9;
    d["collate_s"] = s.collate_ns / 1e9;
    d["consumer_wait_s"] = s.consumer_wait_ns / 1e9;
    d["samples"] = s.samples;
    d["payload_bytes"] = s.payload_bytes;
    d["advised_bytes"] = s.advised_bytes;
    const dsc::StageShare top = dsc::LargestStage(s);
    d["largest_stage"] = top.ns ? py::object(py::str(top.name)) : py::object(py::none());
    d["largest_share"] = top.share;
    return d;
  }

  struct CloseRequested {};

  // mu_ held: ends the range and lets the loader go (now, unless a call on another thread still has it).
  void CloseLocked() {
    range_.reset();
    std::shared_ptr<dsc::Loader> last;
    {
      std::lock_guard<std::mutex> l(ptr_mu_);
      last.swap(loader_);
    }
  }

  // Calls that take mu_ refuse to run on the thread waiting in next() (a signal handler there), which
  // already holds it: they would wait for themselves.
  void NotFromTheWait(const char* what) {
    if (waiter_.load() == std::this_thread::get_id())
      throw dsc::Error(std::string("cannot ") + what + " from a signal handler that interrupted this loader's wait for a batch "
                       "(close() is allowed: the iteration then ends)");
  }

  uint64_t generation_;
  std::shared_ptr<dsc::python::PyTracer> tracer_;  // before loader_: its workers record into it until they stop
  std::shared_ptr<dsc::Loader> loader_;  // replaced only under ptr_mu_ (and mu_)
  std::mutex ptr_mu_;
  std::unique_ptr<dsc::Loader::EpochRange> range_;
  dsc::Loader::Iterator it_;
  bool started_ = false;
  uint64_t range_id_ = 0;  // of range_ (bumped by Start and Resume)
  std::atomic<uint64_t> range_size_{0};  // read without mu_: state_dict() while another thread waits
  std::mutex mu_;  // guards range_, it_, started_ and range_id_
  std::atomic<std::thread::id> waiter_{};  // the thread in next() holding mu_, if any
  bool close_requested_ = false;  // close() from a signal handler on that thread
  static constexpr int kHeldGracePolls = 30;  // x 100 ms
  int polls_ = 0;
  uint32_t max_leases_ = 0;
  uint64_t lease_memory_ = 0;
  uint8_t label_bits_ = 64;
};

// ---- build ----

// The writer words its option errors for the dsc program ("--center-crop must be ...", "use
// --skip-invalid"); dsc.build's caller passed keywords, so the flags are named as those (center_crop).
// Only the names of build's keywords are rewritten: a file name in the message stays as it is.
std::string AsKeywords(const std::string& what, const std::vector<std::string>& keywords) {
  auto is_name_char = [](char c) { return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-'; };
  std::string s;
  for (size_t i = 0; i < what.size(); ++i) {
    if (what.compare(i, 2, "--") == 0 && (i == 0 || what[i - 1] == ' ' || what[i - 1] == '(')) {
      size_t end = i + 2;
      while (end < what.size() && is_name_char(what[end])) ++end;
      std::string name = what.substr(i + 2, end - i - 2);
      std::replace(name.begin(), name.end(), '-', '_');
      const bool ends = end == what.size() || std::strchr(" ,;:)", what[end]) != nullptr;  // "a --quality.jpg" is a file
      if (ends && std::find(keywords.begin(), keywords.end(), name) != keywords.end()) {
        s += name;
        i = end - 1;
        continue;
      }
    }
    s += what[i];
  }
  return s;
}

py::dict Build(const std::string& src, const std::string& out, const py::dict& kwargs) {
  dsc::writer::BuildOptions o;
  using B = dsc::writer::BuildOptions;
  using BSetter = std::function<void(B&, const std::string&, py::handle)>;
  static const std::map<std::string, BSetter> setters = {
      {"format", [](B& o, auto& n, py::handle h) {
         o.format = AsChoice(n, h, {"auto", "cifar-binary", "cifar-python", "tree", "manifest", "webdataset", "ffcv", "jsonl",
                                    "csv", "tsv", "coco"});
       }},
      {"images", [](B& o, auto& n, py::handle h) { o.images_dir = AsStr(n, h); }},
      {"masks", [](B& o, auto& n, py::handle h) { o.masks_dir = AsStr(n, h); }},
      {"coco_masks", [](B& o, auto& n, py::handle h) { o.coco_masks = AsStr(n, h); }},
      {"shard", [](B& o, auto& n, py::handle h) {  // (index, count): part index of count, for dsc.merge
         if (!py::isinstance<py::tuple>(h) || py::len(h) != 2)
           throw py::type_error("build option " + n + " must be a tuple (index, count), e.g. (3, 8)");
         const auto t = h.cast<py::tuple>();
         o.shard_count = AsInt<uint32_t>(n + " count", t[1], 1, 1000000);
         o.shard_index = AsInt<uint32_t>(n + " index", t[0], 0, o.shard_count - 1);
       }},
      {"split", [](B& o, auto& n, py::handle h) { o.split = AsChoice(n, h, {"train", "test"}); }},
      {"encoding", [](B& o, auto& n, py::handle h) { o.encode.encoding = AsChoice(n, h, {"default", "jpeg", "raw", "raw-zstd", "auto"}); }},
      {"quality", [](B& o, auto& n, py::handle h) { o.encode.quality = AsInt<int>(n, h, 1, 100); }},
      {"subsampling", [](B& o, auto& n, py::handle h) { o.encode.subsampling = AsChoice(n, h, {"444", "422", "420", "gray"}); }},
      {"max_resolution", [](B& o, auto& n, py::handle h) { o.encode.max_resolution = AsInt<int>(n, h, 0, INT32_MAX); }},
      {"center_crop", [](B& o, auto& n, py::handle h) { o.encode.center_crop = AsFloat(n, h); }},
      {"reencode", [](B& o, auto& n, py::handle h) { o.encode.reencode = AsBool(n, h); }},
      {"jpeg_tables", [](B& o, auto& n, py::handle h) { o.jpeg_tables = AsChoice(n, h, {"shared", "inline"}); }},
      {"block_size", [](B& o, auto& n, py::handle h) { o.block_size = AsInt<uint64_t>(n, h, 1, UINT64_MAX); }},
      {"threads", [](B& o, auto& n, py::handle h) { o.threads = AsInt<int>(n, h, 0, INT32_MAX); }},
      {"max_pixels", [](B& o, auto& n, py::handle h) { o.encode.max_pixels = AsInt<uint64_t>(n, h, 1, UINT64_MAX); }},
      {"max_file_size", [](B& o, auto& n, py::handle h) { o.max_file_size = AsInt<uint64_t>(n, h, 1, UINT64_MAX); }},
      {"skip_invalid", [](B& o, auto& n, py::handle h) { o.skip_invalid = AsBool(n, h); }},
      {"restart_interval", [](B& o, auto& n, py::handle h) {
         // 'auto', 'none' or a number of MCUs (the writer checks its range)
         if (IsInt(h)) o.encode.restart_interval = std::to_string(AsInt<long long>(n, h, 1, 65535));
         else o.encode.restart_interval = AsStr(n, h);
       }},
      {"progress", [](B& o, auto& n, py::handle h) { o.progress = AsBool(n, h); }},
  };
  dsc::writer::TableOptions table;
  dsc::DatasetOptions source;  // an FFCV file at a URL (dsc.convert): its streaming cache
  for (auto [k, v] : kwargs) {
    const std::string name = py::str(k);
    if (name == "cache_dir" || name == "cache_budget") {
      if (!v.is_none()) {
        if (name == "cache_dir") source.cache_dir = AsStr(name, v);
        else source.cache_budget = AsInt<uint64_t>(name, v, 1, UINT64_MAX);
      }
      continue;
    }
    if (name == "schema" || name == "image_column") {  // tables (.jsonl, .csv): see dsc build --help
      if (!v.is_none()) (name == "schema" ? table.schema : table.image_column) = AsStr(name, v);
      continue;
    }
    auto it = setters.find(name);
    if (it == setters.end())
      throw py::type_error("unknown build option '" + name + "'; accepted: " + Join(Names(setters)) + ", schema, image_column, cache_dir, cache_budget");
    if (!v.is_none()) it->second(o, name, v);
  }
  if (o.format == "ffcv" && dsc::IsUrl(src))  // streamed by the reader's source; the writer opens no URLs
    o.ffcv_bytes = [source](const std::string& url) { return dsc::OpenSource(url, source); };
  const dsc::writer::BuildReport r = WithoutGil([&] {
    try {
      // The same dispatch as `dsc build`: tables and COCO files are written as typed fields.
      if (dsc::writer::IsTableSource(src, o.format)) return dsc::writer::BuildTable(src, out, o, table);
      if (!o.masks_dir.empty()) return dsc::writer::BuildSegmentation(src, out, o);
      if (dsc::writer::IsCocoSource(src, o.format)) return dsc::writer::BuildCoco(src, out, o);
      return dsc::writer::Build(src, out, o);
    } catch (const dsc::OptionError& e) {
      throw dsc::OptionError(AsKeywords(e.what(), Names(setters)));
    } catch (const dsc::Error& e) {
      throw dsc::Error(AsKeywords(e.what(), Names(setters)));
    }
  });
  py::dict d;
  d["format"] = r.format;
  d["samples"] = r.samples;
  d["skipped"] = r.skipped;
  d["file_size"] = r.file_size;
  d["payload_bytes"] = r.payload_bytes;
  d["jpeg_tables"] = r.jpeg_tables;
  d["encodings"] = r.encodings;
  d["seconds"] = r.seconds;
  return d;
}

}  // namespace

namespace dsc::python {
void RegisterWriter(py::module_& m);  // python/writer.cc: dsc.Writer's core
}  // namespace dsc::python

PYBIND11_MODULE(_dsc, m) {
  m.doc() = "dsc's C++ core; use the dsc package, which wraps it.";
  pthread_atfork(nullptr, nullptr, AtForkChild);

  g_error = PyErr_NewExceptionWithDoc("dsc.Error",
                                      "A damaged file or sample, an unreadable source, or a misuse of a Loader. "
                                      "The message names the file and, where one is at fault, the sample.",
                                      PyExc_RuntimeError, nullptr);
  py::tuple bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_option_error = PyErr_NewExceptionWithDoc("dsc.OptionError", "An option value the loader rejects (also a ValueError).",
                                             bases.ptr(), nullptr);
  if (!g_error || !g_option_error) throw py::error_already_set();
  m.attr("Error") = py::handle(g_error);
  m.attr("OptionError") = py::handle(g_option_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const dsc::OptionError& e) {
      SetError(g_option_error, e.what());
    } catch (const dsc::Error& e) {
      SetError(g_error, e.what());
    }
  });

  m.def("build", &Build, py::arg("source"), py::arg("out"), py::arg("options"));
  m.def("merge", [](const std::vector<std::string>& parts, const std::string& out, bool progress) {
    const dsc::writer::MergeReport r = WithoutGil([&] { return dsc::writer::Merge(parts, out, {progress}); });
    py::dict d;
    d["parts"] = r.parts;
    d["samples"] = r.samples;
    d["file_size"] = r.file_size;
    d["payload_bytes"] = r.payload_bytes;
    d["seconds"] = r.seconds;
    return d;
  }, py::arg("parts"), py::arg("out"), py::arg("progress"));
  dsc::python::RegisterWriter(m);
  m.def("info_json", [](const std::string& path) {
    return WithoutGil([&] {
      auto src = dsc::OpenSource(path, dsc::DatasetOptions{});  // a path or a URL (stream/)
      if (dsc::format::ffcv::IsFfcv(*src)) return dsc::FfcvInfoJson(*dsc::format::ffcv::File::Open(src.get()));  // as FFCV named its fields
      dsc::Dataset ds(std::move(src), {});
      return dsc::InfoJson(ds, dsc::Summarize(ds));
    });
  });
  m.def("checksum", [](py::buffer b) {
    py::buffer_info info = b.request();
    if (!PyBuffer_IsContiguous(info.view(), 'C')) throw py::value_error("checksum needs a C-contiguous buffer");
    return dsc::Checksum(info.ptr, size_t(info.size * info.itemsize));
  });
  m.def("random_subset", &dsc::RandomSubset, py::arg("total"), py::arg("n"), py::arg("seed"));
  m.attr("__version__") = DSC_VERSION;  // the dsc program's `dsc --version`
  m.def("loader_option_names", &PythonOptionNames);
  m.def("loader_options_doc", &LoaderOptionsDoc);
  // The table's rows (name, type, where, example and refused values), for tests that walk it.
  m.def("loader_option_table", [] {
    static const char* kTypes[] = {"bool", "int", "float", "choice", "text", "ints", "floats", "indices", "texts", "threads", "size"};
    py::list rows;
    for (const auto& r : dsc::LoaderOptionTable()) {
      py::dict d;
      d["name"] = r.name;
      d["type"] = kTypes[size_t(r.type)];
      d["cli"] = bool(r.where & dsc::kOnCli);
      d["python"] = bool(r.where & dsc::kOnPython);
      d["wire"] = bool(r.where & dsc::kOnWire);
      d["needs"] = r.needs;
      d["example"] = r.example;
      d["bad"] = r.bad;
      d["help"] = r.help;
      rows.append(d);
    }
    return rows;
  });
  m.attr("presets") = dsc::PresetNames();
  // The resolved options as the table's text, for tests that compare front ends.
  m.def("resolved_loader_options", [](const std::optional<std::string>& preset, const py::dict& kwargs) {
    const dsc::LoaderOptions o = MakeLoaderOptions(preset, kwargs);
    std::map<std::string, std::string> out;
    for (const auto& row : dsc::LoaderOptionTable()) out[row.name] = row.get(o);
    return out;
  });
#ifdef DSC_HAVE_REMOTE  // whether remote= can reach `dsc serve` workers (the option exists either way, to say why not)
  m.attr("has_remote") = true;
#else
  m.attr("has_remote") = false;
#endif
  m.def("state_epoch", [](const py::bytes& state) { return dsc::LoaderState::Deserialize(std::string(state)).epoch; });
  m.def("merge_states", [](const std::vector<py::bytes>& states) {
    std::vector<dsc::LoaderState> v;
    for (const auto& s : states) v.push_back(dsc::LoaderState::Deserialize(std::string(s)));
    try {
      return py::bytes(dsc::LoaderState::Merge(v).Serialize());
    } catch (const dsc::Error& e) {  // the C++ function's name means nothing to a Python caller
      std::string what = e.what();
      const std::string cpp = "LoaderState::Merge: ";
      if (what.compare(0, cpp.size(), cpp) == 0) what = "merge_state_dicts: " + what.substr(cpp.size());
      throw dsc::Error(what);
    }
  });

  dsc::python::BindTrace(m);
  dsc::python::BindTransforms(m);

  py::class_<PyLoader>(m, "Loader")
      .def(py::init<const std::string&, const std::optional<std::string>&, const py::dict&, std::shared_ptr<dsc::python::PyTracer>>(),
           py::arg("path"), py::arg("preset"), py::arg("options"), py::arg("tracer") = nullptr)
      .def("__len__", [](PyLoader& l) { return l.loader()->batches_per_epoch(); })
      .def("start", &PyLoader::Start, py::arg("epoch"), py::arg("first_batch") = 0)
      .def("resume", &PyLoader::Resume)
      .def("range_size", &PyLoader::RangeSize)
      .def("next", &PyLoader::Next, py::arg("copy"), py::arg("range") = 0)
      .def("state", &PyLoader::State)
      .def("restore", &PyLoader::Restore)
      .def("close", &PyLoader::Close)
      .def("info", &PyLoader::Info)
      .def("stats", &PyLoader::Stats, py::arg("reset") = false)
      .def("buffers_allocated", [](PyLoader& l) { return l.loader()->buffers_allocated(); })
      .def("leased", [](PyLoader& l) { return l.loader()->leased(); });
}
