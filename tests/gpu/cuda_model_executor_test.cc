// The whole model on the GPU against the CPU executor's op set on the same random weights:
// small Llama (GQA 2, tied embeddings) and Qwen2 (QKV bias, GQA 4) models with head_dim 64,
// driven through mixed prefill/decode steps: chunked prefill beside a decode, then pure decode
// steps (the split-K decode kernel). Both sides are fed the CPU's greedy tokens.
//
//   FP32: logits within 1e-4 relative L2 (fp32 sums in another order; no TF32) and the same argmax
//         at every step.
//   BF16: the CPU runs the bf16-rounded weights in fp32, so the difference is the GPU's bf16
//         activations: about one rounding (u = 2^-8) per op, ~20 ops deep -> <= 5e-2 relative L2;
//         the argmax must agree wherever the CPU's top two logits are further apart than 4x the
//         step's largest logit difference (vLLM's check_logprobs_close idea: a tie within noise
//         may flip).
//
// execute() (sampling beside the logits) on a random FP32 checkpoint that both executors load
// from the same safetensors file: every kind of sampling row over several steps, the CUDA
// executor's tokens against the CPU executor's (a token may differ only where the two logits
// rows' difference can flip the reference race), and against the CPU sampler run on the CUDA
// executor's own logits (then draw for draw), with the bytes each step copies to the host.
#include "models/cuda_model_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <numeric>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/thread_pool.h"
#include "kernels/sampling/sampling_layout.h"
#include "model/model_files.h"
#include "models/architecture.h"
#include "models/cpu_decoder_ops.h"
#include "models/cpu_model_executor.h"
#include "sampling/host_sampler.h"
#include "sampling/random_draw.h"
#include "sampling/sampler.h"
#include "tests/gpu/executor_vs_cpu.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/random_llama.h"

namespace pagoda {
namespace {

using cuda::ScalarType;

using gpu_test::make_batch;
using gpu_test::make_model;
using gpu_test::SequenceState;

// The random Llama (qwen2: Qwen2) model against the CPU; `act_order`: every layer matrix with
// a random input permutation of its own (GPTQ act-order's stored column order).
void run_against_cpu(bool qwen2, ScalarType type, bool act_order = false) {
  const auto model = make_model(qwen2, type, qwen2 ? 7u : 8u);
  if (act_order) gpu_test::permute_inputs(*model, 12u);
  gpu_test::run_against_cpu(model->config, model->weights, type,
                            type == ScalarType::kF32 ? 1e-4 : 5e-2, qwen2 ? "qwen2" : "llama");
}

// The uploader puts act-order columns back in input order: the same logits as the CPU, which
// gathers x through the permutation instead.
TEST(GpuCudaModelExecutor, ActOrderWeightsMatchCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(true, ScalarType::kF32, true);
}

TEST(GpuCudaModelExecutor, LlamaFp32MatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(false, ScalarType::kF32);
}

TEST(GpuCudaModelExecutor, Qwen2Fp32MatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(true, ScalarType::kF32);
}

TEST(GpuCudaModelExecutor, LlamaBf16MatchesCpuWithinBf16Noise) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(false, ScalarType::kBF16);
}

TEST(GpuCudaModelExecutor, Qwen2Bf16MatchesCpuWithinBf16Noise) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(true, ScalarType::kBF16);
}

// The profiling pass leaves a positive block budget and the executor runs after it.
TEST(GpuCudaModelExecutor, ProfilingSizesTheKvCache) {
  PAGODA_SKIP_WITHOUT_GPU();
  const auto model = make_model(false, ScalarType::kF32, 9u);
  auto gpu = models::CudaModelExecutor::create_from_weights(
      model->config, model->weights,
      {.dtype = ScalarType::kBF16, .max_num_batched_tokens = 256, .max_model_len = 512});
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  auto blocks = (*gpu)->profile_num_kv_blocks(0.5, 16);
  ASSERT_TRUE(blocks.ok()) << blocks.status().to_string();
  EXPECT_GT(*blocks, 0);
  // More memory allowed, more blocks.
  auto more = (*gpu)->profile_num_kv_blocks(0.9, 16);
  ASSERT_TRUE(more.ok());
  EXPECT_GT(*more, *blocks);
}

