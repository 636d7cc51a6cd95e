#include "model/params.h"

#include <algorithm>

namespace ada {

void ParamLayout::add(const std::string& name, std::vector<int> shape, Init init, double init_value,
                      bool decay) {
  check(!finalized_, "parameter layout already finalized; cannot add " + name);
  check(!has(name), "duplicate parameter name " + name);
  ParamInfo p;
  p.name = name;
  p.numel = 1;
  for (int d : shape) {
    check(d > 0, "parameter " + name + " has a non-positive dimension");
    p.numel *= (size_t)d;
  }
  p.shape = std::move(shape);
  p.init = init;
  p.init_value = init_value;
  p.decay = decay;
  index_[name] = tensors_.size();
  tensors_.push_back(std::move(p));
}

void ParamLayout::finalize() {
  check(!finalized_, "parameter layout finalized twice");
  // Stable partition keeps the declaration order within each group, so the
  // buffer reads embedding, layer 0, layer 1, ..., head, then the norms.
  std::stable_partition(tensors_.begin(), tensors_.end(), [](const ParamInfo& p) { return p.decay; });
  total_ = decay_count_ = 0;
  for (size_t i = 0; i < tensors_.size(); i++) index_[tensors_[i].name] = i;
  for (auto& p : tensors_) {
    p.offset = total_;
    total_ += p.numel;
    if (p.decay) decay_count_ = total_;
  }
  finalized_ = true;
}

const ParamInfo& ParamLayout::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("no parameter named " + name);
  return tensors_[it->second];
}

bool ParamLayout::has(const std::string& name) const { return index_.count(name) != 0; }

}  // namespace ada
