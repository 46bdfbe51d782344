// dynexpr/parallel/thread_pool.hpp — the persistent thread pool behind every evaluation loop.
//
// One process-wide pool of (num_threads() - 1) workers plus the calling thread. Workers are
// created lazily on the first pooled call (and again after a resize) and live until exit;
// parallel_for never creates a thread and never allocates. See Note [pool protocol].
#pragma once

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define DYNEXPR_HAS_PTHREAD_ATFORK 1
#endif
#if defined(__linux__)
#include <sched.h>  // sched_getcpu, sched_{get,set}affinity: Note [off the caller's core]
#endif

#include "dynexpr/core/config.hpp"
#include "dynexpr/core/error.hpp"

#ifndef DYNEXPR_DEFAULT_SPIN_US
#define DYNEXPR_DEFAULT_SPIN_US 10000
#endif

// Note [runtime library]
// The pool's non-template functions are defined inline below, so a C++ program that
// includes the library needs nothing else. Generated units (kernels/prelude.hpp) define
// DYNEXPR_RUNTIME_EXTERN instead: they see only declarations and link against
// libdynexpr_rt.so (kernels/runtime.cpp, built once per toolchain), which compiles the
// same definitions once with DYNEXPR_RUNTIME_DEFINE. Every unit of a process then shares
// one pool, and no unit spends compile time on code that never changes (~0.5 s a unit).
// DYNEXPR_RT_FN is defined in dynexpr/core/config.hpp (the shape helpers use it too).