// ---- execute(): sampling beside the logits ------------------------------------------------

namespace fs = std::filesystem;

// A random Llama checkpoint (config.json and one FP32 safetensors file) in a temporary folder, so
// the CPU and CUDA executors load the same weights through their own loaders. Vocabulary 1000:
// no multiple of 32 or of the GPU's tiles.
class RandomCheckpoint {
 public:
  explicit RandomCheckpoint(std::uint32_t seed) {
    dir_ = fs::temp_directory_path() /
           ("pagoda_gpu_exec_" + std::to_string(seed) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json")
        << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
              "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 1000,
              "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "tie_word_embeddings": false, "torch_dtype": "float32", "bos_token_id": 1,
              "eos_token_id": 2})";
    std::mt19937 rng(seed);
    const float h = 2.0f / std::sqrt(256.0f);
    add("model.embed_tokens.weight", {1000, 256}, rng, -1.0f, 1.0f);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      add(p + "input_layernorm.weight", {256}, rng, 0.8f, 1.2f);
      add(p + "self_attn.q_proj.weight", {256, 256}, rng, -h, h);
      add(p + "self_attn.k_proj.weight", {128, 256}, rng, -h, h);
      add(p + "self_attn.v_proj.weight", {128, 256}, rng, -h, h);
      add(p + "self_attn.o_proj.weight", {256, 256}, rng, -h, h);
      add(p + "post_attention_layernorm.weight", {256}, rng, 0.8f, 1.2f);
      add(p + "mlp.gate_proj.weight", {512, 256}, rng, -h, h);
      add(p + "mlp.up_proj.weight", {512, 256}, rng, -h, h);
      add(p + "mlp.down_proj.weight", {256, 512}, rng, -h / std::sqrt(2.0f), h / std::sqrt(2.0f));
    }
    add("model.norm.weight", {256}, rng, 0.8f, 1.2f);
    // Logits with a spread of a few units, so top-p and min-p cut something.
    add("lm_head.weight", {1000, 256}, rng, -3.0f * h, 3.0f * h);
    write_safetensors();
    auto opened = open_model_files(dir_.string());
    EXPECT_TRUE(opened.ok()) << opened.status().to_string();
    if (opened.ok()) files = std::make_shared<const ModelFiles>(std::move(*opened));
  }
  ~RandomCheckpoint() {
    files.reset();
    fs::remove_all(dir_);
  }

  std::shared_ptr<const ModelFiles> files;

 private:
  void add(const std::string& name, std::vector<std::uint64_t> shape, std::mt19937& rng, float low,
           float high) {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    tensors_.push_back({name, std::move(shape),
                        gpu_test::random_vector(static_cast<std::size_t>(n), rng, low, high)});
  }
  void write_safetensors() {
    std::string header = "{";
    std::uint64_t offset = 0;
    for (const Tensor& t : tensors_) {
      const std::uint64_t bytes = t.data.size() * sizeof(float);
      header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name +
                "\":{\"dtype\":\"F32\",\"shape\":[";
      for (std::size_t i = 0; i < t.shape.size(); ++i) {
        header += (i ? "," : "") + std::to_string(t.shape[i]);
      }
      header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
                std::to_string(offset + bytes) + "]}";
      offset += bytes;
    }
    header += "}";
    while ((header.size() + 8) % 16 != 0) header += ' ';  // data 16-byte aligned in the file
    std::ofstream out(dir_ / "model.safetensors", std::ios::binary);
    const std::uint64_t size = header.size();
    out.write(reinterpret_cast<const char*>(&size), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const Tensor& t : tensors_) {
      out.write(reinterpret_cast<const char*>(t.data.data()),
                static_cast<std::streamsize>(t.data.size() * sizeof(float)));
    }
  }

  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::vector<float> data;
  };
  fs::path dir_;
  std::vector<Tensor> tensors_;
};

// One request of the scenario: its prompt, its slot's settings and its row template.
struct Request {
  std::vector<std::int32_t> prompt;
  SlotSamplingConfig config;
  SamplingRow row;
};

