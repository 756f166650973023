// ForEachThread (declared in traffic.h): a kernel launch's shares run on the
// caller and on a crew of oneTBB workers, one crew per thread count.
//
// A crew member is a task in the crew's arena that serves launches and then
// lingers, polling for the next one, before it hands its thread back to
// oneTBB. A plan's kernels are launched back to back, microseconds apart; a
// worker that slept between them had to be woken for every launch, which
// took longer than the caller's grace period (below): the caller ran the
// worker's share itself, every kernel ran on one thread, and the worker's
// task, still queued, ran late for nothing. That happened at random for the
// first tens of milliseconds of a process: a fresh measurement worker's
// first plan read 6.1 ms instead of 0.6 (57 us per launch instead of 2).
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <tbb/task_arena.h>

#include "common/check.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

namespace {

using Clock = std::chrono::steady_clock;

// How long the caller spins for a worker to take its share before it runs
// the share itself: on a machine with more runnable threads than cores,
// waiting for a worker that cannot get a core would cost milliseconds.
constexpr auto kGrace = std::chrono::microseconds(50);
// How long a crew member polls for the next launch before it leaves (what
// OpenMP runtimes call the block time; theirs are 0.2 ms to 200 ms).
constexpr auto kLinger = std::chrono::milliseconds(1);
// Past this, a lingering member yields its core between polls. Spinning
// through the whole linger, on a core shared with another busy thread (a
// second process, the tuner's own XGBoost threads), it ran up a debt the
// scheduler repaid at the worst moment: preempted after it had claimed the
// next launch's share, it left the caller waiting about kLinger (1.07 ms
// launches of 10-us kernels in 8 of 13,233 of a tuning job's predicted measurements, 3 of 18
// groups with a busy loop beside them; issue 38's "predicted 0.005 ms,
// measured 1 ms").
constexpr auto kSpinBeforeYield = std::chrono::microseconds(20);

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Launch records in a fixed ring. A crew member may look at a launch after
// it returned (its share taken by the caller); it then finds the epoch gone
// and does nothing. Nothing it touches is freed, so nothing is leaked or
// used after free, whenever it runs.
struct LaunchSlot {
  std::atomic<bool> busy{false};
  uint64_t epoch = 0;              // written by the owning caller only
  std::atomic<uint64_t> state{0};  // epoch << 32 | next unclaimed share
  std::atomic<int> threads{0}, done{0};
  std::atomic<const std::function<void(int)>*> share{nullptr};
};
constexpr uint64_t kSlots = 256;
LaunchSlot launch_slots[kSlots];
std::atomic<uint64_t> next_launch_slot{0};

uint64_t AcquireSlot() {
  for (;;) {
    const uint64_t index = next_launch_slot.fetch_add(1) % kSlots;
    if (!launch_slots[index].busy.exchange(true, std::memory_order_acquire)) return index;
  }
}

// Runs unclaimed shares of launch `epoch` until none is left.
void RunUnclaimedShares(LaunchSlot& slot, uint64_t epoch) {
  uint64_t s = slot.state.load(std::memory_order_acquire);
  for (;;) {
    if ((s >> 32) != epoch) return;
    const uint64_t next = s & 0xffffffffu;
    if (next >= static_cast<uint64_t>(slot.threads.load(std::memory_order_relaxed))) return;
    if (!slot.state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
    (*slot.share.load(std::memory_order_relaxed))(static_cast<int>(next));
    slot.done.fetch_add(1, std::memory_order_release);
    s = slot.state.load(std::memory_order_acquire);
  }
}

// The newest launch as crew members see it: slot index << 32 | epoch.
uint64_t LaunchToken(uint64_t slot, uint64_t epoch) { return slot << 32 | epoch; }
void ServeLaunch(uint64_t token) {
  RunUnclaimedShares(launch_slots[token >> 32], token & 0xffffffffu);
}

// What the launches of one thread count share with their crew, by worker
// count. Static, never freed: a member may still linger as the process exits.
struct CrewState {
  std::atomic<uint64_t> latest{0};  // token of the newest launch
  std::atomic<int> members{0};      // tasks enqueued and not yet left
  std::atomic<int> caller_cpu{-1};  // where the newest launch's caller ran
};

// The CPUs this process may run on, read once by the first launching
// thread (before any member moved).
const cpu_set_t& ProcessCpus() {
  static const cpu_set_t cpus = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) CPU_ZERO(&set);
    return set;
  }();
  return cpus;
}

