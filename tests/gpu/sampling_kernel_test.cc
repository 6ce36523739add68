// The CUDA sampler (kernels/sampling/device_sampler.h) against its oracle, the CPU sampler
// (src/sampling/host_sampler.h), on fresh random logits at awkward sizes. Each batch mixes every
// kind of row: greedy, temperature, top-k (fast path, its limit, past it), top-p, min-p and their
// mixes; forced tokens; returned rows; allowed masks (dense and nearly empty); slots with bias,
// penalties, min_tokens bans; logprobs of 0..20; and logits drawn smooth, on a coarse grid (ties at
// every cut-off) or flat (thousands tied at the max: the candidate paths overflow). Two steps per
// batch, so the second sees the penalty counts of the first (counted on the device) and accepted
// tokens.
//
//   processed logits  equal to HostSampler::process_row's, within one rounding (same operations)
//   tokens            equal draw for draw; a row may differ only where the reference race's two
//                     best scores are within 1e-5 relative and the two sides took those two
//                     (logf on the device and std::log on the host may differ in the last ulp)
//   logprobs          within 1e-4, same rank, same top ids (values within 1e-4)
//   returned rows     the raw logits, bit for bit
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>

#include "backend/cpu/thread_pool.h"
#include "kernels/sampling/device_sampler.h"
#include "sampling/host_sampler.h"
#include "sampling/random_draw.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using gpu_test::DeviceVector;
using kernels::DeviceSampler;

constexpr float kInf = std::numeric_limits<float>::infinity();

// The draw settings the rows cycle through.
struct Draw {
  float temperature;
  std::int32_t top_k;
  float top_p;
  float min_p;
};
constexpr Draw kDraws[] = {
    {0.0f, 0, 1.0f, 0.0f},      // greedy
    {0.7f, 0, 1.0f, 0.0f},      // temperature alone: one race over the row
    {0.9f, 1, 1.0f, 0.0f},      // top-k 1 is greedy
    {1.0f, 40, 1.0f, 0.0f},     // top-k fast path
    {1.2f, 600, 1.0f, 0.0f},    // top-k past the fast path
    {0.8f, 0, 0.9f, 0.0f},      // top-p over the row
    {1.0f, 50, 0.8f, 0.0f},     // top-k then top-p
    {1.0f, 0, 1.0f, 0.05f},     // min-p
    {0.6f, 100, 0.95f, 0.02f},  // all three
    {1.5f, 0, 0.5f, 0.1f},      // top-p and min-p
    {1.0f, 512, 0.9f, 0.0f},    // the fast path's largest k
    {2.0f, 0, 1.0f, 0.0f},      // hot
    {0.05f, 20, 1.0f, 0.0f},    // cold
};
constexpr std::int32_t kLogprobs[] = {-1, 0, 5, 20, 1, -1, 3};

// A slot's processors, by kind: none, bias, penalties, min_tokens, presence only, everything.
SlotSamplingConfig slot_config(int kind, std::int64_t vocab, std::mt19937& rng) {
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(vocab - 1));
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  SlotSamplingConfig c;
  const auto add_bias = [&](int n) {
    std::set<std::int32_t> ids;
    while (static_cast<int>(ids.size()) < std::min<std::int64_t>(n, vocab)) ids.insert(token(rng));
    for (std::int32_t id : ids) c.logit_bias.emplace_back(id, value(rng));
    c.logit_bias.front().second = 30.0f;  // one token the bias makes likely
  };
  const auto add_prompt = [&](int n) {
    for (int i = 0; i < n; ++i) c.prompt_token_ids.push_back(token(rng));
    c.prompt_token_ids.push_back(c.prompt_token_ids.front());  // a repeat
  };
  switch (kind % 6) {
    case 0: break;
    case 1: add_bias(25); break;
    case 2:
      c.presence_penalty = 0.5f;
      c.frequency_penalty = 0.3f;
      c.repetition_penalty = 1.3f;
      add_prompt(60);
      break;
    case 3:
      c.min_tokens = 2;
      for (int i = 0; i < 4; ++i) c.min_tokens_banned_ids.push_back(token(rng));
      break;
    case 4:
      c.presence_penalty = -0.7f;
      add_prompt(10);  // read only by the repetition penalty, which is off
      break;
    case 5:
      add_bias(7);
      c.presence_penalty = 0.2f;
      c.frequency_penalty = -0.4f;
      c.repetition_penalty = 0.8f;
      add_prompt(30);
      c.min_tokens = 1;
      c.min_tokens_banned_ids = {c.logit_bias.front().first, token(rng)};
      break;
  }
  return c;
}

