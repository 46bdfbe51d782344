// tests/cpp/test_thread_pool.cpp — parallel::parallel_for and the persistent pool.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#if defined(__unix__)
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "dynexpr/parallel/thread_pool.hpp"

namespace {

using dynexpr::index_t;
namespace par = dynexpr::parallel;

constexpr double force_pool = std::numeric_limits<double>::infinity();  // above any threshold

struct chunk {
  index_t begin, end;
  std::thread::id thread;
};

// Runs parallel_for and returns its chunks in begin order, checking each index ran once.
std::vector<chunk> run_and_check(index_t n, index_t grain, index_t align, double work) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::vector<chunk> chunks;
  std::mutex m;
  par::parallel_for(n, grain, align, work, [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    std::lock_guard<std::mutex> lock(m);
    chunks.push_back({b, e, std::this_thread::get_id()});
  });
  for (index_t i = 0; i < n; ++i) {
    if (hits[static_cast<size_t>(i)].load() != 1) {
      FAIL("index " << i << " visited " << hits[static_cast<size_t>(i)].load() << " times (n=" << n
                    << " grain=" << grain << " align=" << align << ")");
    }
  }
  std::sort(chunks.begin(), chunks.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
  return chunks;
}

index_t round_up(index_t a, index_t b) { return (a + b - 1) / b * b; }

// Chunks slow enough that sleeping workers wake and take some of them.
void slow_chunk() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }

struct worker_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

TEST_CASE("parse_num_threads: integers >= 1, anything else falls back") {
  using par::detail::parse_num_threads;
  CHECK(parse_num_threads("3", 7) == 3);
  CHECK(parse_num_threads(" 12 ", 7) == 12);
  CHECK(parse_num_threads("+2", 7) == 2);
  CHECK(parse_num_threads("1", 7) == 1);
  CHECK(parse_num_threads("999999999999", 7) == par::max_threads);
  for (const char* bad : {"0", "-1", "abc", "", " ", "3x", "2.5", "0x4", "99999999999999999999"})
    CHECK_MESSAGE(parse_num_threads(bad, 7) == 7, bad);
  CHECK(parse_num_threads(nullptr, 7) == 7);

  using par::detail::parse_threshold;
  CHECK(parse_threshold("0", 5) == 0);
  CHECK(parse_threshold("100000", 5) == 100000);
  CHECK(parse_threshold("-1", 5) == 5);
  CHECK(parse_threshold("1e6", 5) == 5);
  CHECK(parse_threshold(nullptr, 5) == 5);
  CHECK(par::inline_threshold() >= 0);
}

TEST_CASE("every index visited once; boundaries aligned; chunks respect grain") {
  for (int threads : {1, 2, 4, 7}) {
    par::set_num_threads(threads);
    CHECK(par::num_threads() == threads);
    for (index_t n : {0, 1, 2, 3, 7, 15, 16, 17, 100, 1000, 1023, 4097, 100003})
      for (index_t grain : {-5, 0, 1, 3, 64, 1000, 5000})
        for (index_t align : {1, 4, 7, 16, 64}) {
          CAPTURE(threads);
          CAPTURE(n);
          CAPTURE(grain);
          CAPTURE(align);
          const auto chunks = run_and_check(n, grain, align, force_pool);
          if (n == 0) {
            CHECK(chunks.empty());
            continue;
          }
          REQUIRE(!chunks.empty());
          CHECK(chunks.front().begin == 0);
          CHECK(chunks.back().end == n);
          const index_t min_size = round_up(std::max<index_t>(grain, 1), align);
          for (size_t i = 0; i < chunks.size(); ++i) {
            CHECK(chunks[i].begin % align == 0);
            CHECK((chunks[i].end == n || chunks[i].end % align == 0));
            if (i + 1 < chunks.size()) {
              CHECK(chunks[i].end == chunks[i + 1].begin);
              CHECK(chunks[i].end - chunks[i].begin >= min_size);
            }
          }
          // About 4 chunks per thread, never more than the items allow.
          CHECK(static_cast<index_t>(chunks.size()) <= std::max(1, 4 * threads));
        }
  }
}