namespace dynexpr::parallel {

/// Threads a pooled parallel_for uses, the calling thread included. Read once from the
/// environment variable DYNEXPR_NUM_THREADS (an integer >= 1) when the pool is first used,
/// else std::thread::hardware_concurrency(); set_num_threads changes it.
int num_threads();

/// Resizes the pool to `n` threads (1 <= n <= max_threads), the caller included; 1 makes
/// every parallel_for inline. Waits for a pooled call running on another thread to finish.
/// Throws value_error for a bad `n` or when called from inside a parallel_for body.
void set_num_threads(int n);

/// Estimated work units (elements x per-element cost) below which parallel_for runs inline:
/// default_inline_threshold, or DYNEXPR_PARALLEL_THRESHOLD (an integer >= 0) if set.
index_t inline_threshold();

/// Calls fn(begin, end) on disjoint chunks that cover [0, n). Every chunk boundary except n
/// is a multiple of `align` (>= 1); every chunk but the last has at least `grain` items
/// (rounded up to align; grain <= 0 means no minimum). `work` estimates the total work units.
/// Runs fn(0, n) inline on the caller when work < inline_threshold(), the pool has one
/// thread, the call is nested inside another parallel_for body, or another thread is using
/// the pool. The first exception thrown by any chunk is rethrown here after all chunks have
/// finished or been skipped. n == 0 calls nothing. The floating-point exception flags the
/// chunks raise, on whichever thread, are raised on the caller (Note [flags of pool threads]).
template <class F>
void parallel_for(index_t n, index_t grain, index_t align, double work, F&& fn);

// Note [flags of pool threads]
// Floating-point exception flags are per thread. parallel_for leaves on the calling
// thread the flags its chunks raised on any thread, as if it had run them all inline:
// each worker reads (and clears) its flags after each chunk and ORs them into the job,
// and the caller raises their union before returning. Callers that check the flags
// after a computation (the Python bridge reports them as NumPy's error state says: Note
// [floating-point errors] in bridge/native/kernel.c) then see every thread's. The cost is a
// flag read per chunk.
#if defined(FE_DIVBYZERO) && defined(FE_OVERFLOW) && defined(FE_UNDERFLOW) && defined(FE_INVALID)
inline constexpr int fp_flags = FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID;
#else
inline constexpr int fp_flags = 0;
#endif

/// True on a pool worker thread (false on the thread that called parallel_for).
bool in_worker();

/// How long a waiting pool thread spins before it sleeps (Note [spin then block]): read once
/// from DYNEXPR_SPIN_US (an integer number of microseconds >= 0) when first needed, else
/// default_spin_time; set_spin_time changes it for every wait that starts afterwards.
std::chrono::microseconds spin_time();
/// Sets spin_time(); negative values count as 0 (sleep at once), values above max_spin_time
/// are capped there.
void set_spin_time(std::chrono::microseconds t);

/// A schedule for the parallel_for calls one thread makes, chosen by timing
/// (mode="max-autotune" in bridge/dynexpr/autotune.py). `threads` caps the threads a pooled
/// call plans its chunks for (1: inline; 0: the pool's size); `chunks_per_thread` sets how
/// many chunks each planned thread gets (0: the default, 4).
struct schedule {
  int threads = 0;
  int chunks_per_thread = 0;
};

/// This thread's schedule (one per thread, shared by every unit of the process).
schedule& thread_schedule();

inline constexpr int max_threads = 4096;

// Measured with bench/pool_handoff.cpp (g++ 12 -O2 -march=native; 2-vCPU AMD EPYC Zen 3 KVM
// guest, 2 threads, 4 runs under `chrt -f 1` because the machine was shared):
//   empty body: inline 2-4 ns, pooled 50-440 ns (the caller takes most chunks itself);
//   round trip with every worker taking a chunk: 0.4-1.3 us while the workers spin,
//   16-26 us (median) after 1 ms idle, when they sleep and the futex wake crosses the VM;
//   y[i] = x[i]*2+1 on float (mul + add = 2 units/element): pooled beats inline from
//   65536-92672 elements (131k-185k units) with the data in cache and 11584-16384 elements
//   (23k-33k units) from DRAM. The default is the geometric middle: at 65536 units (32768
//   elements here) the pool loses ~1.5 us in cache and gains ~5 us (1.3-1.4x) from DRAM.
//   More cores lower both crossovers: the same hand-off buys a larger share of the work.
inline constexpr index_t default_inline_threshold = 65536;

/// spin_time()'s default and its cap (Note [spin then block]).
inline constexpr std::chrono::microseconds default_spin_time{DYNEXPR_DEFAULT_SPIN_US};
inline constexpr std::chrono::microseconds max_spin_time{10'000'000};

namespace detail {

/// DYNEXPR_NUM_THREADS's value as a thread count: an integer >= 1 (capped at max_threads),
/// surrounding blanks allowed; anything else (null, "", "0", "-1", "abc", "3x") -> fallback.
int parse_num_threads(const char* text, int fallback) noexcept;
/// DYNEXPR_PARALLEL_THRESHOLD's value: an integer >= 0; anything else -> fallback.
index_t parse_threshold(const char* text, index_t fallback) noexcept;

/// `count` chunks of `chunk` items (the last one shorter) covering [0, n); count 1 = inline.
struct chunk_plan {
  index_t chunk, count;
};
chunk_plan plan_chunks(index_t n, index_t grain, index_t align, int threads,
                       int per_thread = 4) noexcept;

/// The type-erased body: no std::function, so a call allocates nothing.
using chunk_fn = void (*)(void* ctx, index_t begin, index_t end);

template <class Fn>
void call_chunk(void* ctx, index_t begin, index_t end) {
  (*static_cast<Fn*>(ctx))(begin, end);
}

// Set for life on each worker.
inline thread_local bool t_worker = false;
// True while this thread runs chunks of a pooled call (caller or worker): a parallel_for from
// inside a body must run inline, both because the pool is busy with the outer call and
// because try_lock on a mutex this thread already holds is undefined.
inline thread_local bool t_busy = false;
// Set when the pool's static destructor has run: a parallel_for from a later static
// destructor then runs inline instead of touching a dead object. Trivially destructible.
inline std::atomic<bool> pool_gone{false};

// Note [spin then block]
// A waiting thread (a worker between jobs, the caller waiting for the last chunk) spins with a
// pause instruction for spin_time, then sleeps on a condition variable. A sleep/wake pair
// costs a futex call on each side plus the scheduler's wake-up latency (µs to tens of µs);
// evaluation loops come back to back (one per fused expression), so the next job usually
// lands inside the spin window and costs only a few cache-line transfers, while idle workers
// stop burning cores soon after a burst. The spin yields every ~2 µs: with more runnable
// threads than cores the thread we wait for may be queued behind us on this very core, and a
// pure spin held it off for the whole window (measured on a loaded 2-core machine: small
// pooled calls the worker joined took ~37 µs instead of < 1 µs).
// How long to spin is the user's trade, as OpenMP's block time is: a kernel that comes
// after a pause longer than the spin finds its workers asleep and, on a VM whose idle
// vCPU the hypervisor has halted, they may wake only after the caller has taken most
// chunks itself (bench/pool_handoff.cpp measures a kernel after a 10 ms pause against
// back to back). A longer spin keeps them awake across Python's work between kernels at
// the price of a core that polls (and yields) while nothing runs. DYNEXPR_SPIN_US or
// dynexpr.config.spin_us set it. The default, 10 ms, is of the order of OpenMP's, which the
// peers' threads use: libgomp's 300k pause loops kept its worker busy ~4.3 ms after a
// parallel region on this 2-core AVX-512 VM (numba's omp layer, CPU time from schedstat);
// Intel's KMP_BLOCKTIME is 200 ms. Measured on that VM: with 30 us, a Python caller's few
// tens of microseconds between two kernels put the workers to sleep and a ~1 ms row kernel
// ran at one thread's speed (run_peers.py, 1M float32: softmax_rows 1.32 ms -> 0.78 ms with
// 2 ms); with 2 or 5 ms, when another library's 5 ms sample and a 10 ms pause came between
// two samples, 30-40% of dynexpr's samples (clip_scale, 1M float32) ran at one thread's
// speed for the whole sample, and none with 10 ms; gelu 1M after a 5 ms pause took 1.76x
// its back-to-back time with 2 ms, 1.15x with 10 ms (bench/python/pause_bench.py). A pause
// longer than the spin still pays the wake-up.

inline void cpu_relax() noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_ia32_pause();  // frees the core's resources for the sibling hyperthread
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("yield" ::: "memory");
#endif
}

/// Spin-then-block wait on a condition another thread makes true (Note [spin then block]).
class waiter {
 public:
  /// spin false: straight to sleep (a worker that must leave the caller's core free).
  template <class Ready>
  void wait(Ready ready, bool spin = true);
  /// Call after making the condition true with a seq_cst write.
  void notify();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

// Note [pool protocol]
// The caller publishes the job (n_, chunk_, count_, fn_, ctx_ and each home's range), resets
// done_, then release-stores every home's `remaining` and bumps generation_ to wake the
// workers. The chunks are split into one contiguous home range per thread (caller: home 0,
// worker i: home i + 1); each thread claims chunks of its own home first, in order, then
// steals from the other homes. So when every thread is on time, thread t runs the same part
// of the array on every call and finds it in its own L2 (measured: y = affine(x) over 64K
// doubles, 1 MB of traffic, ~12 -> ~8 us on 2 cores), and a late or slow thread still leaves
// its chunks to the others. A claim is homes_[k].remaining.fetch_sub(1): a result r > 0 owns
// chunk first + count - r of home k. A late worker, even one still looping over an older job,
// can only decrement a counter: r > 0 is a valid claim of the current job (its acquire pairs
// with the caller's release, which comes after every field was written), r <= 0 means that
// home is empty (the next job overwrites the negative value); it reads the job's fields only
// after a valid claim. A claim pins the job: the caller cannot return before done_ counts
// that chunk, so the fields and *ctx_ stay valid with no per-worker acknowledgement, and the
// caller never waits for a worker slow to wake: it waits for done_ == count only. homes_ is
// allocated when the workers start (never while one runs) with one home per thread.
class thread_pool {
 public:
  static thread_pool& instance();
  ~thread_pool();