// One logits row: smooth, on a coarse grid, or flat (5% of tokens tied at the max).
void fill_row(int kind, std::mt19937& rng, std::span<float> row) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float sigma = 1.0f + 4.0f * unit(rng);
  for (float& x : row) {
    switch (kind % 4) {
      case 0:
      case 1: x = sigma * normal(rng); break;
      case 2: x = std::round(6.0f * normal(rng)) * 0.5f; break;
      default: x = unit(rng) < 0.05f ? 3.0f : std::floor(3.0f * unit(rng)); break;
    }
  }
}

// A mask allowing ~60% of the vocabulary, or (sparse) only 30 tokens.
void add_mask(bool sparse, std::int64_t vocab, std::mt19937& rng, std::vector<std::uint32_t>& out) {
  const auto words = static_cast<std::size_t>(SamplingBatch::mask_words(vocab));
  const std::size_t first = out.size();
  out.resize(first + words, 0u);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<std::int64_t> token(0, vocab - 1);
  if (sparse) {
    for (int i = 0; i < 30; ++i) {
      const std::int64_t v = token(rng);
      out[first + v / 32] |= 1u << (v % 32);
    }
    return;
  }
  for (std::int64_t v = 0; v < vocab; ++v) {
    if (unit(rng) < 0.6f) out[first + v / 32] |= 1u << (v % 32);
  }
}

// The reference race's best two (score, id) over the kept tokens of processed logits `l`.
struct RaceTop2 {
  float best = -kInf;
  std::int32_t best_id = -1;
  float second = -kInf;
  std::int32_t second_id = -1;
};

RaceTop2 race_top2(std::span<const float> l, const SamplingRow& row) {
  const std::vector<bool> kept = sampling::kept_tokens_reference(l, row);
  const float scale = 1.0f / row.temperature;
  const std::uint64_t key = sampling::draw_key(row.seed, row.position);
  RaceTop2 top;
  for (std::size_t v = 0; v < l.size(); ++v) {
    if (!kept[v]) continue;
    const float score = l[v] * scale + sampling::token_gumbel(key, static_cast<std::uint32_t>(v));
    const auto id = static_cast<std::int32_t>(v);
    if (score > top.best) {
      top.second = top.best;
      top.second_id = top.best_id;
      top.best = score;
      top.best_id = id;
    } else if (score > top.second) {
      top.second = score;
      top.second_id = id;
    }
  }
  return top;
}

bool is_draw(const SamplingRow& row) {
  return !row.return_logits && row.forced_token < 0 && row.temperature > 0.0f && row.top_k != 1 &&
         row.min_p <= 1.0f;
}

// Whether the GPU writes processed logits for `row` (else it samples from the raw row).
bool gpu_processes(const SamplingRow& row, const SlotSamplingConfig& c) {
  if (row.return_logits || row.forced_token >= 0) return false;
  const bool banning = row.position < c.min_tokens && !c.min_tokens_banned_ids.empty();
  return row.allowed_mask >= 0 || c.has_penalties() || !c.logit_bias.empty() || banning;
}

bool same_float(float got, float want) {
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::abs(got - want) <= 1e-6f * std::max(1.0f, std::abs(want));
}

// Both samplers with the same slots open; runs steps on both and compares.
class Harness {
 public:
  Harness(std::int64_t vocab, std::int64_t max_rows, std::int64_t chunk_rows)
      : vocab_(vocab), chunk_rows_(chunk_rows), host_(vocab), pool_(8) {
    auto device = DeviceSampler::create(
        {.vocab_size = vocab, .max_rows = max_rows, .max_chunk_rows = chunk_rows});
    EXPECT_TRUE(device.ok()) << device.status().to_string();
    if (device.ok()) device_ = std::make_unique<DeviceSampler>(std::move(*device));
  }

