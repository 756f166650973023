// Helper process for the db/ process tests.
//   db_test_tool write DB BATCHES BATCH_SIZE [FIRST_SERIAL]
//                                              commits batches of records numbered from
//                                              FIRST_SERIAL, printing "committed I" after
//                                              each commit returns
//   db_test_tool read DB SECONDS               opens the database and looks up
//                                              best plans in a loop, a new handle
//                                              each round as compilers do
// Exit 0 with "errors 0" when every operation succeeded.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/db/db_test_util.h"

using namespace fusetune::db;

int Write(const std::string& path, int batches, int batch_size, int64_t first_serial) {
  auto db = MakeSqliteDatabase(path);
  if (!db.ok() || !testing::Populate(**db, 100).ok()) return 3;
  int errors = 0;
  for (int b = 0; b < batches; ++b) {
    std::vector<Record> batch;
    for (int i = 0; i < batch_size; ++i)
      batch.push_back(testing::MakeRecord(i % 100, first_serial + int64_t{b} * batch_size + i,
                                          1e-3 + i * 1e-6));
    auto ids = (*db)->CommitRecords(batch);
    if (!ids.ok()) {
      std::fprintf(stderr, "%s\n", ids.error().ToString().c_str());
      ++errors;
      continue;
    }
    std::printf("committed %d\n", b);
    std::fflush(stdout);
  }
  std::printf("errors %d\n", errors);
  return errors ? 1 : 0;
}

int Read(const std::string& path, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  int errors = 0, lookups = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {
    auto db = MakeSqliteDatabase(path, {.create = false, .read_only = true});
    if (!db.ok()) {
      std::fprintf(stderr, "%s\n", db.error().ToString().c_str());
      ++errors;
      continue;
    }
    for (int w = 0; w < 100; ++w, ++lookups)
      if (auto best = (*db)->Best(testing::WorkloadKeyFor(w), testing::kTarget); !best.ok()) {
        std::fprintf(stderr, "%s\n", best.error().ToString().c_str());
        ++errors;
      }
  }
  std::printf("lookups %d\nerrors %d\n", lookups, errors);
  return errors ? 1 : 0;
}

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if ((args.size() == 4 || args.size() == 5) && args[0] == "write")
    return Write(args[1], std::atoi(args[2].c_str()), std::atoi(args[3].c_str()),
                 args.size() == 5 ? std::atoll(args[4].c_str()) : 0);
  if (args.size() == 3 && args[0] == "read") return Read(args[1], std::atof(args[2].c_str()));
  std::fprintf(stderr, "usage: db_test_tool write DB BATCHES SIZE [FIRST] | read DB SECONDS\n");
  return 2;
}
