// consumer_dynamic MODEL.onnx OUT_DIR: one executable of the installed
// library over changing sizes (CompileOptions::dynamic_dims): the model
// (inputs [batch, seq, 32]) compiled at seq 4, run at seq 4, 8, 6, 8, 4 on
// the pattern 0.5 sin(i), each output written as OUT_DIR/y_SEQ.bin for the
// test to compare with the reference executor; three programs end up held.
// Also the errors: a dynamic dimension no input has, dynamic dimensions
// with a KV cache kept in place.
#include <fusetune/fusetune.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer_dynamic MODEL.onnx OUT_DIR\n");
    return 2;
  }
  fusetune::CompileOptions options;
  options.dims = {{"batch", 1}, {"seq", 4}};
  options.dynamic_dims = {"seq"};
  auto exe = fusetune::Compiler::Open(options).value()->Compile(argv[1]);
  if (!exe.ok()) {
    std::fprintf(stderr, "compile: %s\n", exe.error().c_str());
    return 1;
  }
  for (int64_t seq : {4, 8, 6, 8, 4}) {
    fusetune::Array x{{1, seq, 32}, {}};
    for (int64_t i = 0; i < seq * 32; ++i) x.data.push_back(0.5f * std::sin(static_cast<float>(i)));
    auto out = exe.value()->Run({{"x", x}});
    if (!out.ok()) {
      std::fprintf(stderr, "run at seq %lld: %s\n", static_cast<long long>(seq),
                   out.error().c_str());
      return 1;
    }
    const fusetune::Array& y = out.value().at("y");
    if (y.shape != std::vector<int64_t>{1, seq, 32} || exe.value()->dims().at("seq") != seq)
      return 1;
    std::ofstream file(std::string(argv[2]) + "/y_" + std::to_string(seq) + ".bin",
                       std::ios::binary);
    file.write(reinterpret_cast<const char*>(y.data.data()),
               static_cast<std::streamsize>(y.data.size() * sizeof(float)));
  }
  std::printf("dynamic: %lld programs for seq 4, 8, 6\n",
              static_cast<long long>(exe.value()->instances()));
  if (exe.value()->instances() != 3) return 1;
  fusetune::CompileOptions no_such = options;
  no_such.dynamic_dims = {"width"};
  auto bad = fusetune::Compiler::Open(no_such).value()->Compile(argv[1]);
  if (bad.ok() || bad.error().find("'width' is not a symbolic dimension") == std::string::npos) {
    std::fprintf(stderr, "a dimension no input has: %s\n",
                 bad.ok() ? "compiled" : bad.error().c_str());
    return 1;
  }
  fusetune::CompileOptions with_cache = options;
  with_cache.kv_cache_in_place = true;
  if (fusetune::Compiler::Open(with_cache).ok()) return 1;
  return 0;
}
