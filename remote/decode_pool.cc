#include "remote/decode_pool.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <system_error>

#include "format/error.h"
#include "remote/wire.h"

namespace dsc::remote {

namespace {

// Samples a decode thread takes at once: a request split evenly among the threads, in pieces of at most
// this many (small JPEGs in one piece are decoded as one group, SampleProcessor::PrepareChunk; a
// cancelled call stops after the piece in hand).
constexpr uint32_t kMaxPiece = 64;

}  // namespace

DecodePool::DecodePool(int n) {
  try {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
  } catch (const std::system_error& e) {  // those started must stop before the members go
    Stop();
    throw Error("cannot start " + std::to_string(n) + " decode threads (" + e.what() +
                "): use --threads with fewer, or raise the process or address-space limit");
  }
}

DecodePool::~DecodePool() { Stop(); }

void DecodePool::Run(DecodeCall* c, uint32_t count, const std::function<bool()>& cancelled) {
  const uint32_t per = std::max<uint32_t>(1, std::min<uint32_t>(kMaxPiece, (count + uint32_t(size()) - 1) / uint32_t(size())));
  {
    std::lock_guard<std::mutex> l(mu_);
    for (uint32_t f = 0; f < count; f += per) {
      queue_.push_back({c, f, std::min(count, f + per)});
      ++c->pending_;
    }
  }
  cv_.notify_all();
  std::unique_lock<std::mutex> l(c->mu_);
  while (!c->cv_.wait_for(l, std::chrono::milliseconds(20), [&] { return c->pending_ == 0; }))
    if (!c->cancelled.load() && cancelled()) c->cancelled.store(true);  // pieces not started are skipped
}

void DecodePool::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void DecodePool::Loop() {
  struct Cached {
    std::shared_ptr<const SampleWork> work;
    std::unique_ptr<SampleProcessor> proc;
  };
  std::map<std::string, Cached> procs;
  while (true) {
    Piece p;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      p = queue_.front();
      queue_.pop_front();
    }
    DecodeCall* c = p.call;
    std::string error;
    if (!c->cancelled.load()) {
      auto it = procs.find(c->key);
      if (it == procs.end()) {
        if (procs.size() >= kProcessorsPerThread) procs.clear();
        it = procs.emplace(c->key, Cached{c->work, c->work->NewProcessor(*c->ds, false)}).first;
      }
      const size_t bytes = c->work->sample_bytes();
      constexpr uint32_t kPrefetchAhead = 4;  // the samples are shuffled: their index entries lie anywhere
      it->second.proc->PrepareChunk(c->samples + p.from, p.to - p.from, nullptr);  // as the loader's threads
      for (uint32_t i = p.from; i < p.to && !c->cancelled.load(); ++i) {
        if (i + kPrefetchAhead < p.to) c->ds->PrefetchEntry(c->samples[i + kPrefetchAhead]);
        kernels::SampleParams sp;
        SampleForm form = SampleForm::kRgb;
        try {
          it->second.proc->Process(c->samples[i], c->seed, c->epoch, c->images + bytes * i, nullptr, &sp, nullptr,
                                   c->forms ? &form : nullptr);
        } catch (const std::exception& e) {
          if (error.empty()) error = e.what();
        }
        PutParams(sp, c->params + kParamBytes * i);
        if (c->forms) c->forms[i] = uint8_t(form);
      }
    }
    std::lock_guard<std::mutex> l(c->mu_);
    if (!error.empty() && c->error.empty()) c->error = error;
    if (--c->pending_ == 0) c->cv_.notify_all();
  }
}

}  // namespace dsc::remote