  int size() const noexcept { return size_.load(std::memory_order_relaxed); }
  void resize(int n);
  /// Runs chunk i = [i*chunk, min(n, (i+1)*chunk)) for i < count on the workers and the
  /// caller; false (nothing run) when another thread holds the pool or no worker exists.
  bool try_run(index_t n, index_t chunk, index_t count, chunk_fn fn, void* ctx);

 private:
  thread_pool();
  void start_workers();
  void stop_workers();
  void worker_main(std::uint64_t seen, int self);
  void run_chunks(int self) noexcept;
  bool run_chunk(int home) noexcept;
  static void child_after_fork();

  std::mutex run_mutex_;  // held by the one caller that owns the pool, and by resize
  std::vector<std::thread> workers_;
  std::atomic<int> size_;
  std::atomic<bool> stop_{false};

  // Written by the caller before publishing, read-only while the job runs.
  alignas(64) std::atomic<std::uint64_t> generation_{0};
  chunk_fn fn_ = nullptr;
  void* ctx_ = nullptr;
  index_t n_ = 0, chunk_ = 0, count_ = 0;
  waiter wake_;
  // The hot counters on lines of their own so claims and completions do not collide.
  struct alignas(64) home {
    std::atomic<index_t> remaining{0};
    index_t first = 0, count = 0;  // chunks [first, first + count)
  };
  std::unique_ptr<home[]> homes_;
  int n_homes_ = 0;
  // The caller's core when it published the job (Note [off the caller's core]); relaxed:
  // a hint, read by workers that may be late.
  std::atomic<int> caller_cpu_{-1};
  alignas(64) std::atomic<index_t> done_{0};
  std::atomic<bool> failed_{false};
  std::atomic<int> fp_raised_{0};  // flags the workers' chunks raised (Note [flags of pool threads])
  std::exception_ptr error_;  // written once by the first failing chunk
  waiter done_waiter_;
};

}  // namespace detail

// ---------------------------------------------------------------------------- definitions

namespace detail {

inline bool parse_integer(const char* text, long long& out) noexcept {
  if (text == nullptr) return false;
  const char* end = text;
  while (*end) ++end;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (text < end && blank(*text)) ++text;
  while (end > text && blank(end[-1])) --end;
  if (text < end && *text == '+') ++text;
  const auto [ptr, ec] = std::from_chars(text, end, out);
  return ec == std::errc{} && ptr == end && ptr != text;
}

inline int parse_num_threads(const char* text, int fallback) noexcept {
  long long v = 0;
  if (!parse_integer(text, v) || v < 1) return fallback;
  return v > max_threads ? max_threads : static_cast<int>(v);
}

inline index_t parse_threshold(const char* text, index_t fallback) noexcept {
  long long v = 0;
  if (!parse_integer(text, v) || v < 0) return fallback;
  return static_cast<index_t>(v);
}

inline index_t ceil_div(index_t a, index_t b) noexcept { return a / b + (a % b != 0); }

// Note [off the caller's core]
// A worker woken from its sleep is placed by the kernel's scheduler, and when no core looks
// idle at that moment (another library's pool still spinning after its own parallel region:
// libgomp spins ~10 ms here, as ours does) it is queued on the core of the thread that woke
// it, which is the caller. Two threads on one core then share it for the whole burst of
// calls that follows: measured with numba's OpenMP pool in the same process on the 2-core
// Zen 4 VM (bench/python/run_peers.py's rotation, y = affine(x) over 64K doubles), the
// worker sat on the caller's core for 60 ms at a time and every call took 13.2 us, more than
// the caller alone (10.9 us) and twice the 6.0 us of two cores; the load balancer did not
// separate them while the worker's spin kept it runnable. So a worker that finds itself on
// the caller's core when a job starts (sched_getcpu, the caller's recorded at publishing)
// moves: it narrows its own affinity to the allowed cores but that one, which migrates it
// before the call returns, then restores the mask, so the scheduler stays free to place it
// later. At most once per millisecond per worker; a worker still on the caller's core (the
// move was too recent, or the scheduler put it back) leaves that job to the caller and waits
// for the next one asleep instead of spinning, since a thread spinning there takes about
// half of the caller's core whether or not it claims chunks (co-located, the call above took
// 13-22 us, the caller alone about 11; each such job then costs the caller a futex wake).
// Never where the pool has more threads than the process may use cores (there sharing is the
// user's choice, and moving would only bounce the threads). DYNEXPR_POOL_MOVE=0 turns it off
// (for measuring it, and for programs that place their threads themselves). sched_getcpu
// costs ~4 ns (rdpid), once per job on each side. Other platforms: nothing.
#if defined(__linux__)
// Returns whether the worker is still on the caller's core (it then leaves the job to the
// caller and sleeps without spinning).
inline bool move_off_caller_core(int caller_cpu, int threads) noexcept {
  if (caller_cpu < 0 || sched_getcpu() != caller_cpu) return false;
  static const bool off = parse_threshold(std::getenv("DYNEXPR_POOL_MOVE"), 1) == 0;
  if (off) return false;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;  // > 1024 cpus
  if (CPU_COUNT(&allowed) < threads || !CPU_ISSET(caller_cpu, &allowed)) return false;
  thread_local std::chrono::steady_clock::time_point last{};
  const auto now = std::chrono::steady_clock::now();
  if (now - last >= std::chrono::milliseconds(1)) {
    last = now;
    cpu_set_t others = allowed;
    CPU_CLR(caller_cpu, &others);
    if (sched_setaffinity(0, sizeof others, &others) == 0)
      sched_setaffinity(0, sizeof allowed, &allowed);
  }
  return sched_getcpu() == caller_cpu;
}

inline int current_cpu() noexcept { return sched_getcpu(); }
#else
inline bool move_off_caller_core(int, int) noexcept { return false; }
inline int current_cpu() noexcept { return -1; }
#endif

inline chunk_plan plan_chunks(index_t n, index_t grain, index_t align, int threads,
                              int per_thread) noexcept {
  // About 4 chunks per thread by default: enough that a thread which starts late (a worker
  // waking from sleep) or runs slower takes fewer chunks, few enough that the per-chunk
  // atomics and the ragged vector tail of each chunk stay negligible.
  const index_t target = index_t{per_thread > 0 ? per_thread : 4} * threads;
  const index_t chunk = std::max({ceil_div(n, target), grain, index_t{1}});
  const index_t units = ceil_div(chunk, align);
  if (units >= ceil_div(n, align)) return {n, 1};  // also avoids units * align overflowing
  return {units * align, ceil_div(n, units * align)};
}

template <class Ready>
void waiter::wait(Ready ready, bool spin) {
  if (ready()) return;
  if (spin) {
    const auto deadline = std::chrono::steady_clock::now() + parallel::spin_time();
    for (unsigned i = 1;; ++i) {
      cpu_relax();
      if (ready()) return;
      if (i % 64 == 0) {  // every ~2 µs of pauses: look at the clock, then yield
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::yield();
      }
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  // seq_cst pairs with notify(): either the notifier sees this sleeper, or ready() below sees
  // the notifier's write. The mutex then orders notify_all after our wait starts.
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  cv_.wait(lock, ready);
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

inline void waiter::notify() {
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;  // no syscall on the fast path
  { std::lock_guard<std::mutex> lock(mutex_); }
  cv_.notify_all();
}

#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN thread_pool& thread_pool::instance() {
  static thread_pool pool;
  return pool;
}

DYNEXPR_RT_FN thread_pool::thread_pool() {
  const unsigned hw = std::thread::hardware_concurrency();
  const int fallback = hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, max_threads));
  size_.store(parse_num_threads(std::getenv("DYNEXPR_NUM_THREADS"), fallback));
#ifdef DYNEXPR_HAS_PTHREAD_ATFORK
  pthread_atfork(nullptr, nullptr, &thread_pool::child_after_fork);
#endif
}

DYNEXPR_RT_FN thread_pool::~thread_pool() {
  pool_gone.store(true);
  if (t_busy) {  // exit() inside a body: joining would wait on this very call. Let them go.
    for (auto& t : workers_) t.detach();
    return;
  }
  // Let a pooled call on another thread finish, then join: exit never leaves a worker running
  // over destroyed state, and never hangs on a sleeping one.
  std::lock_guard<std::mutex> lock(run_mutex_);
  stop_workers();
}

DYNEXPR_RT_FN void thread_pool::resize(int n) {
  if (n < 1 || n > max_threads)
    throw value_error("dynexpr: set_num_threads(" + std::to_string(n) +
                      "): pass a thread count between 1 and " + std::to_string(max_threads));
  if (t_busy)
    throw value_error(
        "dynexpr: set_num_threads() inside a parallel_for body would wait on "
        "itself; call it before or after the parallel loop");
  std::lock_guard<std::mutex> lock(run_mutex_);
  if (n == size()) return;
  stop_workers();  // the next pooled call starts n - 1 new ones
  size_.store(n);
}

DYNEXPR_RT_FN void thread_pool::start_workers() {
  const std::uint64_t seen = generation_.load();
  if (workers_.empty() && n_homes_ != size()) {  // no worker can be reading homes_
    homes_.reset(new home[static_cast<std::size_t>(size())]);
    n_homes_ = size();
  }
  try {
    while (static_cast<int>(workers_.size()) + 1 < std::min(size(), n_homes_)) {
      const int self = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, seen, self] { worker_main(seen, self); });
    }
  } catch (const std::system_error&) {
    // Out of threads (ulimit, container): run with the ones we have rather than fail the
    // evaluation, and stop retrying on every call.
    size_.store(static_cast<int>(workers_.size()) + 1);
  }
}

