#include "compiler/shape_instances.h"

#include <fmt/format.h>

#include <algorithm>

namespace fusetune::compiler {

namespace {

std::string JoinDims(const std::vector<std::string>& names, const std::vector<int64_t>& values) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += fmt::format("{}{}={}", i ? ", " : "", names[i], values[i]);
  return text;
}

}  // namespace

Result<std::unique_ptr<ShapeInstances>> ShapeInstances::Make(std::unique_ptr<CompiledModel> first,
                                                             Dims dims,
                                                             std::vector<std::string> dynamic,
                                                             Instantiate instantiate,
                                                             size_t capacity) {
  std::unique_ptr<ShapeInstances> s(new ShapeInstances());
  const graph::Graph& g = first->graph();
  std::vector<std::string> symbols;  // every symbolic dimension of the inputs, for errors
  for (graph::ValueId v : g.inputs) {
    const graph::TensorType& t = g.type(v);
    for (size_t axis = 0; axis < t.symbols.size(); ++axis) {
      if (t.symbols[axis].empty()) continue;
      if (std::find(symbols.begin(), symbols.end(), t.symbols[axis]) == symbols.end())
        symbols.push_back(t.symbols[axis]);
      const auto d = std::find(dynamic.begin(), dynamic.end(), t.symbols[axis]);
      if (d == dynamic.end()) continue;
      const size_t dim = static_cast<size_t>(d - dynamic.begin());
      s->uses_.push_back({g.value(v).name, axis, dim});
      dims[*d] = t.dims[axis];  // the value the first instance has
    }
  }
  for (size_t d = 0; d < dynamic.size(); ++d)
    if (std::none_of(s->uses_.begin(), s->uses_.end(), [&](const Use& u) { return u.dim == d; }))
      return Error(
          ErrorCode::kInvalidArgument,
          fmt::format("'{}' is not a symbolic dimension of the model's inputs (they "
                      "have: {})",
                      dynamic[d],
                      symbols.empty() ? "none" : fmt::format("{}", fmt::join(symbols, ", "))));
  s->dynamic_ = std::move(dynamic);
  s->instantiate_ = std::move(instantiate);
  s->capacity_ = std::max<size_t>(capacity, 1);
  std::vector<int64_t> key;
  for (const std::string& name : s->dynamic_) key.push_back(dims.at(name));
  s->instances_.push_back({std::move(key), std::move(dims), std::move(first), 0});
  return s;
}

Result<CompiledModel*> ShapeInstances::Pick(const FeedShape& feed_shape) {
  key_.assign(dynamic_.size(), -1);
  for (const Use& use : uses_) {
    const std::vector<int64_t>* shape = feed_shape(use.input);
    if (!shape || use.axis >= shape->size()) continue;  // the run's own checks say what is wrong
    const int64_t value = (*shape)[use.axis];
    if (value < 0)  // 0 is a size (a cache of no rows), which the import checks
      return Error(ErrorCode::kShapeMismatch,
                   fmt::format("input '{}' has {} along axis {} ('{}'): a size is never negative",
                               use.input, value, use.axis, dynamic_[use.dim]));
    if (key_[use.dim] >= 0 && key_[use.dim] != value)
      return Error(ErrorCode::kShapeMismatch,
                   fmt::format("input '{}' has {} along axis {} ('{}'), where another input "
                               "gave {}",
                               use.input, value, use.axis, dynamic_[use.dim], key_[use.dim]));
    key_[use.dim] = value;
  }
  const Instance& now = instances_[current_];
  for (size_t d = 0; d < key_.size(); ++d)
    if (key_[d] < 0) key_[d] = now.key[d];
  size_t found = instances_.size();
  if (key_ == now.key) {
    found = current_;
  } else {
    for (size_t i = 0; i < instances_.size() && found == instances_.size(); ++i)
      if (instances_[i].key == key_) found = i;
  }
  if (found == instances_.size()) {
    FT_ASSIGN_OR_RETURN(found, Add(key_));
  }
  current_ = found;
  instances_[found].last_used = ++clock_;
  return instances_[found].model.get();
}

Result<size_t> ShapeInstances::Add(std::vector<int64_t> key) {
  Dims dims = instances_[0].dims;
  for (size_t d = 0; d < dynamic_.size(); ++d) dims[dynamic_[d]] = key[d];
  if (!instantiate_)
    return Error(ErrorCode::kInternal, "a program of one size asked for another size");
  auto model = instantiate_(dims);
  if (!model.ok()) return model.error().WithContext(fmt::format("at {}", JoinDims(dynamic_, key)));
  if (instances_.size() >= capacity_) {
    auto oldest = std::min_element(
        instances_.begin(), instances_.end(),
        [](const Instance& a, const Instance& b) { return a.last_used < b.last_used; });
    instances_.erase(oldest);
    current_ = 0;  // indices moved; Pick sets it again
  }
  instances_.push_back({std::move(key), std::move(dims), std::move(*model), 0});
  return instances_.size() - 1;
}

const ShapeInstances::Dims& ShapeInstances::dims() const { return instances_[current_].dims; }

}  // namespace fusetune::compiler
