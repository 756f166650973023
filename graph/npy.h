// NumPy .npy files (format versions 1 to 3, little-endian, C order) for
// model inputs and outputs. Supported dtypes: f4, f8, f2, i8, i4, i1, u1, b1.
#pragma once

#include <string>

#include "common/status.h"
#include "graph/tensor.h"

namespace fusetune::graph {

Result<Tensor> ReadNpy(const std::string& path);
Result<Tensor> ParseNpy(const std::string& bytes, const std::string& origin);
Status WriteNpy(const std::string& path, const Tensor& tensor);
std::string SerializeNpy(const Tensor& tensor);

}  // namespace fusetune::graph