DYNEXPR_RT_FN void thread_pool::stop_workers() {
  stop_.store(true, std::memory_order_seq_cst);
  wake_.notify();
  for (auto& t : workers_) t.join();
  workers_.clear();
  stop_.store(false);
}

DYNEXPR_RT_FN void thread_pool::worker_main(std::uint64_t seen, int self) {
#if defined(__linux__)
  // Named for top -H, perf and /proc/<pid>/task/*/comm, beside other libraries' pools.
  pthread_setname_np(pthread_self(), "dynexpr-pool");
#endif
  t_worker = true;
  t_busy = true;
  bool stay_off = false;  // on the caller's core at the last job: sleep, do not spin
  for (;;) {
    wake_.wait(
        [&] {
          return generation_.load(std::memory_order_seq_cst) != seen ||
                 stop_.load(std::memory_order_seq_cst);
        },
        !stay_off);
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_relaxed);
    // Note [off the caller's core]. Skipping the job is safe: the caller runs every chunk
    // no thread claims.
    stay_off = move_off_caller_core(caller_cpu_.load(std::memory_order_relaxed), n_homes_);
    if (stay_off) continue;
    run_chunks(self);
  }
}

DYNEXPR_RT_FN void thread_pool::run_chunks(int self) noexcept {
  // Home first, then the others in turn (Note [pool protocol]). n_homes_ does not change
  // while a worker runs.
  const int homes = n_homes_;
  for (int i = 0; i < homes; ++i) {
    const int k = self + i < homes ? self + i : self + i - homes;
    while (run_chunk(k)) {
    }
  }
}

