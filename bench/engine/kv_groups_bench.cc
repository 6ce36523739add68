// KV memory of a model with sliding-window layers, one table for every layer against per-group
// tables (kv_cache_manager.h), measured on the real KvCacheManager (no model runs: the blocks a
// request holds depend only on its tokens and the steps that schedule them).
//
//   pagoda_bench_kv_groups MODEL [--element-bytes 4] [--budget-gib 4] [--block-size 16]
//
// Prints (1) the blocks and bytes one request holds after prefilling `--long-tokens` (32,768)
// tokens in `--chunk` (2,048) token steps and decoding one more, and (2) how many requests of
// `--concurrent-tokens` (8,192) a KV budget of `--budget-gib` holds at once, each prefilled the
// same way and one decode step in: the pool sized by kv_cache_sizing.h, requests admitted until
// the manager refuses one.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/kv_cache_sizing.h"
#include "model/model_files.h"
#include "models/architecture.h"
#include "models/kv_cache_groups.h"

namespace pagoda::engine {
namespace {

struct Options {
  std::string model;
  std::int64_t element_bytes = 4;  // fp32, the CPU cache; 2 for bf16 on CUDA
  double budget_gib = 4.0;
  std::int64_t block_size = 16;
  std::int64_t long_tokens = 32768;
  std::int64_t concurrent_tokens = 8192;
  std::int64_t chunk = 2048;
  std::int64_t max_num_seqs = 256;
};

std::vector<std::int32_t> prompt_of(std::int64_t n, std::int32_t salt) {
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    prompt[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 31 + salt * 7919) % 32000);
  }
  return prompt;
}

// Prefills `request` in chunks, then decodes one token, as the scheduler would; false when the
// manager cannot hold it.
bool run_request(KvCacheManager& kv, Request& request, std::int64_t chunk) {
  while (request.num_computed_tokens() < request.num_tokens()) {
    const std::int64_t n = std::min(chunk, request.num_tokens() - request.num_computed_tokens());
    if (!kv.allocate_slots(request, n)) return false;
    request.set_num_computed_tokens(request.num_computed_tokens() + n);
  }
  request.append_output_token(1);
  kv.update_block_hashes(request);
  if (!kv.allocate_slots(request, 1)) return false;
  request.set_num_computed_tokens(request.num_tokens());
  return true;
}

// Every group's held blocks, each a page of the pool.
std::int64_t held_blocks(const KvCacheManager& kv, const Request& request) {
  std::int64_t blocks = 0;
  for (std::size_t g = 0; g < kv.num_groups(); ++g) blocks += kv.num_held_blocks(request, g);
  return blocks;
}