TEST_CASE("below the threshold, one thread, or one chunk: fn(0, n) inline on the caller") {
  par::set_num_threads(4);
  const auto caller = std::this_thread::get_id();
  for (double work : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                      static_cast<double>(par::inline_threshold()) - 1}) {
    if (par::inline_threshold() == 0 && work == -1.0) continue;
    const auto chunks = run_and_check(100000, 1, 16, work);
    REQUIRE(chunks.size() == 1);
    CHECK(chunks[0].begin == 0);
    CHECK(chunks[0].end == 100000);
    CHECK(chunks[0].thread == caller);
  }
  // grain as large as n leaves one chunk: no hand-off either.
  const auto one = run_and_check(1000, 1000, 1, force_pool);
  REQUIRE(one.size() == 1);
  CHECK(one[0].thread == caller);

  par::set_num_threads(1);
  const auto single = run_and_check(100000, 1, 1, force_pool);
  REQUIRE(single.size() == 1);
  CHECK(single[0].thread == caller);
  CHECK_FALSE(par::in_worker());
}

TEST_CASE("a thread's schedule caps the threads and sets the chunks per thread") {
  par::set_num_threads(4);
  par::schedule& s = par::thread_schedule();
  const auto caller = std::this_thread::get_id();
  s = {1, 0};  // inline on the caller, however large the work
  auto chunks = run_and_check(100000, 1, 1, force_pool);
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0].thread == caller);
  s = {2, 1};  // planned for 2 threads, one chunk each
  chunks = run_and_check(100000, 1, 1, force_pool);
  CHECK(chunks.size() == 2);
  s = {0, 16};  // the pool's 4 threads, 16 chunks each
  chunks = run_and_check(100000, 1, 1, force_pool);
  CHECK(chunks.size() == 64);
  // Another thread's schedule is its own: the default (4 per thread) there.
  std::size_t other = 0;
  std::thread([&] { other = run_and_check(100000, 1, 1, force_pool).size(); }).join();
  CHECK(other == 16);
  s = {};
  CHECK(run_and_check(100000, 1, 1, force_pool).size() == 16);
  CHECK(par::detail::plan_chunks(1000, 1, 1, 2, 3).count == 6);
}

TEST_CASE("the pool uses its workers, and never more threads than num_threads") {
  par::set_num_threads(4);
  std::set<std::thread::id> seen;
  std::atomic<int> on_worker{0};
  for (int call = 0; call < 20; ++call) {
    std::mutex m;
    par::parallel_for(16, 1, 1, force_pool, [&](index_t, index_t) {
      if (par::in_worker()) on_worker.fetch_add(1);
      slow_chunk();
      std::lock_guard<std::mutex> lock(m);
      seen.insert(std::this_thread::get_id());
    });
  }
  CHECK(on_worker.load() > 0);
  CHECK(seen.size() > 1);
  // Persistent: 20 calls, still only the caller and the same 3 workers.
  CHECK(seen.size() <= 4);
  CHECK_FALSE(par::in_worker());
}