// Five requests covering the row kinds: greedy with logprobs; top-k + top-p with penalties;
// min-p with bias, min_tokens and (on even steps) an allowed mask; top-k with presence and a
// forced token at step 3; and draft verification (return_logits), fed its own argmax.
std::vector<Request> scenario(std::int64_t vocab, std::mt19937& rng) {
  const auto prompt = [&](int n) {
    std::vector<std::int32_t> p(static_cast<std::size_t>(n));
    for (auto& t : p) t = static_cast<std::int32_t>(rng() % vocab);
    return p;
  };
  std::vector<Request> r(5);
  r[0].prompt = prompt(13);
  r[0].row = {.temperature = 0.0f, .num_logprobs = 5};
  r[1].prompt = prompt(29);
  r[1].config.presence_penalty = 0.5f;
  r[1].config.frequency_penalty = 0.3f;
  r[1].config.repetition_penalty = 1.2f;
  r[1].config.prompt_token_ids = r[1].prompt;
  r[1].row = {.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .num_logprobs = -1};
  r[2].prompt = prompt(7);
  r[2].config.logit_bias = {{5, 2.0f}, {17, -3.0f}, {400, 1.5f}};
  r[2].config.min_tokens = 3;
  r[2].config.min_tokens_banned_ids = {2, 17};
  r[2].row = {.temperature = 1.0f, .min_p = 0.1f, .num_logprobs = 0};
  r[3].prompt = prompt(40);
  r[3].config.presence_penalty = 1.0f;
  r[3].row = {.temperature = 0.7f, .top_k = 50, .num_logprobs = 20};
  r[4].prompt = prompt(5);
  r[4].row = {.return_logits = true};
  for (std::size_t i = 0; i < r.size(); ++i) {
    r[i].row.slot = static_cast<std::int32_t>(i);
    r[i].row.seed = 1000 + i;
  }
  return r;
}

// The step's rows for `requests` at output position `position` (step 0 is the prompts).
SamplingBatch sampling_batch(const std::vector<Request>& requests, int position,
                             std::int64_t vocab) {
  SamplingBatch b;
  for (const Request& q : requests) {
    SamplingRow row = q.row;
    row.position = position;
    if (row.slot == 3 && position == 3) row.forced_token = 77;
    if (row.slot == 2 && position % 2 == 0) {
      row.allowed_mask = 0;
      for (std::int64_t w = 0; w < SamplingBatch::mask_words(vocab); ++w) {
        b.allowed_masks.push_back(0x5a5a5a5au ^ static_cast<std::uint32_t>(w * 2654435761u));
      }
    }
    b.rows.push_back(row);
  }
  return b;
}

// Token v's score in the reference race over processed logits `l`: s[v] + its Gumbel noise.
float race_score(std::span<const float> l, const SamplingRow& row, std::int32_t v) {
  return l[static_cast<std::size_t>(v)] * (1.0f / row.temperature) +
         sampling::token_gumbel(sampling::draw_key(row.seed, row.position),
                                static_cast<std::uint32_t>(v));
}

bool is_draw(const SamplingRow& row) {
  return !row.return_logits && row.forced_token < 0 && row.temperature > 0.0f && row.top_k != 1;
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max<double>(d, std::abs(a[i] - b[i]));
  return d;
}

// The d2h bytes DeviceSampler's layout implies: tokens (padded when logprobs follow), one record
// per logprobs row, the returned rows.
std::int64_t expected_d2h_bytes(const SamplingBatch& b, std::int64_t vocab) {
  std::int64_t logprobs = 0;
  std::int64_t returned = 0;
  for (const SamplingRow& row : b.rows) {
    if (row.return_logits) {
      ++returned;
    } else if (row.num_logprobs >= 0) {
      ++logprobs;
    }
  }
  const auto rows = static_cast<std::int64_t>(b.rows.size());
  const std::int64_t ids =
      logprobs > 0 ? (rows * 4 + 15) / 16 * 16 +
                         logprobs * static_cast<std::int64_t>(sizeof(kernels::LogprobsRecord))
                   : rows * 4;
  return ids + returned * vocab * 4;
}

