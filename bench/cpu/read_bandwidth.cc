// Memory read bandwidth on 1..N threads, the figure batch-1 decode is compared against
// (bench/peer/compare_1b.sh: weight bytes per token x tokens/s / this).
//
//   pagoda_read_bandwidth [--mib 512] [--threads "1 2"] [--streams "1 16"] [--runs 5]
//
// Each thread sums its slice of one buffer of 64-bit words (much larger than any L3), with eight
// independent accumulators so the loads, not the adds, set the pace; plain C++, no ISA-specific
// code, so the figure means the same on an AVX2-only and an AVX-512 machine. A thread reads its
// slice as S equal runs in step, a 64-byte line of each in turn: one run is one sequential
// stream, which on server cores is bound by how many lines one stream keeps in flight; 16 runs
// are the pattern of the int16 direct kernel (16 weight rows' runs, int16_kernel_loops.h), and
// read more. Prints one line per thread and stream count:
// `read_bandwidth threads=T streams=S bytes=B best_gbps=X median_gbps=Y` (GB = 1e9 bytes),
// best and median of --runs passes after one unmeasured pass that faults the pages in. The sum
// is checked against the known fill, so a pass cannot be optimised away.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t sum_words(const std::uint64_t* p, std::size_t n) {
  // Named accumulators, not an array: GCC keeps an accumulator array in memory.
  std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 += p[i];
    a1 += p[i + 1];
    a2 += p[i + 2];
    a3 += p[i + 3];
    a4 += p[i + 4];
    a5 += p[i + 5];
    a6 += p[i + 6];
    a7 += p[i + 7];
  }
  for (; i < n; ++i) a0 += p[i];
  return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

// The same sum, the n words read as `streams` runs in step, one 8-word line of each in turn.
std::uint64_t sum_streams(const std::uint64_t* p, std::size_t n, int streams) {
  if (streams == 1) return sum_words(p, n);
  const std::size_t run = n / static_cast<std::size_t>(streams) / 8 * 8;
  std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  for (std::size_t i = 0; i < run; i += 8) {
    for (int s = 0; s < streams; ++s) {
      const std::uint64_t* q = p + static_cast<std::size_t>(s) * run + i;
      a0 += q[0];
      a1 += q[1];
      a2 += q[2];
      a3 += q[3];
      a4 += q[4];
      a5 += q[5];
      a6 += q[6];
      a7 += q[7];
    }
  }
  const std::size_t done = run * static_cast<std::size_t>(streams);
  return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + sum_words(p + done, n - done);
}

// One pass over the buffer split into `threads` slices; returns seconds, checks the sum.
double timed_pass(const std::vector<std::uint64_t>& buffer, int threads, int streams) {
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads));
  const std::size_t slice = buffer.size() / static_cast<std::size_t>(threads);
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] {
      sums[t] = sum_streams(buffer.data() + slice * t,
                            t + 1 == threads ? buffer.size() - slice * t : slice, streams);
    });
  }
  sums[0] = sum_streams(buffer.data(), threads == 1 ? buffer.size() : slice, streams);
  for (std::thread& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::uint64_t total = 0;
  for (std::uint64_t s : sums) total += s;
  if (total != buffer.size()) {
    std::fprintf(stderr, "pagoda_read_bandwidth: sum %llu != %zu words\n",
                 static_cast<unsigned long long>(total), buffer.size());
    std::exit(1);
  }
  return seconds;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: pagoda_read_bandwidth [--mib N] [--threads \"1 2\"] [--streams \"1 16\"] "
               "[--runs R]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 512;
  std::string thread_list = "1 2";
  std::string stream_list = "1 16";
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage();
    if (arg == "--mib") {
      mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--threads") {
      thread_list = argv[++i];
    } else if (arg == "--streams") {
      stream_list = argv[++i];
    } else if (arg == "--runs") {
      runs = std::atoi(argv[++i]);
    } else {
      usage();
    }
  }
  if (mib == 0 || runs < 1) usage();
  std::vector<std::uint64_t> buffer((mib << 20) / sizeof(std::uint64_t), 1);

  std::istringstream threads_in(thread_list);
  for (int threads = 0; threads_in >> threads;) {
    if (threads < 1) usage();
    std::istringstream streams_in(stream_list);
    for (int streams = 0; streams_in >> streams;) {
      if (streams < 1) usage();
      timed_pass(buffer, threads, streams);  // pages and TLB warm
      std::vector<double> gbps;
      for (int r = 0; r < runs; ++r) {
        gbps.push_back(static_cast<double>(buffer.size() * sizeof(std::uint64_t)) /
                       timed_pass(buffer, threads, streams) / 1e9);
      }
      std::sort(gbps.begin(), gbps.end());
      std::printf(
          "read_bandwidth threads=%d streams=%d bytes=%zu best_gbps=%.2f median_gbps=%.2f\n",
          threads, streams, buffer.size() * sizeof(std::uint64_t), gbps.back(),
          gbps[gbps.size() / 2]);
    }
  }
  return 0;
}
