// bench/pool_handoff.cpp — what a pooled parallel_for costs, and where it starts to pay.
//
// Measures (a) the fixed cost of a pooled call against the inline path: an empty body (the
// caller ends up taking every chunk) and a true round trip in which every worker must take a
// chunk, back to back (workers still spinning) and after an idle gap (workers asleep); and
// (b) for y[i] = x[i]*2+1 on float (cost 1 per element) the smallest n from which the pooled
// run beats the inline one, with the arrays in cache (the same n elements every call)
// and out of cache (each call walks a fresh part of a 256 MiB buffer). The crossover times
// kernel_cost is the crossover in work units, which sets default_inline_threshold; and (c) a
// ~1 ms kernel called after a 10 ms pause against back to back, for several spin times
// (Note [spin then block]): what the workers' sleep costs the first kernel after a pause.
//
//   g++ -std=c++20 -O2 -march=native -pthread -Iinclude bench/pool_handoff.cpp -o pool_handoff
//   ./pool_handoff [--json results.json] [--pause-only]
// On a shared machine run it as `chrt -f 1 ./pool_handoff`: other processes then cannot take
// a core in the middle of a round trip, which otherwise dominates every pooled number.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "dynexpr/parallel/thread_pool.hpp"

namespace {

using dynexpr::index_t;
using clock_type = std::chrono::steady_clock;
namespace par = dynexpr::parallel;

constexpr double force_pool = std::numeric_limits<double>::infinity();  // above any threshold
constexpr double force_inline = 0.0;
constexpr index_t align = 16;       // one AVX-512 vector of float; chunks split on vector edges
constexpr index_t kernel_cost = 2;  // one mul + one add per element, cost 1 each

// The same body the evaluators will run: whole vectors, then a scalar tail. Written with
// vector extensions because -O2 in g++ 12 does not vectorize a loop that needs a tail.
typedef float vec8 __attribute__((vector_size(32)));
void kernel(const float* DYNEXPR_RESTRICT x, float* DYNEXPR_RESTRICT y, index_t b, index_t e) {
  index_t i = b;
  for (; i + 8 <= e; i += 8) {
    vec8 v;
    std::memcpy(&v, x + i, sizeof v);
    v = v * 2.0f + 1.0f;
    std::memcpy(y + i, &v, sizeof v);
  }
  for (; i < e; ++i) y[i] = x[i] * 2.0f + 1.0f;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Best of `trials` of the mean time per call over enough calls to fill ~min_time. Many short
// trials: on a shared machine the best one is the one where no other process took a core.
template <class Call>
double best_ns_per_call(Call call, double min_time = 5e-4, int trials = 31) {
  index_t reps = 1;
  for (;;) {  // calibrate
    const auto t0 = clock_type::now();
    for (index_t r = 0; r < reps; ++r) call(r);
    if (seconds_since(t0) >= min_time || reps >= (index_t{1} << 24)) break;
    reps *= 2;
  }
  double best = 1e300;
  for (int t = 0; t < trials; ++t) {
    const auto t0 = clock_type::now();
    for (index_t r = 0; r < reps; ++r) call(r);
    best = std::min(best, seconds_since(t0) * 1e9 / static_cast<double>(reps));
  }
  return best;
}

// Median time of one call made after the workers have fallen asleep.
template <class Call>
double after_idle_ns(Call call, int samples = 101) {
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // >> spin_time
    const auto t0 = clock_type::now();
    call(0);
    t.push_back(seconds_since(t0) * 1e9);
  }
  std::nth_element(t.begin(), t.begin() + samples / 2, t.end());
  return t[samples / 2];
}

// An empty body: with nothing to do the caller usually claims every chunk itself, so this is
// the fixed cost a pooled call adds when the workers have no time to join.
auto empty_call(double work) {
  return [work](index_t) { par::parallel_for(1 << 20, 1, 1, work, [](index_t, index_t) {}); };
}

// One chunk per thread, and each chunk waits (bounded) until all have started: every worker
// must notice the job, claim a chunk and finish before the caller returns. This is the true
// round trip of a hand-off.
auto rendezvous_call(int threads) {
  return [threads](index_t) {
    std::atomic<int> started{0};
    par::parallel_for(threads, 1, 1, force_pool, [&](index_t, index_t) {
      started.fetch_add(1);
      const auto t0 = clock_type::now();
      // Yield so that on a loaded machine a worker queued on this core can take its chunk.
      while (started.load() < threads && seconds_since(t0) < 0.01) std::this_thread::yield();
    });
  };
}

struct row {
  index_t n;
  double inline_ns, pool_ns, worker_share;
};

// Smallest tested n from which the pool wins at every larger tested n (noise-proof).
index_t crossover(const std::vector<row>& rows) {
  index_t at = -1;
  for (auto it = rows.rbegin(); it != rows.rend() && it->pool_ns < it->inline_ns; ++it) at = it->n;
  return at;
}

std::vector<row> sweep(bool cold, const std::vector<float>& x, std::vector<float>& y) {
  const index_t total = static_cast<index_t>(x.size());
  std::vector<row> rows;
  for (double fn = 1024; fn <= (1 << 22); fn *= std::sqrt(2.0)) {
    const index_t n = static_cast<index_t>(fn) / align * align;
    // Cold: every call starts where the previous one (of any trial) ended, so the data has
    // been evicted by the 2 x 256 MiB walked since it was last touched.
    const index_t slots = cold ? total / n : 1;
    index_t call_no = 0;
    auto run = [&](double work) {
      return best_ns_per_call([&](index_t) {
        const index_t off = (call_no++ % slots) * n;
        const float* xs = x.data() + off;
        float* ys = y.data() + off;
        par::parallel_for(n, 1, align, work, [=](index_t b, index_t e) { kernel(xs, ys, b, e); });
      });
    };
    const double ti = run(force_inline), tp = run(force_pool);
    // Share of chunks the workers ran, outside the timing: near 0 means the caller did all
    // the work (workers asleep, or descheduled by other load on the machine).
    std::atomic<index_t> on_worker{0}, chunks{0};
    for (int r = 0; r < 200; ++r)
      par::parallel_for(n, 1, align, force_pool, [&](index_t b, index_t e) {
        kernel(x.data(), y.data(), b, e);
        chunks.fetch_add(1, std::memory_order_relaxed);
        if (par::in_worker()) on_worker.fetch_add(1, std::memory_order_relaxed);
      });
    const double share = static_cast<double>(on_worker) / static_cast<double>(chunks);
    rows.push_back({n, ti, tp, share});
    std::printf("  %-6s %10lld %12.0f %12.0f %8.2fx %8.0f%%\n", cold ? "cold" : "hot",
                static_cast<long long>(n), ti, tp, ti / tp, 100 * share);
  }
  return rows;
}


// (c) A ~1 ms compute-bound kernel (tanh per element, as in a gelu) on the pool.
void tanh_kernel(const float* x, float* y, index_t b, index_t e) {
  for (index_t i = b; i < e; ++i) y[i] = std::tanh(x[i]) * 0.5f + x[i];
}

struct pause_row {
  long long spin_us;
  double back_to_back_ns, after_pause_ns, worker_share_after_pause;
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

pause_row pause_probe(std::chrono::microseconds spin, const std::vector<float>& x,
                      std::vector<float>& y) {
  par::set_spin_time(spin);
  const index_t n = static_cast<index_t>(x.size());
  std::atomic<index_t> on_worker{0}, chunks{0};
  auto call = [&] {
    const auto t0 = clock_type::now();
    par::parallel_for(n, 1, align, force_pool, [&](index_t b, index_t e) {
      tanh_kernel(x.data(), y.data(), b, e);
      chunks.fetch_add(1, std::memory_order_relaxed);
      if (par::in_worker()) on_worker.fetch_add(1, std::memory_order_relaxed);
    });
    return seconds_since(t0) * 1e9;
  };
  std::vector<double> hot, cold;
  for (int r = 0; r < 5; ++r) call();  // workers awake, pages touched
  for (int r = 0; r < 41; ++r) hot.push_back(call());
  on_worker = 0;
  chunks = 0;
  for (int r = 0; r < 41; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cold.push_back(call());
  }
  return {static_cast<long long>(spin.count()), median(hot), median(cold),
          static_cast<double>(on_worker) / static_cast<double>(chunks)};
}

std::vector<pause_row> pause_sweep() {
  std::vector<float> x(1 << 18), y(1 << 18);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1000) * 1e-3f;
  const auto keep = par::spin_time();
  std::vector<pause_row> rows;
  std::printf("(c) tanh kernel, %zu floats: after a 10 ms pause vs back to back (medians of 41)\n",
              x.size());
  std::printf("  spin us   back to back us   after pause us   ratio   workers after pause\n");
  for (long long us : {0LL, 30LL, 1000LL, 5000LL, 20000LL}) {
    const pause_row r = pause_probe(std::chrono::microseconds{us}, x, y);
    rows.push_back(r);
    std::printf("  %7lld %17.0f %16.0f %7.2f %20.0f%%\n", us, r.back_to_back_ns / 1e3,
                r.after_pause_ns / 1e3, r.after_pause_ns / r.back_to_back_ns,
                100 * r.worker_share_after_pause);
  }
  par::set_spin_time(keep);
  std::printf("  default spin_time: %lld us (DYNEXPR_SPIN_US sets it)\n\n",
              static_cast<long long>(par::spin_time().count()));
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  bool pause_only = false;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
    if (std::strcmp(argv[i], "--pause-only") == 0) pause_only = true;
  }

