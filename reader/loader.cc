// The Loader facade (reader/loader.h) over the pipeline (reader/pipeline.h): Loader, its epoch
// ranges and iterators.
#include "reader/loader.h"

#include "format/error.h"
#include "reader/pipeline.h"

namespace dsc {

Loader::Loader(const std::string& path, const LoaderOptions& options) : p_(new Pipeline(path, WithRankBatch(options))) {}
Loader::~Loader() = default;

Loader::EpochRange Loader::epoch(uint64_t e, uint64_t first_batch) { return EpochRange(p_.get(), p_->Start(e, first_batch)); }
Loader::EpochRange Loader::resume() {
  const auto [e, k] = p_->ResumePoint();
  return epoch(e, k);
}
LoaderState Loader::state() const { return p_->State(); }
void Loader::restore(const LoaderState& s) { p_->Restore(s); }
uint64_t Loader::batches_per_epoch() const { return p_->batches_per_epoch(); }
uint32_t Loader::height() const { return p_->height(); }
uint32_t Loader::width() const { return p_->width(); }
void Loader::set_output_size(uint32_t w, uint32_t h) { p_->SetOutputSize(w, h); }
const Dataset& Loader::dataset() const { return p_->dataset(); }
const LoaderOptions& Loader::options() const { return p_->options(); }
int Loader::threads() const { return p_->threads(); }
int Loader::active_threads() const { return p_->active_threads(); }
StageStats Loader::stats() const { return p_->Stats(); }
BatchLease Loader::lease(const Batch& b) { return p_->Lease(&b); }
size_t Loader::buffers_allocated() const { return p_->BuffersAllocated(); }
size_t Loader::leased() const { return p_->Leased(); }
bool Loader::awaits_buffer() const { return p_->AwaitsBuffer(); }
std::vector<RemoteWorkerStats> Loader::remote_stats() const { return p_->RemoteStats(); }
void Loader::reset_stats() { p_->ResetStats(); }

Loader::EpochRange::EpochRange(EpochRange&& o) noexcept : p_(o.p_), job_(o.job_) { o.p_ = nullptr; }

Loader::EpochRange::~EpochRange() {
  if (p_ && p_->IsJob(job_)) p_->Cancel();
}

uint64_t Loader::EpochRange::size() const { return p_ ? p_->JobBatches(job_) : 0; }

Loader::Iterator Loader::EpochRange::begin() {
  Iterator it;
  it.p_ = p_;
  it.job_ = job_;
  it.batch_ = p_->Next(job_);
  return it;
}

BatchLease Loader::Iterator::lease() const {
  if (!p_) throw Error("lease: the range has ended");
  return p_->Lease(batch_, job_);
}

Loader::Iterator& Loader::Iterator::operator++() {
  batch_ = p_->Next(job_);
  return *this;
}

}  // namespace dsc
