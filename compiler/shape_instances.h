// One executable over changing sizes: a model whose symbolic dimensions
// (a prompt's length, a batch) change from run to run.
//
// A plan is fixed to one size: its kernels' descriptors are built for the
// graph's static shapes. ShapeInstances keeps one compiled model per set of
// sizes the runs have had, made the first time a run has them: the model
// imported again at those sizes and compiled from the same tuning index, so
// that each group's plan is the one tuned for that size (tuned buckets:
// `fusetune tune --dim seq=1,16,64,256`), else the nearest tuned size's
// measured plan, its partition kept and its tilings moved to the size
// (buckets may differ in which groups fuse). Picking is a lookup of the
// feeds' sizes among the instances made (a few compares:
// `bench_dynamic_pick`); the least recently
// used instance goes when more than `capacity` are held.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/model.h"

namespace fusetune::compiler {

class ShapeInstances {
 public:
  using Dims = std::map<std::string, int64_t>;
  // Compiles the model at these values of its symbolic dimensions (may be
  // empty when `dynamic` is: nothing is ever compiled again).
  using Instantiate = std::function<Result<std::unique_ptr<CompiledModel>>(const Dims& dims)>;
  // The shape a run feeds an input, or null when it feeds none by that name.
  using FeedShape = std::function<const std::vector<int64_t>*(const std::string& input)>;

  // `first` is the model compiled at `dims`; `dynamic` names the symbolic
  // dimensions runs may change (each must be a dimension of some graph
  // input, named in the model, or this fails saying which is not).
  static Result<std::unique_ptr<ShapeInstances>> Make(std::unique_ptr<CompiledModel> first,
                                                      Dims dims, std::vector<std::string> dynamic,
                                                      Instantiate instantiate,
                                                      size_t capacity = 16);

  // The model for the sizes the feeds have, made on their first run; an
  // input that disagrees with another on a dimension's size is an error.
  Result<CompiledModel*> Pick(const FeedShape& feed_shape);

  // The values of every symbolic dimension of the last picked instance.
  const Dims& dims() const;
  CompiledModel& current() { return *instances_[current_].model; }
  const CompiledModel& current() const { return *instances_[current_].model; }
  size_t size() const { return instances_.size(); }
  size_t capacity() const { return capacity_; }
  const std::vector<std::string>& dynamic() const { return dynamic_; }

 private:
  struct Instance {
    std::vector<int64_t> key;  // values of dynamic_, in order
    Dims dims;
    std::unique_ptr<CompiledModel> model;
    uint64_t last_used = 0;
  };
  // Where each dynamic dimension appears: input name, axis, index in dynamic_.
  struct Use {
    std::string input;
    size_t axis;
    size_t dim;
  };
  ShapeInstances() = default;
  Result<size_t> Add(std::vector<int64_t> key);

  std::vector<std::string> dynamic_;
  std::vector<Use> uses_;
  Instantiate instantiate_;
  size_t capacity_ = 16;
  std::vector<Instance> instances_;
  size_t current_ = 0;
  uint64_t clock_ = 0;
  std::vector<int64_t> key_;  // scratch for Pick
};

}  // namespace fusetune::compiler