  bool ready() const { return device_ != nullptr; }
  DeviceSampler& device() { return *device_; }
  sampling::HostSampler& host() { return host_; }

  void open(std::int32_t slot, const SlotSamplingConfig& config) {
    const Status a = host_.open_slot(slot, config);
    const Status b = device_->open_slot(slot, config, nullptr);
    ASSERT_TRUE(a.ok()) << a.to_string();
    ASSERT_TRUE(b.ok()) << b.to_string();
    if (static_cast<std::size_t>(slot) >= configs_.size()) configs_.resize(slot + 1);
    configs_[static_cast<std::size_t>(slot)] = config;
  }
  void close(std::int32_t slot) {
    host_.close_slot(slot);
    device_->close_slot(slot);
  }
  void accept(std::int32_t slot, const std::vector<std::int32_t>& tokens) {
    host_.accept_tokens(slot, tokens);
    const Status s = device_->accept_tokens(slot, tokens, nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }

  // One step of `batch` over `logits` on both samplers; every difference is an EXPECT failure.
  // Returns the GPU's output.
  StepOutput step(const std::vector<float>& logits, const SamplingBatch& batch,
                  const std::string& what) {
    const auto rows = static_cast<std::int64_t>(batch.rows.size());
    const auto vocab = static_cast<std::size_t>(vocab_);
    // References first: the CPU's processed rows and race leaders, before sample() counts.
    std::vector<RaceTop2> top2(batch.rows.size());
    std::vector<float> cpu_processed(vocab);
    StepOutput gpu;
    DeviceVector<float> d_logits(logits);
    Status s = device_->begin_step(batch, nullptr);
    if (s.ok()) s = device_->stage_masks(batch, nullptr);
    EXPECT_TRUE(s.ok()) << what << ": " << s.to_string();
    if (!s.ok()) return gpu;
    std::vector<float> gpu_processed;
    std::int64_t processed_mismatches = 0;
    for (std::int64_t r0 = 0; r0 < rows; r0 += chunk_rows_) {
      const std::int64_t n = std::min(chunk_rows_, rows - r0);
      s = device_->sample_chunk(d_logits.data() + r0 * vocab_, r0, n, nullptr);
      EXPECT_TRUE(s.ok()) << what << ": " << s.to_string();
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      gpu_processed.resize(static_cast<std::size_t>(n) * vocab);
      EXPECT_EQ(cudaMemcpy(gpu_processed.data(), device_->processed_logits(),
                           gpu_processed.size() * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (std::int64_t i = r0; i < r0 + n; ++i) {
        const SamplingRow& row = batch.rows[static_cast<std::size_t>(i)];
        if (row.return_logits) continue;
        const std::span<const float> raw(logits.data() + i * vocab_, vocab);
        host_.process_row(raw, row, batch, cpu_processed);
        const bool processed = gpu_processes(row, configs_[static_cast<std::size_t>(row.slot)]);
        const float* got = processed ? gpu_processed.data() + (i - r0) * vocab_ : raw.data();
        if (row.forced_token < 0) {
          for (std::size_t v = 0; v < vocab; ++v) {
            if (same_float(got[v], cpu_processed[v])) continue;
            if (processed_mismatches++ < 5) {
              ADD_FAILURE() << what << " row " << i << " token " << v << ": processed " << got[v]
                            << ", CPU " << cpu_processed[v] << " (raw " << raw[v]
                            << (processed ? ")" : ", row not processed on the GPU)");
            }
          }
        }
        if (is_draw(row)) top2[static_cast<std::size_t>(i)] = race_top2(cpu_processed, row);
      }
    }
    EXPECT_EQ(processed_mismatches, 0) << what;
    s = device_->finish_step(nullptr, gpu);
    EXPECT_TRUE(s.ok()) << what << ": " << s.to_string();

    StepOutput cpu;
    host_.sample(logits, batch, &pool_, cpu);
    compare(batch, cpu, gpu, top2, what);
    return gpu;
  }

 private:
  void compare(const SamplingBatch& batch, const StepOutput& cpu, const StepOutput& gpu,
               const std::vector<RaceTop2>& top2, const std::string& what) {
    const std::size_t rows = batch.rows.size();
    ASSERT_EQ(gpu.token_ids.size(), rows) << what;
    ASSERT_EQ(gpu.logprobs.size(), rows) << what;
    EXPECT_EQ(gpu.vocab_size, vocab_);
    EXPECT_EQ(gpu.returned_row, cpu.returned_row) << what;
    EXPECT_TRUE(gpu.returned_logits == cpu.returned_logits) << what << ": returned rows differ";
    int near_ties = 0;
    for (std::size_t i = 0; i < rows; ++i) {
      const SamplingRow& row = batch.rows[i];
      const std::string at = what + " row " + std::to_string(i) + " (T " +
                             std::to_string(row.temperature) + ", top_k " +
                             std::to_string(row.top_k) + ", top_p " + std::to_string(row.top_p) +
                             ", min_p " + std::to_string(row.min_p) + ")";
      if (gpu.token_ids[i] != cpu.token_ids[i]) {
        const RaceTop2& t = top2[i];
        const bool pair = (cpu.token_ids[i] == t.best_id && gpu.token_ids[i] == t.second_id) ||
                          (gpu.token_ids[i] == t.best_id && cpu.token_ids[i] == t.second_id);
        const bool tie = t.best - t.second <= 1e-5f * std::max(1.0f, std::abs(t.best));
        if (is_draw(row) && pair && tie) {
          ++near_ties;
          continue;
        }
        ADD_FAILURE() << at << ": GPU token " << gpu.token_ids[i] << ", CPU " << cpu.token_ids[i]
                      << "; reference race best " << t.best_id << " (" << t.best << "), second "
                      << t.second_id << " (" << t.second << ")";
        continue;
      }
      if (row.return_logits || row.num_logprobs < 0) continue;
      const SampledLogprobs& g = gpu.logprobs[i];
      const SampledLogprobs& c = cpu.logprobs[i];
      EXPECT_EQ(g.token_id, c.token_id) << at;
      EXPECT_NEAR(g.logprob, c.logprob, 1e-4) << at;
      EXPECT_EQ(g.rank, c.rank) << at;
      ASSERT_EQ(g.top.size(), c.top.size()) << at;
      for (std::size_t j = 0; j < c.top.size(); ++j) {
        EXPECT_EQ(g.top[j].first, c.top[j].first) << at << " top " << j;
        EXPECT_NEAR(g.top[j].second, c.top[j].second, 1e-4) << at << " top " << j;
      }
    }
    EXPECT_LE(near_ties, 2) << what << ": too many near-tie differences";
  }

  std::int64_t vocab_;
  std::int64_t chunk_rows_;
  sampling::HostSampler host_;
  cpu::ThreadPool pool_;
  std::unique_ptr<DeviceSampler> device_;
  std::vector<SlotSamplingConfig> configs_;
};

// A batch of `rows` rows over slots 0..rows-1, every kind of row; `offset` shifts which row
// gets which kind, so small batches see different ones.
SamplingBatch make_batch(std::int64_t rows, std::int64_t vocab, int step, int offset,
                         std::mt19937& rng) {
  SamplingBatch batch;
  for (std::int64_t i = 0; i < rows; ++i) {
    const int j = static_cast<int>(i) + offset;
    const Draw& d = kDraws[j % std::size(kDraws)];
    SamplingRow row;
    row.slot = static_cast<std::int32_t>(i);
    row.temperature = d.temperature;
    row.top_k = d.top_k;
    row.top_p = d.top_p;
    row.min_p = d.min_p;
    row.seed = 0x5eed0000ULL + static_cast<std::uint64_t>(j) * 7919ULL;
    row.position = step + j % 3;
    row.num_logprobs = kLogprobs[j % std::size(kLogprobs)];
    if (j % 11 == 10) row.forced_token = static_cast<std::int32_t>((j * 7919) % vocab);
    // A prompt-logprobs row: forced, and not counted for penalties (step 2 would tell).
    if (j % 22 == 21) row.prompt_row = true;
    if (j % 13 == 12) row.return_logits = true;
    if (j % 5 == 3) {
      row.allowed_mask =
          static_cast<std::int32_t>(batch.allowed_masks.size() / SamplingBatch::mask_words(vocab));
      add_mask(j % 15 == 3, vocab, rng, batch.allowed_masks);
    }
    batch.rows.push_back(row);
  }
  return batch;
}

std::vector<float> make_logits(std::int64_t rows, std::int64_t vocab, int offset,
                               std::mt19937& rng) {
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab));
  for (std::int64_t i = 0; i < rows; ++i) {
    fill_row(static_cast<int>(i) + offset, rng,
             std::span<float>(logits.data() + i * vocab, static_cast<std::size_t>(vocab)));
  }
  return logits;
}

struct Shape {
  std::int64_t rows;
  std::int64_t vocab;
};

void PrintTo(const Shape& shape, std::ostream* os) {
  *os << shape.rows << " rows x " << shape.vocab;
}

class GpuSamplerMatchesHost : public ::testing::TestWithParam<Shape> {};

// Two steps of every kind of row; between them some slots accept tokens (verified drafts).
TEST_P(GpuSamplerMatchesHost, DrawForDraw) {
  PAGODA_SKIP_WITHOUT_GPU();
  const auto [rows, vocab] = GetParam();
  std::mt19937 rng(static_cast<std::uint32_t>(rows * 131 + vocab));
  const int offset = static_cast<int>(rng() % 1000);
  Harness h(vocab, rows, std::min<std::int64_t>(rows, 100));
  ASSERT_TRUE(h.ready());
  for (std::int64_t i = 0; i < rows; ++i) {
    h.open(static_cast<std::int32_t>(i), slot_config(static_cast<int>(i) + offset, vocab, rng));
  }
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(vocab - 1));
  for (int step = 0; step < 2; ++step) {
    const std::string what = "rows " + std::to_string(rows) + " vocab " + std::to_string(vocab) +
                             " step " + std::to_string(step);
    const SamplingBatch batch = make_batch(rows, vocab, step, offset, rng);
    const std::vector<float> logits = make_logits(rows, vocab, offset + step, rng);
    h.step(logits, batch, what);
    for (std::int64_t i = 0; i < rows; i += 4) {
      h.accept(static_cast<std::int32_t>(i), {token(rng), token(rng), token(rng)});
    }
  }
}