// Drives `requests` through prefill and decode steps on executors `a` (the reference) and `b`,
// feeding both a's tokens, and calls check(step, batch, sampling, out_a, out_b) per step. Each
// executor runs forward() first, so the check sees both logits (rewriting the same KV).
template <typename Check>
void drive(ModelExecutor& a, ModelExecutor& b, std::vector<Request>& requests, int steps,
           Check check) {
  const std::int64_t vocab = a.info().vocab_size;
  const std::int64_t block_size = 16;
  const std::int64_t max_blocks = 8;
  for (ModelExecutor* e : {&a, &b}) {
    ASSERT_TRUE(
        e->allocate_kv_cache(static_cast<std::int64_t>(requests.size()) * max_blocks, block_size)
            .ok());
    for (const Request& q : requests) {
      const Status s = e->open_sampling_slot(q.row.slot, q.config);
      ASSERT_TRUE(s.ok()) << s.to_string();
    }
  }
  std::vector<SequenceState> seqs(requests.size());
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    for (std::int64_t j = 0; j < max_blocks; ++j) {
      seqs[i].blocks.push_back(static_cast<std::int32_t>(i * max_blocks + j));
    }
  }
  std::vector<std::vector<std::int32_t>> tokens;
  for (const Request& q : requests) tokens.push_back(q.prompt);
  for (int step = 0; step < steps; ++step) {
    const ForwardBatch batch = make_batch(seqs, tokens, block_size, max_blocks);
    const SamplingBatch sampling = sampling_batch(requests, step, vocab);
    const auto rows = static_cast<std::size_t>(batch.num_logits());
    std::vector<float> logits_a(rows * vocab), logits_b(rows * vocab);
    ASSERT_TRUE(a.forward(batch, logits_a.data()).ok());
    ASSERT_TRUE(b.forward(batch, logits_b.data()).ok());
    StepOutput out_a, out_b;
    Status s = a.execute(batch, sampling, out_a);
    ASSERT_TRUE(s.ok()) << s.to_string();
    s = b.execute(batch, sampling, out_b);
    ASSERT_TRUE(s.ok()) << s.to_string();
    check(step, sampling, logits_a, logits_b, out_a, out_b);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      std::int32_t next = out_a.token_ids[i];
      if (sampling.rows[i].return_logits) {
        // A verified draft: its argmax is taken, and both executors count it as accepted.
        next = static_cast<std::int32_t>(sampling::argmax(out_a.logits(i)));
        a.accept_tokens(sampling.rows[i].slot, std::span(&next, 1));
        b.accept_tokens(sampling.rows[i].slot, std::span(&next, 1));
      }
      tokens[i] = {next};
    }
  }
}