// Claims and runs one chunk of home k: false when that home has none left.
DYNEXPR_RT_FN bool thread_pool::run_chunk(int k) noexcept {
  home& h = homes_[static_cast<std::size_t>(k)];
  if (h.remaining.load(std::memory_order_relaxed) <= 0) return false;  // spare the line
  const index_t left = h.remaining.fetch_sub(1, std::memory_order_acquire);
  if (left <= 0) return false;
  // The claim pins the job (Note [pool protocol]); read what we need before done_ counts
  // the chunk, after which the caller may already be publishing the next job.
  const index_t count = count_;
  const index_t begin = (h.first + h.count - left) * chunk_;
  const index_t end = begin + std::min(chunk_, n_ - begin);  // no overflow near INT64_MAX
  // After a failure the remaining chunks are skipped, but still counted.
  if (!failed_.load(std::memory_order_relaxed)) {
    try {
      fn_(ctx_, begin, end);
    } catch (...) {
      if (!failed_.exchange(true, std::memory_order_relaxed)) error_ = std::current_exception();
    }
  }
  // Before done_ counts the chunk, which publishes this write to the caller.
  if constexpr (fp_flags != 0) {
    if (t_worker) {
      if (const int raised = std::fetestexcept(fp_flags)) {
        fp_raised_.fetch_or(raised, std::memory_order_relaxed);
        std::feclearexcept(raised);
      }
    }
  }
  if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == count) done_waiter_.notify();
  return true;
}