  const int threads = par::num_threads();
  std::printf("pool_handoff: %d threads (caller included), align %lld\n\n", threads,
              static_cast<long long>(align));
  if (threads < 2) {
    std::printf("one thread: nothing to hand off; set DYNEXPR_NUM_THREADS >= 2\n");
    return 1;
  }

  // (a) Fixed costs. Warm the pool up first (the first pooled call creates the workers).
  empty_call(force_pool)(0);
  const std::vector<pause_row> pauses = pause_sweep();
  if (pause_only) return 0;
  const double inline_ns = best_ns_per_call(empty_call(force_inline));
  const double empty_ns = best_ns_per_call(empty_call(force_pool));
  const double trip_ns = best_ns_per_call(rendezvous_call(threads));
  const double trip_idle_ns = after_idle_ns(rendezvous_call(threads));
  std::printf("(a) parallel_for fixed cost                      ns/call\n");
  std::printf("  inline, empty body                        %10.0f\n", inline_ns);
  std::printf("  pooled, empty body (caller takes all)     %10.0f\n", empty_ns);
  std::printf("  pooled round trip, workers spinning       %10.0f\n", trip_ns);
  std::printf("  pooled round trip after 1 ms idle (med.)  %10.0f\n\n", trip_idle_ns);

  // (b) y = x*2+1 on float.
  const index_t total = index_t{1} << 26;  // 256 MiB per array: far beyond any L3
  std::vector<float> x(static_cast<size_t>(total)), y(static_cast<size_t>(total));
  for (index_t i = 0; i < total; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 1000);
  std::printf("(b) y[i] = x[i]*2+1, float   n    inline ns    pooled ns  speedup  workers\n");
  const std::vector<row> hot = sweep(false, x, y);
  const std::vector<row> cold = sweep(true, x, y);
  const index_t hot_x = crossover(hot), cold_x = crossover(cold);
  std::printf("\ncrossover (pool wins from here up): in cache n = %lld, out of cache n = %lld\n",
              static_cast<long long>(hot_x), static_cast<long long>(cold_x));
  std::printf("in work units (x %lld): in cache %lld, out of cache %lld\n",
              static_cast<long long>(kernel_cost), static_cast<long long>(hot_x * kernel_cost),
              static_cast<long long>(cold_x * kernel_cost));
  std::printf("current default_inline_threshold = %lld work units\n",
              static_cast<long long>(par::default_inline_threshold));

