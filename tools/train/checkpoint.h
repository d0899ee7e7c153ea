// dsc train's checkpoints: a directory (model.pt, optimizer.pt, state.txt, loader.state) replaced as a
// whole. The new one is written in a hidden sibling ".NAME.dsc-tmp-RANDOM", each file through
// writer/atomic_file.h (fsynced, and the staging directory with it), then swapped in with
// renameat2(RENAME_EXCHANGE) and the old one (now under the hidden name) deleted. A crash at any
// point leaves DIR holding a complete checkpoint, old or new; hidden siblings left by a crash are
// removed by the next save. One trainer writes a given checkpoint directory at a time.
//
// loader.state holds LoaderState::Serialize()'s bytes (position and the loader's run fingerprint);
// state.txt holds the step and the options that decide what is trained (the subset itself, batch
// size, seed, epochs, learning rate), so a resume continues the same run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "reader/loader.h"
#include "tools/train/config.h"
#include "tools/train/resnet9.h"

namespace dsc::train {

struct Checkpoint {
  LoaderState loader;
  uint64_t seed = 0, step = 0, train_samples = 0, limit = 0, epochs = 0;
  uint32_t batch = 0;
  double lr = 0;
  std::vector<uint32_t> subset;
};

// The checkpoint after epoch `epoch`: `state` is the loaders' merged state, `stopped` whether
// --max-steps ended the epoch early (else the resume starts the next epoch).
Checkpoint EpochCheckpoint(const Config& c, LoaderState state, uint64_t epoch, bool stopped, uint64_t batches_per_epoch,
                           uint64_t step, uint64_t train_samples, const std::vector<uint32_t>& subset);

// --checkpoint replaces what is at its path: only nothing, or a checkpoint of ours (its state file's
// magic, no other files), may be there. Anything else (a folder of the user's, a dataset, ".") is
// refused with dsc::Error, before training and again before each swap.
void CheckCheckpointTarget(const std::string& path);

void SaveCheckpoint(const std::string& dir, const Checkpoint& k, ResNet9& model, torch::optim::SGD& opt);

// Reads the checkpoint to resume (c->resume) and makes its identity the run's: a flag naming a
// different value is an OptionError (silently training another run than the one checkpointed would
// waste it).
Checkpoint LoadCheckpointState(Config* c);

// Where a resumed run continues.
struct ResumePoint {
  uint64_t step = 0, epoch = 0, batch = 0;
};

// Loads the checkpoint's model and optimiser (a model.pt of another class count, or not ours, is
// named, not a libtorch trace), restores the loader to its position and says where training resumes.
// `batches_per_epoch`: of a full epoch, as the loader said before the restore.
ResumePoint Resume(const Config& c, const Checkpoint& k, int64_t classes, ResNet9& model, torch::optim::SGD& opt, Loader& train,
                   uint64_t batches_per_epoch);

}  // namespace dsc::train
