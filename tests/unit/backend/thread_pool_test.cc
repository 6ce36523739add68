#include "backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

namespace pagoda::cpu {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (ThreadPool::Schedule schedule :
       {ThreadPool::Schedule::kGuided, ThreadPool::Schedule::kEven}) {
    for (int threads : {1, 2, 3, 5}) {
      ThreadPool pool(threads);
      EXPECT_EQ(pool.num_threads(), threads);
      for (std::int64_t n : {0, 1, 2, 7, 64, 1001, 100000}) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        pool.parallel_for(
            n,
            [&](std::int64_t begin, std::int64_t end) {
              ASSERT_LE(0, begin);
              ASSERT_LT(begin, end);
              ASSERT_LE(end, n);
              for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
            },
            schedule);
        for (std::int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
        }
      }
    }
  }
}

// The ranges one call hands out, sorted by start.
std::vector<std::pair<std::int64_t, std::int64_t>> ranges_of(ThreadPool& pool, std::int64_t n,
                                                             ThreadPool::Schedule schedule) {
  std::mutex mutex;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  pool.parallel_for(
      n,
      [&](std::int64_t begin, std::int64_t end) {
        std::lock_guard lock(mutex);
        ranges.emplace_back(begin, end);
      },
      schedule);
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST(ThreadPoolTest, GuidedRangesShrinkToAFloor) {
  ThreadPool pool(2);
  for (std::int64_t n : {24, 40, 128, 2048, 49152}) {
    const auto ranges = ranges_of(pool, n, ThreadPool::Schedule::kGuided);
    // First a quarter of the work (1 / (2 x threads)), then never growing, never below
    // n / 32 except for the remainder at the end.
    EXPECT_EQ(ranges.front().second, (n + 3) / 4) << n;
    const std::int64_t floor = std::max<std::int64_t>(1, n / 32);
    for (std::size_t i = 1; i < ranges.size(); ++i) {
      const std::int64_t size = ranges[i].second - ranges[i].first;
      EXPECT_LE(size, ranges[i - 1].second - ranges[i - 1].first) << n << " range " << i;
      if (i + 1 < ranges.size()) EXPECT_GE(size, floor) << n << " range " << i;
    }
    // The last range is at most the floor: the most a finished thread waits for.
    EXPECT_LE(ranges.back().second - ranges.back().first, floor) << n;
    EXPECT_LE(ranges.size(), 40u) << n;
  }
}

TEST(ThreadPoolTest, EvenRangesAreFourPerThread) {
  ThreadPool pool(2);
  const auto ranges = ranges_of(pool, 1000, ThreadPool::Schedule::kEven);
  ASSERT_EQ(ranges.size(), 8u);
  for (const auto& [begin, end] : ranges) EXPECT_EQ(end - begin, 125);
  EXPECT_EQ(ranges_of(pool, 5, ThreadPool::Schedule::kEven).size(), 5u);
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

TEST(ThreadPoolTest, DefaultUsesEveryHardwareThread) {
  ThreadPool pool;
  EXPECT_EQ(pool.num_threads(),
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace pagoda::cpu