// The emulation's: fewer rows of the large vocabularies (7 and 33 rows of 49152 still reach the
// candidate paths' overflow, the flat rows' thousands of ties).
INSTANTIATE_TEST_SUITE_P(Shapes, GpuSamplerMatchesHost,
                         ::testing::ValuesIn(gpu_test::pick<Shape>(
                             {Shape{1, 1000}, Shape{7, 1000}, Shape{33, 1000}, Shape{257, 1000},
                              Shape{1, 49152}, Shape{7, 49152}, Shape{33, 49152}, Shape{257, 49152},
                              Shape{1, 151936}, Shape{7, 151936}, Shape{33, 151936},
                              Shape{257, 151936}},
                             {Shape{1, 1000}, Shape{7, 1000}, Shape{257, 1000}, Shape{7, 49152},
                              Shape{33, 49152}, Shape{7, 151936}})),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return "rows" + std::to_string(info.param.rows) + "_vocab" +
                                  std::to_string(info.param.vocab);
                         });

// Overlapped steps: step N+1 begins and ends before step N is collected (end_step /
// collect_step), and every output, logprobs and penalty count included, is what finish_step one
// step at a time gives on a second sampler with the same slots.
TEST(GpuSampler, OverlappedStepsMatchOneAtATime) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::int64_t vocab = 777;
  const std::int64_t rows = 12;
  std::mt19937 rng(9);
  auto one = DeviceSampler::create({.vocab_size = vocab, .max_rows = rows, .max_chunk_rows = 5});
  auto overlapped =
      DeviceSampler::create({.vocab_size = vocab, .max_rows = rows, .max_chunk_rows = 5});
  ASSERT_TRUE(one.ok() && overlapped.ok());
  for (std::int32_t slot = 0; slot < rows; ++slot) {
    const SlotSamplingConfig config = slot_config(slot % 6, vocab, rng);
    ASSERT_TRUE(one->open_slot(slot, config, nullptr).ok());
    ASSERT_TRUE(overlapped->open_slot(slot, config, nullptr).ok());
  }
  const int steps = 5;
  std::vector<DeviceVector<float>> logits;
  std::vector<SamplingBatch> batches(steps);
  for (int step = 0; step < steps; ++step) {
    logits.emplace_back(make_logits(rows, vocab, step, rng));
    for (std::int32_t r = 0; r < rows; ++r) {
      batches[step].rows.push_back({.slot = r,
                                    .temperature = r % 4 == 0 ? 0.0f : 0.9f,
                                    .top_k = r % 3 == 0 ? 20 : 0,
                                    .top_p = r % 2 == 0 ? 0.9f : 1.0f,
                                    .seed = static_cast<std::uint64_t>(r),
                                    .position = step,
                                    .num_logprobs = r % 5 == 0 ? 3 : -1});
    }
  }
  const auto run = [&](DeviceSampler& sampler, int step) {
    ASSERT_TRUE(sampler.begin_step(batches[step], nullptr).ok());
    ASSERT_TRUE(sampler.stage_masks(batches[step], nullptr).ok());
    for (std::int64_t r0 = 0; r0 < rows; r0 += 5) {
      ASSERT_TRUE(sampler
                      .sample_chunk(logits[step].data() + r0 * vocab, r0,
                                    std::min<std::int64_t>(5, rows - r0), nullptr)
                      .ok());
    }
  };
  std::vector<StepOutput> want(steps), got(steps);
  for (int step = 0; step < steps; ++step) {
    run(*one, step);
    ASSERT_TRUE(one->finish_step(nullptr, want[step]).ok());
  }
  // Two in flight from the second step on: end N+1, then collect N.
  StepOutput unused;
  EXPECT_EQ(overlapped->collect_step(unused).code(), StatusCode::kFailedPrecondition);
  run(*overlapped, 0);
  ASSERT_TRUE(overlapped->end_step(nullptr).ok());
  for (int step = 1; step < steps; ++step) {
    run(*overlapped, step);
    ASSERT_TRUE(overlapped->end_step(nullptr).ok());
    EXPECT_EQ(overlapped->steps_in_flight(), 2);
    ASSERT_TRUE(overlapped->collect_step(got[step - 1]).ok());
  }
  // A third would overrun the host buffers: refused, and the two in flight stay collectable.
  run(*overlapped, 0);
  ASSERT_TRUE(overlapped->end_step(nullptr).ok());
  run(*overlapped, 1);
  EXPECT_EQ(overlapped->end_step(nullptr).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(overlapped->collect_step(got[steps - 1]).ok());
  ASSERT_TRUE(overlapped->collect_step(unused).ok());
  EXPECT_EQ(overlapped->steps_in_flight(), 0);
  for (int step = 0; step < steps; ++step) {
    const std::string what = "step " + std::to_string(step);
    EXPECT_EQ(got[step].token_ids, want[step].token_ids) << what;
    ASSERT_EQ(got[step].logprobs.size(), want[step].logprobs.size()) << what;
    for (std::size_t i = 0; i < want[step].logprobs.size(); ++i) {
      EXPECT_EQ(got[step].logprobs[i].logprob, want[step].logprobs[i].logprob) << what;
      EXPECT_EQ(got[step].logprobs[i].top, want[step].logprobs[i].top) << what << " row " << i;
    }
  }
}

