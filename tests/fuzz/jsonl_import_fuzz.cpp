// libFuzzer harness: JSON Lines import (db/jsonl.h) into a fresh in-memory
// SQLite database, then an export of what was imported.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "db/jsonl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto db = fusetune::db::MakeSqliteDatabase(":memory:");
  if (!db.ok()) {
    std::fprintf(stderr, "jsonl_import_fuzz: %s\n", db.error().ToString().c_str());
    std::abort();
  }
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  if (fusetune::db::ImportJsonl(**db, in, "fuzz.jsonl").ok()) {
    std::ostringstream out;
    (void)fusetune::db::ExportJsonl(**db, out);
  }
  return 0;
}