TEST(GpuCudaModelExecutor, ExecuteSamplesLikeTheCpuExecutor) {
  PAGODA_SKIP_WITHOUT_GPU();
  RandomCheckpoint checkpoint(11);
  ASSERT_NE(checkpoint.files, nullptr);
  auto cpu = models::CpuModelExecutor::create(
      checkpoint.files, {.num_threads = 2, .max_num_batched_tokens = 128, .max_model_len = 128});
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto gpu = models::CudaModelExecutor::create(checkpoint.files, {.dtype = ScalarType::kF32,
                                                                  .max_num_batched_tokens = 128,
                                                                  .max_num_seqs = 8,
                                                                  .max_model_len = 128});
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const std::int64_t vocab = (*cpu)->info().vocab_size;
  std::mt19937 rng(12);
  std::vector<Request> requests = scenario(vocab, rng);
  // The CPU executor's sampler, mirrored: its processed rows say which differences a logits
  // difference of `noise` can explain.
  sampling::HostSampler mirror(vocab);
  for (const Request& q : requests) ASSERT_TRUE(mirror.open_slot(q.row.slot, q.config).ok());
  std::vector<bool> diverged(requests.size(), false);
  int differences = 0;
  drive(**cpu, **gpu, requests, 10,
        [&](int step, const SamplingBatch& sampling, const std::vector<float>& cpu_logits,
            const std::vector<float>& gpu_logits, const StepOutput& want, const StepOutput& got) {
          std::vector<float> processed(static_cast<std::size_t>(vocab));
          std::vector<std::vector<float>> rows_processed;
          for (std::size_t i = 0; i < sampling.rows.size(); ++i) {
            const std::span<const float> raw(cpu_logits.data() + i * vocab, vocab);
            if (!sampling.rows[i].return_logits) {
              mirror.process_row(raw, sampling.rows[i], sampling, processed);
            }
            rows_processed.push_back(processed);
          }
          StepOutput mirrored;
          mirror.sample(cpu_logits, sampling, nullptr, mirrored);
          EXPECT_EQ(mirrored.token_ids, want.token_ids) << "the mirror is the CPU's sampler";
          for (std::size_t i = 0; i < sampling.rows.size(); ++i) {
            if (!sampling.rows[i].return_logits) continue;
            const auto next = static_cast<std::int32_t>(sampling::argmax(want.logits(i)));
            mirror.accept_tokens(sampling.rows[i].slot, std::span(&next, 1));
          }
          for (std::size_t i = 0; i < sampling.rows.size(); ++i) {
            const SamplingRow& row = sampling.rows[i];
            const std::string at =
                "step " + std::to_string(step) + " slot " + std::to_string(row.slot);
            const std::span<const float> cl(cpu_logits.data() + i * vocab, vocab);
            const std::span<const float> gl(gpu_logits.data() + i * vocab, vocab);
            const double noise = max_abs_diff(cl, gl);
            EXPECT_LT(noise, 1e-3) << at;
            if (row.return_logits) {
              ASSERT_EQ(got.logits(i).size(), static_cast<std::size_t>(vocab)) << at;
              // The same rows as forward()'s (bitwise unless cuBLASLt reduces in another order).
              EXPECT_LE(max_abs_diff(got.logits(i), gl), 1e-5) << at << ": returned != forward";
              continue;
            }
            if (diverged[i]) continue;
            if (got.token_ids[i] != want.token_ids[i]) {
              // Explained only by the logits' difference: both tokens kept by the reference and
              // their race scores (or, greedy, their logits) within 4x the noise.
              const std::vector<float>& l = rows_processed[i];
              const std::int32_t a = want.token_ids[i], b = got.token_ids[i];
              bool explained = false;
              if (!is_draw(row)) {
                explained = row.forced_token < 0 && std::abs(l[a] - l[b]) <= 4.0 * noise;
              } else {
                const std::vector<bool> kept = sampling::kept_tokens_reference(l, row);
                explained = kept[a] && kept[b] &&
                            std::abs(race_score(l, row, a) - race_score(l, row, b)) <=
                                4.0 * noise / row.temperature + 1e-5;
              }
              EXPECT_TRUE(explained)
                  << at << ": GPU token " << b << ", CPU " << a << ", logits noise " << noise;
              ++differences;
              diverged[i] = true;  // its penalty counts differ from here on
              continue;
            }
            if (row.num_logprobs < 0) continue;
            const SampledLogprobs& g = got.logprobs[i];
            const SampledLogprobs& c = want.logprobs[i];
            EXPECT_NEAR(g.logprob, c.logprob, 2e-3) << at;
            const float chosen = cl[want.token_ids[i]];
            std::int64_t near = 0;
            for (float x : cl) near += std::abs(x - chosen) <= 4.0 * noise ? 1 : 0;
            EXPECT_LE(std::abs(g.rank - c.rank), near) << at;
            ASSERT_EQ(g.top.size(), c.top.size()) << at;
            for (std::size_t j = 0; j < c.top.size(); ++j) {
              EXPECT_NEAR(g.top[j].second, c.top[j].second, 2e-3) << at << " top " << j;
              if (g.top[j].first != c.top[j].first) {
                EXPECT_LE(std::abs(cl[g.top[j].first] - cl[c.top[j].first]), 4.0 * noise)
                    << at << " top " << j;
              }
            }
          }
        });
  EXPECT_LE(differences, 1) << "more differences than FP32 noise explains";
}