DYNEXPR_RT_FN bool thread_pool::try_run(index_t n, index_t chunk, index_t count, chunk_fn fn,
                                        void* ctx) {
  // try_lock, never lock: a second user thread runs its loop inline at once instead of
  // queueing behind a job that already uses every core.
  std::unique_lock<std::mutex> lock(run_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (static_cast<int>(workers_.size()) + 1 < size()) start_workers();
  if (workers_.empty()) return false;

  n_ = n;
  chunk_ = chunk;
  count_ = count;
  fn_ = fn;
  ctx_ = ctx;
  failed_.store(false, std::memory_order_relaxed);
  fp_raised_.store(0, std::memory_order_relaxed);
  caller_cpu_.store(current_cpu(), std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  // One contiguous home range per thread, in thread order (Note [pool protocol]); homes
  // past the chunk count stay empty.
  const index_t parts = std::min<index_t>(static_cast<index_t>(workers_.size()) + 1, count);
  for (index_t k = 0; k < n_homes_; ++k) {
    home& h = homes_[static_cast<std::size_t>(k)];
    h.first = k < parts ? k * count / parts : count;
    h.count = k < parts ? (k + 1) * count / parts - h.first : 0;
  }
  for (index_t k = 0; k < n_homes_; ++k) {
    home& h = homes_[static_cast<std::size_t>(k)];
    h.remaining.store(h.count, std::memory_order_release);
  }
  generation_.fetch_add(1, std::memory_order_seq_cst);
  wake_.notify();

  t_busy = true;
  run_chunks(0);
  t_busy = false;
  done_waiter_.wait([&] { return done_.load(std::memory_order_seq_cst) == count; });
  if (const int raised = fp_raised_.load(std::memory_order_relaxed)) std::feraiseexcept(raised);

  if (failed_.load(std::memory_order_relaxed)) {
    std::exception_ptr error = std::exchange(error_, nullptr);
    lock.unlock();
    std::rethrow_exception(error);
  }
  return true;
}

// Note [fork]
// A forked child holds only the forking thread: the worker handles name threads that do not
// exist there and a lock held by a vanished thread stays locked, so its first pooled call
// would hang (Python's multiprocessing forks by default on Linux). The child parks the handles
// unjoined (~thread on a joinable handle terminates), rebuilds the locks, and starts fresh
// workers on its next pooled call. Forking from inside a parallel_for body is unsupported.
DYNEXPR_RT_FN void thread_pool::child_after_fork() {
  if (pool_gone.load()) return;
  thread_pool& pool = instance();
  static std::vector<std::thread>* orphans = nullptr;  // reachable, so leak checkers stay quiet
  if (!pool.workers_.empty()) {
    if (orphans == nullptr) orphans = new std::vector<std::thread>;
    for (auto& t : pool.workers_) orphans->push_back(std::move(t));
    pool.workers_.clear();
  }
  new (&pool.run_mutex_) std::mutex;
  new (&pool.wake_) waiter;
  new (&pool.done_waiter_) waiter;
  pool.stop_.store(false);
}

#endif  // !DYNEXPR_RUNTIME_EXTERN

}  // namespace detail

#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN int num_threads() {
  if (detail::pool_gone.load(std::memory_order_relaxed)) return 1;
  return detail::thread_pool::instance().size();
}

