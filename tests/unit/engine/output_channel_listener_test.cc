// OutputChannel's listener: the wake-up an asynchronous consumer relies on. Every push is
// followed by a call, a listener installed after outputs arrived is called at once, and a
// consumer driven only by wake-ups never misses an output, whenever it installs its listener.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/output_channel.h"

namespace pagoda::engine {
namespace {

StreamOutput delta(std::int32_t token, bool finished = false) {
  StreamOutput item;
  item.output.token_ids = {token};
  item.output.finished = finished;
  return item;
}

TEST(OutputChannelListenerTest, CalledAfterEveryPushOutsideTheLock) {
  OutputChannel channel(8, 1);
  std::vector<std::int32_t> seen;
  // try_pop() inside the listener would deadlock if push() still held the channel's mutex.
  channel.set_listener([&] {
    while (auto item = channel.try_pop()) seen.push_back(item->output.token_ids.at(0));
  });
  channel.push(delta(1));
  channel.push(delta(2));
  channel.push(delta(3, /*finished=*/true));
  EXPECT_EQ(seen, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_TRUE(channel.ended());
}

TEST(OutputChannelListenerTest, CalledAtOnceWhenOutputsAreAlreadyQueued) {
  OutputChannel channel(8, 1);
  channel.push(delta(7));
  int calls = 0;
  channel.set_listener([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  channel.push(delta(8));
  EXPECT_EQ(calls, 2);
}

TEST(OutputChannelListenerTest, NotCalledAtOnceWhenNothingIsQueued) {
  OutputChannel channel(8, 1);
  int calls = 0;
  channel.set_listener([&] { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(OutputChannelListenerTest, NullptrRemovesTheListener) {
  OutputChannel channel(8, 1);
  int calls = 0;
  channel.set_listener([&] { ++calls; });
  channel.push(delta(1));
  channel.set_listener(nullptr);
  channel.push(delta(2));
  EXPECT_EQ(calls, 1);
}

TEST(OutputChannelListenerTest, CalledWhenAFullChannelMergesTheOutput) {
  OutputChannel channel(1, 1);
  channel.push(delta(1));
  int calls = 0;
  channel.set_listener([&] { ++calls; });
  ASSERT_EQ(calls, 1);
  channel.push(delta(2));  // merged into the queued output
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(channel.num_coalesced(), 1);
}

// A consumer that only ever waits for wake-ups, installing its listener while the producer is
// already pushing, must still see every token and the end of the stream.
TEST(OutputChannelListenerTest, NoLostWakeUpWhenInstalledDuringPushes) {
  constexpr int kTokens = 2000;
  for (int round = 0; round < 20; ++round) {
    OutputChannel channel(4, 1);
    std::mutex mutex;
    std::condition_variable woken;
    int wake_ups = 0;
    std::thread producer([&] {
      for (int i = 0; i < kTokens; ++i) channel.push(delta(i, /*finished=*/i == kTokens - 1));
    });
    if (round % 2 == 1) std::this_thread::yield();
    channel.set_listener([&] {
      {
        std::lock_guard lock(mutex);
        ++wake_ups;
      }
      woken.notify_one();
    });
    std::vector<std::int32_t> tokens;
    int handled = 0;
    while (!channel.ended()) {
      std::unique_lock lock(mutex);
      if (!woken.wait_for(lock, std::chrono::seconds(10), [&] { return wake_ups > handled; })) {
        ADD_FAILURE() << "lost wake-up after " << tokens.size() << " tokens";
        break;
      }
      handled = wake_ups;
      lock.unlock();
      while (auto item = channel.try_pop()) {
        tokens.insert(tokens.end(), item->output.token_ids.begin(), item->output.token_ids.end());
      }
    }
    producer.join();
    ASSERT_EQ(tokens.size(), static_cast<std::size_t>(kTokens));
    for (int i = 0; i < kTokens; ++i) ASSERT_EQ(tokens[i], i);
  }
}

}  // namespace
}  // namespace pagoda::engine