// Slots opened and closed in numbers: the bias arena compacts and grows, the penalty pool
// doubles and reuses freed rows; the device state must still match the CPU's.
TEST(GpuSampler, SlotChurnKeepsTheStateRight) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::int64_t vocab = 1000;
  const std::int64_t rows = 48;
  std::mt19937 rng(5);
  Harness h(vocab, rows, rows);
  ASSERT_TRUE(h.ready());
  const auto heavy = [&](int i) {
    SlotSamplingConfig c = slot_config(i % 2 == 0 ? 5 : 1, vocab, rng);
    std::set<std::int32_t> ids;
    for (const auto& b : c.logit_bias) ids.insert(b.first);
    for (std::int32_t id = 0; id < vocab && ids.size() < 150; id += 7) {
      if (ids.insert(id).second) c.logit_bias.emplace_back(id, 0.25f);
    }
    std::sort(c.logit_bias.begin(), c.logit_bias.end());
    return c;
  };
  // Every third slot closes and reopens with the other kind: freed penalty rows are taken again.
  for (int i = 0; i < rows; ++i) h.open(i, heavy(i));
  for (int i = 0; i < rows; i += 3) h.close(i);
  for (int i = 0; i < rows; i += 3) h.open(i, heavy(i + 1));
  for (int i = 0; i < rows; i += 3) h.accept(i, {1, 2, 2, 999});
  for (int step = 0; step < 2; ++step) {
    SamplingBatch batch;
    for (int i = 0; i < rows; ++i) {
      batch.rows.push_back({.slot = i,
                            .temperature = 1.0f,
                            .seed = static_cast<std::uint64_t>(i),
                            .position = step,
                            .num_logprobs = 2});
    }
    h.step(make_logits(rows, vocab, step, rng), batch, "churn step " + std::to_string(step));
  }
}