DYNEXPR_RT_FN void set_num_threads(int n) {
  if (detail::pool_gone.load(std::memory_order_relaxed)) return;
  detail::thread_pool::instance().resize(n);
}

DYNEXPR_RT_FN index_t inline_threshold() {
  static const index_t value =
      detail::parse_threshold(std::getenv("DYNEXPR_PARALLEL_THRESHOLD"), default_inline_threshold);
  return value;
}

DYNEXPR_RT_FN bool in_worker() { return detail::t_worker; }

namespace detail {
inline std::atomic<long long>& spin_us() {
  static std::atomic<long long> us{[] {
    long long v = 0;
    return parse_integer(std::getenv("DYNEXPR_SPIN_US"), v) && v >= 0
               ? std::min(v, static_cast<long long>(max_spin_time.count()))
               : static_cast<long long>(default_spin_time.count());
  }()};
  return us;
}
}  // namespace detail

DYNEXPR_RT_FN std::chrono::microseconds spin_time() {
  return std::chrono::microseconds{detail::spin_us().load(std::memory_order_relaxed)};
}

DYNEXPR_RT_FN void set_spin_time(std::chrono::microseconds t) {
  const long long us = std::clamp<long long>(t.count(), 0, max_spin_time.count());
  detail::spin_us().store(us, std::memory_order_relaxed);
}

