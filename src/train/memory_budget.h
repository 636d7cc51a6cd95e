// Memory a model needs, estimated from its sizes before anything is
// allocated, and the check that refuses what this machine cannot hold, so a
// size flag or a checkpoint's metadata can never end in std::bad_alloc (or in
// the kernel's out-of-memory killer) after minutes of work.
//
// The estimates are rough lower bounds: the buffers every step certainly
// holds. They exist to refuse the impossible with a clear message, not to
// predict the peak exactly.
#pragma once
#include <string>

#include "core/config.h"

namespace ada {

// What training holds per parameter: the parameter, its gradient and the two
// AdamW moments, `real_bytes` each.
inline double training_state_bytes(double n_params, int real_bytes) { return 4.0 * n_params * real_bytes; }

// The model's own buffers: its parameters (and, when training, their
// gradients and the two AdamW moments), `real_bytes` per value, plus the RoPE
// tables.
double model_bytes(const ModelConfig& c, double n_params, int real_bytes, bool training);

// One step's activations for `tokens` tokens (batch x seq) that each run up to
// `passes` passes: per token and pass what a block saves for the backward (of
// every layer when training; of one layer at a time otherwise), and one chunk
// of the fused classifier's logits (methods/fused_classifier.h: the methods
// that use it hold no more; the others hold a row of logits per token and
// pass). A lower bound, by design: the arena's peak (the trainer's memory
// line) is the real figure (docs/benchmarks.md, "Device memory of 70m at
// T = 1024"), and a bound above it would refuse runs that fit.
double activation_bytes(const ModelConfig& c, double tokens, int passes, int real_bytes, bool training);

// What this process may use: the machine's physical memory, or the address-
// space limit (ulimit -v) when that is lower.
double available_memory_bytes();

// Throws ada::Error "<what> needs about 12.3 GB (<detail>), more than the
// 7.6 GB this machine has" when bytes exceed available_memory_bytes(), or,
// after set_device_memory, the device's memory.
void check_memory(double bytes, const std::string& what, const std::string& detail);

// Where the model and its activations live when that is not this process's
// memory: train_gpu, once its GPU is open, sets the GPU's memory and name
// ("the GPU (NVIDIA H200)"), so that a run is judged against the memory it
// will use, not the host's. bytes = 0 goes back to the host's memory.
void set_device_memory(double bytes, const std::string& where);

}  // namespace ada