// 100k draws (2000 on the emulation) over 10 ids with top_k 6: the counts follow the 6
// renormalized probabilities (chi-square, 5 degrees of freedom, critical value 25.7 at p = 1e-4),
// the 4 cut ids never occur, and every draw is the CPU's.
TEST(GpuSampler, DrawsFollowTheRenormalizedDistribution) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::vector<float> row = {0.1f, 2.0f, -1.0f, 1.5f, 0.3f, 1.0f, -0.5f, 0.0f, 2.2f, 0.7f};
  const std::int64_t rows = gpu_test::kEmulated ? 2000 : 100000;
  const float temperature = 0.9f;
  Harness h(10, rows, rows);
  ASSERT_TRUE(h.ready());
  h.open(0, {});
  SamplingBatch batch;
  std::vector<float> logits;
  for (std::int64_t i = 0; i < rows; ++i) {
    batch.rows.push_back(
        {.slot = 0, .temperature = temperature, .top_k = 6, .seed = 1234, .position = i});
    logits.insert(logits.end(), row.begin(), row.end());
  }
  const StepOutput out = h.step(logits, batch, "100k draws");
  ASSERT_EQ(out.token_ids.size(), static_cast<std::size_t>(rows));
  std::vector<double> counts(10, 0.0);
  for (std::int32_t t : out.token_ids) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 10);
    counts[t] += 1.0;
  }
  std::vector<float> sorted = row;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  double total = 0.0;
  for (float l : row) {
    if (l >= sorted[5]) total += std::exp(l / temperature);
  }
  double chi_square = 0.0;
  for (int id = 0; id < 10; ++id) {
    if (row[id] < sorted[5]) {
      EXPECT_EQ(counts[id], 0.0) << "id " << id << " is cut by top-k";
      continue;
    }
    const double expected = rows * std::exp(row[id] / temperature) / total;
    chi_square += (counts[id] - expected) * (counts[id] - expected) / expected;
  }
  EXPECT_LT(chi_square, 25.7);
}

