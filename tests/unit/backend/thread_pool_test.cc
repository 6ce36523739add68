#include "backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace pagoda::cpu {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (std::int64_t n : {0, 1, 2, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
        ASSERT_LE(0, begin);
        ASSERT_LT(begin, end);
        ASSERT_LE(end, n);
        for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (std::int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(ThreadPoolTest, ManyBackToBackCallsSeeEachOthersWrites) {
  // Each call reads what the previous call wrote: catches a call returning before all its
  // ranges are done, or a worker running a stale job.
  ThreadPool pool(2);
  std::vector<std::int64_t> values(97, 0);
  for (int round = 0; round < 500; ++round) {
    pool.parallel_for(static_cast<std::int64_t>(values.size()),
                      [&](std::int64_t begin, std::int64_t end) {
                        for (std::int64_t i = begin; i < end; ++i) {
                          ASSERT_EQ(values[static_cast<std::size_t>(i)], round);
                          values[static_cast<std::size_t>(i)]++;
                        }
                      });
  }
}

TEST(ThreadPoolTest, MaxChunksLimitsTheSplit) {
  ThreadPool pool(2);
  std::atomic<int> calls{0};
  pool.parallel_for(
      100, [&](std::int64_t, std::int64_t) { calls++; }, 1);
  EXPECT_EQ(calls.load(), 1);
}

TEST(ThreadPoolTest, DefaultUsesEveryHardwareThread) {
  ThreadPool pool;
  EXPECT_EQ(pool.num_threads(),
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace pagoda::cpu
