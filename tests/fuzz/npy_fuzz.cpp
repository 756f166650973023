// libFuzzer harness: .npy parsing (graph/npy.h), and writing back what parses.
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto tensor = fusetune::graph::ParseNpy(bytes, "fuzz.npy");
  if (tensor.ok()) (void)fusetune::graph::SerializeNpy(*tensor);
  return 0;
}
