// The parameter layout: every trainable tensor of the model and of the method
// that drives it lives in ONE contiguous buffer (llm.c style). Gradients and
// the two AdamW moments are buffers of the same layout, so zeroing, clipping,
// the optimizer step and checkpointing are each one loop over one array.
//
// Tensors that get weight decay (matrices) are placed first and the ones that
// do not (norm weights, gate biases) last, so AdamW runs on two ranges.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "core/common.h"

namespace ada {

enum class Init { Normal, Zeros, Ones, Constant };

struct ParamInfo {
  std::string name;          // safetensors name, e.g. "layers.0.attn.wqkv.weight"
  std::vector<int> shape;    // row-major
  size_t offset = 0;         // into the parameter buffer (elements)
  size_t numel = 0;
  Init init = Init::Normal;
  double init_value = 0.02;  // std for Normal, value for Constant
  bool decay = true;         // AdamW weight decay applies
};

class ParamLayout {
 public:
  // Declares a tensor. Offsets are assigned by finalize().
  void add(const std::string& name, std::vector<int> shape, Init init, double init_value, bool decay);
  // Orders decayed tensors first and assigns offsets. Must be called once
  // before offsets are read.
  void finalize();

  bool finalized() const { return finalized_; }
  size_t total() const { return total_; }
  size_t decay_count() const { return decay_count_; }  // elements [0, decay_count) are decayed
  const std::vector<ParamInfo>& tensors() const { return tensors_; }
  // By name, in constant time (a model of many layers declares many tensors).
  const ParamInfo& get(const std::string& name) const;
  bool has(const std::string& name) const;

 private:
  std::vector<ParamInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in tensors_
  size_t total_ = 0, decay_count_ = 0;
  bool finalized_ = false;
};

}  // namespace ada