DYNEXPR_RT_FN schedule& thread_schedule() {
  static thread_local schedule s;
  return s;
}
#endif  // !DYNEXPR_RUNTIME_EXTERN

template <class F>
void parallel_for(index_t n, index_t grain, index_t align, double work, F&& fn) {
  using Fn = std::remove_reference_t<F>;
  if constexpr (std::is_function_v<Fn>) {
    parallel_for(n, grain, align, work, &fn);  // a function has no object address to erase
  } else {
    if (n < 0)
      throw value_error("dynexpr: parallel_for: n = " + std::to_string(n) +
                        " is negative; pass the number of items (>= 0)");
    if (align < 1)
      throw value_error("dynexpr: parallel_for: align = " + std::to_string(align) +
                        " must be >= 1; pass 1 for no alignment");
    if (n == 0) return;
    // `!(work >= t)` rather than `work < t` so that a NaN estimate stays inline.
    if (!(work >= static_cast<double>(inline_threshold())) || detail::t_busy ||
        detail::pool_gone.load(std::memory_order_relaxed)) {
      fn(index_t{0}, n);
      return;
    }
    auto& pool = detail::thread_pool::instance();
    const schedule& sched = thread_schedule();
    int threads = pool.size();
    if (sched.threads > 0 && sched.threads < threads) threads = sched.threads;
    if (threads > 1) {
      const detail::chunk_plan plan =
          detail::plan_chunks(n, grain, align, threads, sched.chunks_per_thread);
      void* ctx = const_cast<void*>(static_cast<const void*>(std::addressof(fn)));
      if (plan.count > 1 && pool.try_run(n, plan.chunk, plan.count, &detail::call_chunk<Fn>, ctx))
        return;
    }
    fn(index_t{0}, n);
  }
}

}  // namespace dynexpr::parallel