// What begin_step and open_slot refuse, before anything runs.
TEST(GpuSampler, RejectsBadRowsAndSlots) {
  PAGODA_SKIP_WITHOUT_GPU();
  auto made = DeviceSampler::create({.vocab_size = 100, .max_rows = 4, .max_chunk_rows = 4});
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  DeviceSampler& s = *made;
  ASSERT_TRUE(s.open_slot(0, {}, nullptr).ok());
  EXPECT_EQ(s.open_slot(0, {}, nullptr).code(), StatusCode::kInvalidArgument);
  SlotSamplingConfig twice;
  twice.logit_bias = {{3, 1.0f}, {3, 2.0f}};
  EXPECT_EQ(s.open_slot(1, twice, nullptr).code(), StatusCode::kInvalidArgument);
  SlotSamplingConfig outside;
  outside.logit_bias = {{100, 1.0f}};
  EXPECT_EQ(s.open_slot(1, outside, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(s.is_open(1));

  const auto bad = [&](SamplingRow row, std::vector<std::uint32_t> masks = {}) {
    SamplingBatch b;
    b.rows = {row};
    b.allowed_masks = std::move(masks);
    return s.begin_step(b, nullptr).code();
  };
  EXPECT_EQ(bad({.slot = 1}), StatusCode::kInvalidArgument);  // not open
  EXPECT_EQ(bad({.slot = 0, .forced_token = 100}), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({.slot = 0, .num_logprobs = 21}), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({.slot = 0, .allowed_mask = 1}, std::vector<std::uint32_t>(4, ~0u)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({.slot = 0}, std::vector<std::uint32_t>(3, ~0u)),
            StatusCode::kInvalidArgument);  // not a whole mask
  SamplingBatch five;
  five.rows.assign(5, SamplingRow{.slot = 0});
  EXPECT_EQ(s.begin_step(five, nullptr).code(), StatusCode::kInvalidArgument);
  // A returned row needs no open slot.
  EXPECT_TRUE(
      s.begin_step({.rows = {SamplingRow{.slot = 7, .return_logits = true}}}, nullptr).ok());
}

// Structured outputs fill their masks while the forward pass runs: masks written only when
// stage_masks() waits for them (after begin_step) are the ones the device applies.
TEST(GpuSampler, MasksFilledAfterBeginStepAreApplied) {
  PAGODA_SKIP_WITHOUT_GPU();
  constexpr std::int64_t kVocab = 100;
  auto made = DeviceSampler::create({.vocab_size = kVocab, .max_rows = 2, .max_chunk_rows = 2});
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  DeviceSampler& s = *made;
  ASSERT_TRUE(s.open_slot(0, {}, nullptr).ok());
  // Token 7 has the largest logit in both rows; the late masks allow only 42 and 63.
  std::vector<float> logits(2 * kVocab, 0.0f);
  logits[7] = logits[kVocab + 7] = 10.0f;
  struct LateMasks final : PendingMasks {
    SamplingBatch* batch = nullptr;
    int waits = 0;
    void wait() override {
      ++waits;
      const std::size_t words = static_cast<std::size_t>(SamplingBatch::mask_words(kVocab));
      std::fill(batch->allowed_masks.begin(), batch->allowed_masks.end(), 0u);
      batch->allowed_masks[42 / 32] |= 1u << (42 % 32);
      batch->allowed_masks[words + 63 / 32] |= 1u << (63 % 32);
    }
  } late;
  SamplingBatch batch;
  batch.rows = {SamplingRow{.slot = 0, .allowed_mask = 0},
                SamplingRow{.slot = 0, .temperature = 1.0f, .seed = 3, .allowed_mask = 1}};
  batch.allowed_masks.assign(2 * SamplingBatch::mask_words(kVocab), ~0u);  // not final yet
  late.batch = &batch;
  batch.pending_masks = &late;
  ASSERT_TRUE(s.begin_step(batch, nullptr).ok());
  ASSERT_TRUE(s.stage_masks(batch, nullptr).ok());
  EXPECT_EQ(late.waits, 1);
  DeviceVector<float> d_logits(logits);
  ASSERT_TRUE(s.sample_chunk(d_logits.data(), 0, 2, nullptr).ok());
  StepOutput out;
  ASSERT_TRUE(s.finish_step(nullptr, out).ok());
  EXPECT_EQ(out.token_ids, (std::vector<std::int32_t>{42, 63}));
}

}  // namespace
}  // namespace pagoda