// The CUDA executor's execute() against the CPU sampler run on its own forward() logits: the
// same logits, so the same tokens draw for draw (up to a 1e-5 near tie of the race, where logf
// and std::log may round apart), logprobs within 1e-4 and the same ranks and top ids; and each
// step copies to the host only ids, logprobs and the returned row.
TEST(GpuCudaModelExecutor, ExecuteMatchesTheHostSamplerOnItsOwnLogits) {
  PAGODA_SKIP_WITHOUT_GPU();
  RandomCheckpoint checkpoint(13);
  ASSERT_NE(checkpoint.files, nullptr);
  const models::CudaExecutorOptions options{.dtype = ScalarType::kF32,
                                            .max_num_batched_tokens = 128,
                                            .max_num_seqs = 8,
                                            .max_model_len = 128};
  auto gpu = models::CudaModelExecutor::create(checkpoint.files, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  // A second executor on the same weights carries the sampling state of the reference side.
  auto twin = models::CudaModelExecutor::create(checkpoint.files, options);
  ASSERT_TRUE(twin.ok()) << twin.status().to_string();
  const std::int64_t vocab = (*gpu)->info().vocab_size;
  std::mt19937 rng(14);
  std::vector<Request> requests = scenario(vocab, rng);
  sampling::HostSampler host(vocab);
  for (const Request& q : requests) ASSERT_TRUE(host.open_slot(q.row.slot, q.config).ok());
  int near_ties = 0;
  drive(**twin, **gpu, requests, 10,
        [&](int step, const SamplingBatch& sampling, const std::vector<float>&,
            const std::vector<float>& gpu_logits, const StepOutput&, const StepOutput& got) {
          std::vector<std::vector<float>> processed(sampling.rows.size(),
                                                    std::vector<float>(vocab));
          for (std::size_t i = 0; i < sampling.rows.size(); ++i) {
            if (sampling.rows[i].return_logits) continue;
            host.process_row({gpu_logits.data() + i * vocab, static_cast<std::size_t>(vocab)},
                             sampling.rows[i], sampling, processed[i]);
          }
          StepOutput want;
          host.sample(gpu_logits, sampling, nullptr, want);
          // The twin fed the reference's accepted tokens, so keep the host sampler level.
          for (std::size_t i = 0; i < sampling.rows.size(); ++i) {
            if (!sampling.rows[i].return_logits) continue;
            const auto next = static_cast<std::int32_t>(sampling::argmax(want.logits(i)));
            host.accept_tokens(sampling.rows[i].slot, std::span(&next, 1));
          }
          EXPECT_EQ((*gpu)->last_step_d2h_bytes(), expected_d2h_bytes(sampling, vocab))
              << "step " << step;
          EXPECT_EQ(got.returned_row, want.returned_row);
          ASSERT_EQ(got.returned_logits.size(), want.returned_logits.size());
          EXPECT_LE(max_abs_diff(got.returned_logits, want.returned_logits), 1e-5)
              << "step " << step << ": returned rows are not forward()'s";
          for (std::size_t i = 0; i < sampling.rows.size(); ++i) {
            const SamplingRow& row = sampling.rows[i];
            const std::string at =
                "step " + std::to_string(step) + " slot " + std::to_string(row.slot);
            if (got.token_ids[i] != want.token_ids[i]) {
              const std::vector<float>& l = processed[i];
              const std::vector<bool> kept = sampling::kept_tokens_reference(l, row);
              const std::int32_t a = want.token_ids[i], b = got.token_ids[i];
              const float sa = race_score(l, row, a), sb = race_score(l, row, b);
              EXPECT_TRUE(is_draw(row) && kept[a] && kept[b] &&
                          std::abs(sa - sb) <= 1e-5f * std::max(1.0f, std::abs(sa)))
                  << at << ": GPU token " << b << ", CPU sampler " << a;
              ++near_ties;
              continue;
            }
            if (row.return_logits || row.num_logprobs < 0) continue;
            const SampledLogprobs& g = got.logprobs[i];
            const SampledLogprobs& c = want.logprobs[i];
            EXPECT_EQ(g.token_id, c.token_id) << at;
            EXPECT_NEAR(g.logprob, c.logprob, 1e-4) << at;
            EXPECT_EQ(g.rank, c.rank) << at;
            ASSERT_EQ(g.top.size(), c.top.size()) << at;
            for (std::size_t j = 0; j < c.top.size(); ++j) {
              EXPECT_EQ(g.top[j].first, c.top[j].first) << at << " top " << j;
              EXPECT_NEAR(g.top[j].second, c.top[j].second, 1e-4) << at << " top " << j;
            }
          }
        });
  EXPECT_LE(near_ties, 1);
}

}  // namespace
}  // namespace pagoda
