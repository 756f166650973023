// The database across processes: a writer killed with SIGKILL at random
// points loses nothing whose commit returned and leaves a file that passes
// the integrity check; a reader and a writer at once never see 'database is
// locked'.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "db/jsonl.h"
#include "tests/db/db_test_util.h"

namespace fusetune::db {
namespace {

constexpr int kBatchSize = 50;

// A child running db_test_tool with its stdout on a pipe.
struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Child Spawn(const std::vector<std::string>& args) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// One file through all 50 kills: each writer recovers the previous one's
// write-ahead log, then is killed at a random point itself. The point is
// drawn in the writer's own progress, not in wall time, so that a slow
// machine or a sanitizer build kills as often between later commits as a
// fast one: after a random number of commits, at a random phase of the next
// commit's interval (measured from the commits before it).
TEST(Process, SigkillDuringCommitsLosesNothingCommitted) {
  const std::string path = testing::FreshDbPath("crash");
  std::mt19937 rng(42);
  std::set<int64_t> committed;  // serials of every record whose commit returned
  for (int round = 0; round < 50; ++round) {
    const int64_t first = int64_t{round} * 1000000;
    Child c = Spawn({FUSETUNE_DB_TEST_TOOL, "write", path, "1000000", std::to_string(kBatchSize),
                     std::to_string(first)});
    char line[128];
    int batches = 0;
    auto take = [&](const char* text) {
      int batch = -1;
      if (std::sscanf(text, "committed %d", &batch) != 1) return false;
      ++batches;
      for (int i = 0; i < kBatchSize; ++i)
        committed.insert(first + int64_t{batch} * kBatchSize + i);
      return true;
    };
    const int commits_before_kill = std::uniform_int_distribution<int>(2, 12)(rng);
    const double phase = std::uniform_real_distribution<double>(0, 1)(rng);
    ASSERT_TRUE(std::fgets(line, sizeof line, c.out)) << "round " << round << ": no commit";
    if (!take(line)) {
      kill(c.pid, SIGKILL);
      FAIL() << "round " << round << ": not a commit line: " << line;
    }
    const auto started = std::chrono::steady_clock::now();
    while (batches < commits_before_kill && std::fgets(line, sizeof line, c.out)) take(line);
    if (batches < commits_before_kill) kill(c.pid, SIGKILL);  // leave no writer behind
    ASSERT_EQ(batches, commits_before_kill) << "round " << round << ": the writer ended early";
    const auto interval = (std::chrono::steady_clock::now() - started) / (batches - 1);
    std::thread killer([&] {
      std::this_thread::sleep_for(
          std::chrono::duration_cast<std::chrono::microseconds>(interval * phase));
      kill(c.pid, SIGKILL);
    });
    while (std::fgets(line, sizeof line, c.out)) take(line);
    killer.join();
    ASSERT_TRUE(WIFSIGNALED(Wait(c.pid))) << "round " << round << ": the writer ended by itself";
    fclose(c.out);

    auto db = MakeSqliteDatabase(path, {.create = false, .integrity_check = true});
    ASSERT_TRUE(db.ok()) << "round " << round << ": " << db.error().ToString();
    std::set<int64_t> present;
    ASSERT_TRUE((*db)
                    ->ForEachRecord({},
                                    [&](const Record& r) {
                                      present.insert(
                                          static_cast<int64_t>(r.created_at - 1.7e9 + 0.5));
                                      return true;
                                    })
                    .ok());
    for (int64_t serial : committed)
      ASSERT_TRUE(present.count(serial)) << "round " << round << ": record " << serial << " lost";
  }
  EXPECT_GE(committed.size(), 50u * 2 * kBatchSize);  // at least two batches a round
}

int64_t CountRecords(Database& db) {
  int64_t n = 0;
  EXPECT_TRUE(db.ForEachRecord({}, [&](const Record&) { return ++n > 0; }).ok());
  return n;
}

// A cluster shard killed mid-write (issue 41): its database, write-ahead log
// and all, merged read only into the job's database gives exactly the
// records whose commits returned, once, however often it is merged.
TEST(Process, MergeOfAWriterKilledMidWriteTakesItsCommittedRecords) {
  const std::string shard = testing::FreshDbPath("killed_shard");
  const std::string team = testing::FreshDbPath("team");
  Child c = Spawn({FUSETUNE_DB_TEST_TOOL, "write", shard, "1000000", std::to_string(kBatchSize),
                   "0"});
  char line[128];
  int batches = 0;
  while (batches < 5 && std::fgets(line, sizeof line, c.out)) batches += line[0] == 'c';
  kill(c.pid, SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(Wait(c.pid)));
  fclose(c.out);
  ASSERT_EQ(batches, 5);
  auto from = MakeSqliteDatabase(shard, {.create = false, .read_only = true});
  ASSERT_TRUE(from.ok()) << from.error().ToString();
  const int64_t committed = CountRecords(**from);
  EXPECT_GE(committed, 5 * kBatchSize);
  auto into = MakeSqliteDatabase(team);
  ASSERT_TRUE(into.ok());
  for (int merge = 0; merge < 2; ++merge) {
    auto merged = MergeDatabase(**into, **from);
    ASSERT_TRUE(merged.ok()) << merged.error().ToString();
    EXPECT_EQ(merged->records_read, committed);
    EXPECT_EQ(merged->records_added, merge == 0 ? committed : 0);
  }
  EXPECT_EQ(CountRecords(**into), committed);
  EXPECT_TRUE((*into)->CheckIntegrity().ok());
}

TEST(Process, ReaderAndWriterTogetherNeverFailLocked) {
  const std::string path = testing::FreshDbPath("concurrent");
  Child writer = Spawn({FUSETUNE_DB_TEST_TOOL, "write", path, "400", "200"});
  char line[128];
  ASSERT_TRUE(std::fgets(line, sizeof line, writer.out));  // "committed 0": the schema exists
  Child reader = Spawn({FUSETUNE_DB_TEST_TOOL, "read", path, "2.0"});
  std::string reader_out, writer_out = line;
  while (std::fgets(line, sizeof line, reader.out)) reader_out += line;
  while (std::fgets(line, sizeof line, writer.out)) writer_out += line;
  EXPECT_EQ(WEXITSTATUS(Wait(reader.pid)), 0) << reader_out;
  EXPECT_EQ(WEXITSTATUS(Wait(writer.pid)), 0);
  EXPECT_NE(reader_out.find("errors 0"), std::string::npos) << reader_out;
  EXPECT_NE(writer_out.find("errors 0"), std::string::npos);
  EXPECT_NE(writer_out.find("committed 399"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::db