// A member woken on its caller's CPU (Linux places a woken thread beside
// its waker) cannot run while the caller spins: every launch then waited
// out kGrace and ran on one thread, for whole measurements at a time (a
// quarter of `measure`'s runs of a small model: 58 us per launch instead
// of 2). Such a member moves to the process's other CPUs, and stays there
// until a later member finds itself beside a caller again (moving back and
// forth with every member cost 20-90 us per timed run).
void LeaveCallersCpu(const CrewState& crew) {
  const int caller = crew.caller_cpu.load(std::memory_order_relaxed);
  if (caller < 0 || sched_getcpu() != caller) return;
  cpu_set_t others = ProcessCpus();
  CPU_CLR(caller, &others);
  if (CPU_COUNT(&others) > 0) sched_setaffinity(0, sizeof(others), &others);
}

constexpr int kMaxWorkers = 255;  // threads per kernel are at most 256
CrewState crew_states[kMaxWorkers + 1];

// A member: serves every launch it sees, leaves after kLinger without one.
// It leaves by decrementing `members` and looking once more: a launch that
// counted it while it was leaving is then served, since the launcher
// publishes before it counts (both sequentially consistent).
void ServeAndLinger(CrewState& crew) {
  LeaveCallersCpu(crew);
  uint64_t seen = 0;
  for (;;) {
    auto idle_since = Clock::now();
    for (;;) {
      const uint64_t latest = crew.latest.load(std::memory_order_acquire);
      if (latest != seen) {
        seen = latest;
        ServeLaunch(latest);
        idle_since = Clock::now();
      } else if (Clock::now() - idle_since > kLinger) {
        break;
      } else if (Clock::now() - idle_since > kSpinBeforeYield) {
        std::this_thread::yield();
      } else {
        _mm_pause();
      }
    }
    crew.members.fetch_sub(1);
    if (crew.latest.load() == seen) return;
    crew.members.fetch_add(1);
  }
}

// The crews' arenas, one per worker count, for the life of the process. An
// arena made and dropped per call costs more with every call (12 us growing
// past 300 us after 20,000 calls with oneTBB 2021.8).
tbb::task_arena& CrewArena(int workers) {
  FT_CHECK(workers >= 1 && workers <= kMaxWorkers, "threads per kernel out of range");
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  std::lock_guard<std::mutex> lock(mutex);
  auto& arena = arenas[workers];
  if (!arena) {
    arena = std::make_unique<tbb::task_arena>(workers, /*reserved_for_masters=*/0);
    arena->initialize();
  }
  return *arena;
}

}  // namespace

// The caller runs share 0 and the crew the others. The caller does not take
// another share at once, as parallel_for's caller did whenever a worker was
// slow to wake (both halves of a 20 us kernel on one thread in 44% of calls,
// halving its speed at random); only after its own share and kGrace.
double ForEachThread(int threads, const std::function<void(int)>& fn) {
  std::vector<double> busy(static_cast<size_t>(threads), 0.0);
  const std::function<void(int)> share = [&](int t) {
    const auto start = Clock::now();
    fn(t);
    busy[t] = SecondsBetween(start, Clock::now());
  };
  if (threads == 1) {
    share(0);
    return busy[0];
  }
  const uint64_t index = AcquireSlot();
  LaunchSlot& slot = launch_slots[index];
  const uint64_t epoch = ++slot.epoch & 0xffffffffu;
  slot.threads.store(threads, std::memory_order_relaxed);
  slot.share.store(&share, std::memory_order_relaxed);
  slot.done.store(0, std::memory_order_relaxed);
  slot.state.store(epoch << 32 | 1, std::memory_order_release);  // share 0 is the caller's
  tbb::task_arena& arena = CrewArena(threads - 1);
  CrewState& crew = crew_states[threads - 1];
  ProcessCpus();  // read before any member moves
  crew.caller_cpu.store(sched_getcpu(), std::memory_order_relaxed);
  crew.latest.store(LaunchToken(index, epoch));
  for (int m = crew.members.load(); m < threads - 1; ++m) {
    crew.members.fetch_add(1);
    arena.enqueue([&crew] { ServeAndLinger(crew); });
  }
  share(0);
  const auto grace_end = Clock::now() + kGrace;
  while (slot.done.load(std::memory_order_acquire) < threads - 1) {
    if (Clock::now() < grace_end) {
      _mm_pause();
      continue;
    }
    RunUnclaimedShares(slot, epoch);
    std::this_thread::yield();
  }
  slot.busy.store(false, std::memory_order_release);
  return *std::max_element(busy.begin(), busy.end());
}

}  // namespace fusetune::kernels