int run(const Options& o) {
  auto files = open_model_config(o.model);
  if (!files.ok()) files = open_model_files(o.model);
  if (!files.ok()) {
    std::fprintf(stderr, "%s\n", files.status().to_string().c_str());
    return 1;
  }
  const ModelConfig& config = files->config;
  auto architecture = models::architecture_of(config);
  if (!architecture.ok()) {
    std::fprintf(stderr, "%s\n", architecture.status().to_string().c_str());
    return 1;
  }
  ModelExecutorInfo info;
  info.num_layers = config.num_hidden_layers;
  info.num_kv_heads = config.num_key_value_heads;
  info.head_dim = config.head_dim;
  models::set_kv_cache_groups(**architecture, config, info);
  const std::int64_t per_block = kv_block_bytes(info, o.block_size, o.element_bytes);
  std::printf(
      "%s: %lld layers (%lld full, %lld sliding, window %lld), %lld KV heads x %lld, "
      "%lld-byte elements, block_size %lld\n",
      o.model.c_str(), static_cast<long long>(info.num_layers),
      static_cast<long long>(info.num_layers_in_kv_group(0)),
      static_cast<long long>(info.num_layers - info.num_layers_in_kv_group(0)),
      static_cast<long long>(info.num_kv_groups() > 1 ? info.kv_group_windows[1] : 0),
      static_cast<long long>(info.num_kv_heads), static_cast<long long>(info.head_dim),
      static_cast<long long>(o.element_bytes), static_cast<long long>(o.block_size));
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const auto budget = static_cast<std::int64_t>(o.budget_gib * gib);
  for (const bool groups : {false, true}) {
    const char* name = groups ? "per-group tables" : "one table       ";
    const KvSizingLimits limits{.block_size = o.block_size,
                                .max_model_len = o.long_tokens + 1,
                                .max_num_seqs = o.max_num_seqs,
                                .max_num_batched_tokens = o.chunk,
                                .single_group = !groups};
    // (1) One long request in a pool that holds it whatever the layout.
    CacheConfig cache;
    cache.block_size = o.block_size;
    size_kv_groups(std::int64_t{64} << 30, per_block, info, limits, cache);
    KvCacheManager kv(cache);
    Request request("long", prompt_of(o.long_tokens, 1));
    kv.update_block_hashes(request);
    if (!run_request(kv, request, o.chunk)) {
      std::fprintf(stderr, "the long request did not fit\n");
      return 1;
    }
    const std::int64_t page = kv_page_bytes(info, per_block, !groups);
    std::printf(
        "%s  %lld-token request: %lld blocks of %lld bytes held (%lld full + %lld "
        "sliding), %.4f GiB of KV\n",
        name, static_cast<long long>(request.num_tokens()),
        static_cast<long long>(held_blocks(kv, request)), static_cast<long long>(page),
        static_cast<long long>(kv.num_held_blocks(request, 0)),
        static_cast<long long>(held_blocks(kv, request) - kv.num_held_blocks(request, 0)),
        static_cast<double>(held_blocks(kv, request) * page) / gib);
    // (2) As many concurrent requests as the budget holds.
    CacheConfig fixed;
    fixed.block_size = o.block_size;
    size_kv_groups(budget, per_block, info,
                   {.block_size = o.block_size,
                    .max_model_len = o.concurrent_tokens + 1,
                    .max_num_seqs = o.max_num_seqs,
                    .max_num_batched_tokens = o.chunk,
                    .single_group = !groups},
                   fixed);
    KvCacheManager pool(fixed);
    std::vector<std::unique_ptr<Request>> running;
    for (std::int32_t i = 0; i < 100000; ++i) {
      auto r = std::make_unique<Request>("r" + std::to_string(i),
                                         prompt_of(o.concurrent_tokens - 1, i + 2));
      pool.update_block_hashes(*r);
      const bool fits = run_request(pool, *r, o.chunk);
      if (!fits) {
        pool.free(*r);
        break;
      }
      running.push_back(std::move(r));
    }
    std::printf(
        "%s  %.2f GiB budget: %lld blocks of %lld bytes; %zu concurrent %lld-token "
        "requests\n",
        name, o.budget_gib, static_cast<long long>(fixed.num_blocks),
        static_cast<long long>(kv_page_bytes(info, per_block, !groups)), running.size(),
        static_cast<long long>(o.concurrent_tokens));
  }
  return 0;
}

}  // namespace
}  // namespace pagoda::engine

int main(int argc, char** argv) {
  pagoda::engine::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--element-bytes") {
      o.element_bytes = std::atoll(next());
    } else if (arg == "--budget-gib") {
      o.budget_gib = std::atof(next());
    } else if (arg == "--block-size") {
      o.block_size = std::atoll(next());
    } else if (arg == "--long-tokens") {
      o.long_tokens = std::atoll(next());
    } else if (arg == "--concurrent-tokens") {
      o.concurrent_tokens = std::atoll(next());
    } else if (arg == "--chunk") {
      o.chunk = std::atoll(next());
    } else if (arg == "--max-num-seqs") {
      o.max_num_seqs = std::atoll(next());
    } else if (o.model.empty()) {
      o.model = arg;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (o.model.empty()) {
    std::fprintf(stderr,
                 "usage: pagoda_bench_kv_groups MODEL [--element-bytes 4] "
                 "[--budget-gib 4] [--block-size 16]\n");
    return 2;
  }
  return pagoda::engine::run(o);
}