  if (json_path != nullptr) {
    FILE* f = std::fopen(json_path, "w");
    if (f == nullptr) {
      std::perror(json_path);
      return 1;
    }
    std::fprintf(f,
                 "{\"threads\": %d, \"empty_inline_ns\": %.1f, \"empty_pool_ns\": %.1f, "
                 "\"round_trip_ns\": %.1f, \"round_trip_after_idle_ns\": %.1f, "
                 "\"kernel_cost\": %lld, \"crossover_hot\": %lld, "
                 "\"crossover_cold\": %lld, \"default_inline_threshold\": %lld, \"spin_us\": %lld",
                 threads, inline_ns, empty_ns, trip_ns, trip_idle_ns,
                 static_cast<long long>(kernel_cost), static_cast<long long>(hot_x),
                 static_cast<long long>(cold_x),
                 static_cast<long long>(par::default_inline_threshold),
                 static_cast<long long>(par::spin_time().count()));
    const char* sep = "";
    std::fprintf(f, ", \"after_pause\": [");
    for (const pause_row& r : pauses) {
      std::fprintf(f,
                   "%s{\"spin_us\": %lld, \"back_to_back_ns\": %.0f, \"after_pause_ns\": %.0f, "
                   "\"worker_share\": %.3f}",
                   sep, r.spin_us, r.back_to_back_ns, r.after_pause_ns, r.worker_share_after_pause);
      sep = ", ";
    }
    std::fprintf(f, "], \"rows\": [");
    sep = "";
    for (const auto* rows : {&hot, &cold})
      for (const row& r : *rows) {
        std::fprintf(f,
                     "%s{\"cache\": \"%s\", \"n\": %lld, \"inline_ns\": %.1f, \"pool_ns\": %.1f, "
                     "\"worker_share\": %.3f}",
                     sep, rows == &hot ? "hot" : "cold", static_cast<long long>(r.n), r.inline_ns,
                     r.pool_ns, r.worker_share);
        sep = ", ";
      }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