#if defined(__linux__)
TEST_CASE("a worker on the caller's core moves off it at the next job") {
  // Note [off the caller's core]: put a worker on the caller's core, as the scheduler did
  // after another library's spin, and check that the next job finds it on another core.
  cpu_set_t full;
  REQUIRE(sched_getaffinity(0, sizeof full, &full) == 0);
  if (CPU_COUNT(&full) < 2) {
    MESSAGE("one allowed cpu: nothing to move to (needs 2)");
    CHECK(CPU_COUNT(&full) == 1);
    return;
  }
  par::set_num_threads(2);
  const int home = sched_getcpu();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(home, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);  // the caller stays on `home`
  // Every other core busy, as with another library's spinning pool: the scheduler's own
  // balancing then has no idle core to pull the worker to.
  std::atomic<bool> busy{true};
  std::vector<std::thread> spinners;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (cpu == home || !CPU_ISSET(cpu, &full)) continue;
    spinners.emplace_back([&busy, cpu] {
      cpu_set_t mine;
      CPU_ZERO(&mine);
      CPU_SET(cpu, &mine);
      sched_setaffinity(0, sizeof mine, &mine);
      while (busy.load(std::memory_order_relaxed)) par::detail::cpu_relax();
    });
  }
  std::atomic<int> placed{-2}, moved{-2};
  par::parallel_for(8, 1, 1, force_pool, [&](index_t, index_t) {
    if (par::in_worker() && placed.load() == -2) {
      sched_setaffinity(0, sizeof one, &one);  // onto the caller's core ...
      sched_setaffinity(0, sizeof full, &full);  // ... and free again, staying there
      placed.store(sched_getcpu());
    }
    slow_chunk();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // past the 1 ms rate limit
  par::parallel_for(8, 1, 1, force_pool, [&](index_t, index_t) {
    if (par::in_worker() && moved.load() == -2) moved.store(sched_getcpu());
    slow_chunk();
  });
  busy.store(false);
  for (auto& t : spinners) t.join();
  REQUIRE(sched_setaffinity(0, sizeof full, &full) == 0);
  REQUIRE(placed.load() == home);  // the worker took a chunk of the first job, on `home`
  REQUIRE(moved.load() >= 0);      // and one of the second
  CHECK(moved.load() != home);
}

TEST_CASE("pool workers are named dynexpr-pool (top -H, perf, /proc)") {
  par::set_num_threads(3);
  std::atomic<int> named{0};
  par::parallel_for(12, 1, 1, force_pool, [&](index_t, index_t) {
    char name[16] = {};
    if (par::in_worker() && pthread_getname_np(pthread_self(), name, sizeof name) == 0 &&
        std::string(name) == "dynexpr-pool")
      named.fetch_add(1);
    slow_chunk();
  });
  CHECK(named.load() > 0);  // slow chunks: a worker takes some of them
  char caller[16] = {};
  REQUIRE(pthread_getname_np(pthread_self(), caller, sizeof caller) == 0);
  CHECK(std::string(caller) != "dynexpr-pool");  // the caller's own name is left alone
}
#endif

TEST_CASE("with every thread on time, each runs its own contiguous part, call after call") {
  // Note [pool protocol]: home ranges keep a thread on the same data (in its own cache) from
  // one call to the next. Chunks of 2 ms leave the worker ample time to wake, so the caller
  // runs the first half and the worker the second; a machine too busy to schedule the
  // worker within 2 ms is allowed for by asking for most calls, not all. The shared-counter
  // protocol this replaced interleaved the halves (caller 0, 2, ...; worker 1, 3, ...).
  par::set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  int split_in_halves = 0;
  constexpr int calls = 10;
  for (int call = 0; call < calls; ++call) {
    std::vector<chunk> chunks;
    std::mutex m;
    par::parallel_for(8, 1, 1, force_pool, [&](index_t b, index_t e) {
      slow_chunk();
      std::lock_guard<std::mutex> lock(m);
      chunks.push_back({b, e, std::this_thread::get_id()});
    });
    std::sort(chunks.begin(), chunks.end(), [](auto& x, auto& y) { return x.begin < y.begin; });
    REQUIRE(chunks.size() == 8);
    bool halves = chunks[4].thread != caller;
    for (std::size_t i = 0; i < chunks.size(); ++i)
      halves = halves && (i < 4 ? chunks[i].thread == caller : chunks[i].thread == chunks[4].thread);
    split_in_halves += halves;
  }
  CHECK(split_in_halves >= calls / 2);
}

TEST_CASE("spin_time is settable, clamped, and any spin time gives correct results") {
  const auto keep = par::spin_time();
  par::set_num_threads(2);
  for (long long us : {0LL, 30LL, 5000LL}) {
    par::set_spin_time(std::chrono::microseconds{us});
    CHECK(par::spin_time().count() == us);
    for (int call = 0; call < 3; ++call) {
      // Sleep past the spin so that the workers are parked and must be woken.
      std::this_thread::sleep_for(std::chrono::microseconds{us + 200});
      CHECK(run_and_check(4096, 1, 16, force_pool).size() > 1);
    }
  }
  par::set_spin_time(std::chrono::microseconds{-7});
  CHECK(par::spin_time().count() == 0);
  par::set_spin_time(std::chrono::hours{24});
  CHECK(par::spin_time() == par::max_spin_time);
  par::set_spin_time(keep);
}

TEST_CASE("an exception from any chunk is rethrown on the caller; the pool survives") {
  par::set_num_threads(4);
  SUBCASE("thrown on a worker") {
    bool threw_on_worker = false;
    for (int attempt = 0; attempt < 20 && !threw_on_worker; ++attempt) {
      std::atomic<bool> worker_threw{false};
      CHECK_THROWS_WITH_AS(par::parallel_for(64, 1, 1, force_pool,
                                             [&](index_t, index_t) {
                                               slow_chunk();
                                               if (par::in_worker()) {
                                                 worker_threw = true;
                                                 throw worker_error("from a worker");
                                               }
                                               // Keep the caller busy so workers get chunks.
                                               slow_chunk();
                                             }),
                           "from a worker", worker_error);
      threw_on_worker = worker_threw.load();
    }
    CHECK(threw_on_worker);
  }
  SUBCASE("thrown by one chunk, whoever runs it") {
    CHECK_THROWS_AS(par::parallel_for(1000, 1, 1, force_pool,
                                      [](index_t b, index_t e) {
                                        if (b <= 500 && 500 < e) throw worker_error("chunk 500");
                                      }),
                    worker_error);
  }
  SUBCASE("every chunk throws: the first one wins, no terminate") {
    CHECK_THROWS_AS(par::parallel_for(1000, 1, 1, force_pool, [](index_t, index_t) { throw 42; }),
                    int);
  }
  // Still usable, and still pooled.
  for (int i = 0; i < 50; ++i) run_and_check(10007, 1, 8, force_pool);
}

TEST_CASE("nested parallel_for runs inline and is correct") {
  par::set_num_threads(4);
  constexpr index_t outer = 64, inner = 1000;
  std::vector<std::atomic<int>> hits(outer * inner);
  std::atomic<int> inner_calls{0}, inner_whole{0};
  par::parallel_for(outer, 1, 1, force_pool, [&](index_t b, index_t e) {
    for (index_t o = b; o < e; ++o)
      par::parallel_for(inner, 1, 1, force_pool, [&](index_t ib, index_t ie) {
        inner_calls.fetch_add(1);
        if (ib == 0 && ie == inner) inner_whole.fetch_add(1);
        for (index_t i = ib; i < ie; ++i) hits[static_cast<size_t>(o * inner + i)].fetch_add(1);
      });
  });
  CHECK(inner_calls.load() == outer);
  CHECK(inner_whole.load() == outer);
  CHECK(std::all_of(hits.begin(), hits.end(), [](auto& h) { return h.load() == 1; }));
  // Resizing from inside a body would deadlock on the pool it runs in: it is refused.
  CHECK_THROWS_AS(
      par::parallel_for(8, 1, 1, force_pool, [](index_t, index_t) { par::set_num_threads(2); }),
      dynexpr::value_error);
}

TEST_CASE("concurrent callers from 4 threads all get correct results") {
  par::set_num_threads(4);
  std::atomic<int> failures{0};
  std::vector<std::thread> users;
  for (int u = 0; u < 4; ++u)
    users.emplace_back([u, &failures] {
      const index_t n = 20000 + 37 * u;
      std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
      for (index_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i + u);
      for (int rep = 0; rep < 200; ++rep) {
        std::fill(y.begin(), y.end(), -1.0f);
        par::parallel_for(n, 1, 16, force_pool, [&](index_t b, index_t e) {
          for (index_t i = b; i < e; ++i)
            y[static_cast<size_t>(i)] = x[static_cast<size_t>(i)] * 2.0f + 1.0f;
        });
        for (index_t i = 0; i < n; ++i)
          if (y[static_cast<size_t>(i)] != x[static_cast<size_t>(i)] * 2.0f + 1.0f) {
            failures.fetch_add(1);
            break;
          }
      }
    });
  for (auto& t : users) t.join();
  CHECK(failures.load() == 0);
}

TEST_CASE_TEMPLATE("1, 2 and 4 threads give identical results", T, float, double, std::int32_t) {
  constexpr index_t n = 100003;
  std::vector<T> x(n);
  for (index_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<T>(i % 977) / T(3);
  std::vector<std::vector<T>> results;
  for (int threads : {1, 2, 4}) {
    par::set_num_threads(threads);
    CHECK(par::num_threads() == threads);
    std::vector<T> y(n, T(-1));
    par::parallel_for(n, 64, 8, force_pool, [&](index_t b, index_t e) {
      for (index_t i = b; i < e; ++i)
        y[static_cast<size_t>(i)] = x[static_cast<size_t>(i)] * T(2) + T(1);
    });
    results.push_back(std::move(y));
  }
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}

namespace {
std::atomic<index_t> function_items{0};
void count_items(index_t b, index_t e) { function_items.fetch_add(e - b); }
}  // namespace

TEST_CASE("a plain function works as the body") {
  par::set_num_threads(4);
  function_items = 0;
  par::parallel_for(100000, 1, 1, force_pool, count_items);
  par::parallel_for(100000, 1, 1, force_pool, &count_items);
  CHECK(function_items.load() == 200000);
}

TEST_CASE("chunk arithmetic does not overflow near INT64_MAX") {
  par::set_num_threads(4);
  constexpr index_t n = std::numeric_limits<index_t>::max();
  std::vector<std::pair<index_t, index_t>> chunks;
  std::mutex m;
  par::parallel_for(n, 1, 64, force_pool, [&](index_t b, index_t e) {
    std::lock_guard<std::mutex> lock(m);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  REQUIRE(chunks.size() > 1);
  CHECK(chunks.front().first == 0);
  CHECK(chunks.back().second == n);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    CHECK(chunks[i].second == chunks[i + 1].first);
    CHECK(chunks[i].second % 64 == 0);
  }
  // A grain beyond n leaves one chunk (inline), without computing grain rounded up to align.
  const auto plan = par::detail::plan_chunks(n, n, 1000, 4);
  CHECK(plan.count == 1);
  CHECK(plan.chunk == n);
}

TEST_CASE("bad arguments name the mistake") {
  CHECK_THROWS_AS(par::set_num_threads(0), dynexpr::value_error);
  CHECK_THROWS_AS(par::set_num_threads(-1), dynexpr::value_error);
  CHECK_THROWS_AS(par::set_num_threads(par::max_threads + 1), dynexpr::value_error);
  CHECK_THROWS_AS(par::parallel_for(-1, 1, 1, 0.0, [](index_t, index_t) {}), dynexpr::value_error);
  CHECK_THROWS_AS(par::parallel_for(10, 1, 0, 0.0, [](index_t, index_t) {}), dynexpr::value_error);
  bool called = false;
  par::parallel_for(0, 1, 1, force_pool, [&](index_t, index_t) { called = true; });
  CHECK_FALSE(called);
}

// fork() with live threads is outside what ThreadSanitizer supports.
#if defined(__unix__) && !defined(__SANITIZE_THREAD__)
namespace {
// Runs `body` in a forked child (killed after 20 s so a hang fails instead of blocking the
// suite); returns the child's exit status, or -signal if it died of a signal.
template <class Body>
int in_child(Body body) {
  std::fflush(nullptr);  // or the child flushes the parent's buffered output a second time
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

bool pooled_sum_ok() {
  std::vector<std::atomic<int>> hits(100000);
  par::parallel_for(100000, 1, 1, force_pool, [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  return std::all_of(hits.begin(), hits.end(), [](auto& h) { return h.load() == 1; });
}
}  // namespace

TEST_CASE("process exit joins the workers without hanging or crashing") {
  par::set_num_threads(4);
  // exit() right after a job (workers spinning) and after they fell asleep; both must run
  // the pool's static destructor and return the status.
  CHECK(in_child([] { std::exit(pooled_sum_ok() ? 7 : 1); }) == 7);
  CHECK(in_child([] {
          const bool ok = pooled_sum_ok();
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          std::exit(ok ? 7 : 1);
        }) == 7);
}

TEST_CASE("a forked child gets a working pool (Note [fork])") {
  par::set_num_threads(4);
  REQUIRE(pooled_sum_ok());  // the parent's workers exist
  CHECK(in_child([] {
          bool ok = true;
          for (int i = 0; i < 20; ++i) ok = ok && pooled_sum_ok();
          std::exit(ok ? 0 : 1);
        }) == 0);
  CHECK(pooled_sum_ok());  // and the parent's pool is untouched
}
#endif
