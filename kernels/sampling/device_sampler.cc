#include "kernels/sampling/device_sampler.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/sampling/logits_processing.h"
#include "kernels/sampling/logprobs.h"
#include "kernels/sampling/sampling.h"

namespace pagoda::kernels {

namespace {

std::size_t aligned16(std::size_t bytes) {
  return (bytes + 15) & ~std::size_t{15};
}

// The output buffers: tokens padded to 16 bytes, then one logprobs record per row.
std::size_t records_offset(std::int64_t num_rows) {
  return aligned16(static_cast<std::size_t>(num_rows) * sizeof(std::int32_t));
}

}  // namespace

StatusOr<DeviceSampler> DeviceSampler::create(const DeviceSamplerOptions& options) {
  if (options.vocab_size <= 0 || options.vocab_size >= 0x7fffffff || options.max_rows <= 0 ||
      options.max_chunk_rows <= 0) {
    return invalid_argument("DeviceSampler needs a vocabulary and positive row limits");
  }
  DeviceSampler s;
  s.options_ = options;
  s.slots_ = SamplingSlotTable(options.vocab_size);
  PAGODA_ASSIGN_OR_RETURN(
      s.processed_,
      cuda::DeviceBuffer::allocate(
          static_cast<std::size_t>(options.max_chunk_rows * options.vocab_size) * sizeof(float)));
  const std::size_t output_bytes =
      records_offset(options.max_rows) +
      static_cast<std::size_t>(options.max_rows) * sizeof(LogprobsRecord);
  PAGODA_ASSIGN_OR_RETURN(s.output_host_, cuda::PinnedHostBuffer::allocate(output_bytes));
  PAGODA_ASSIGN_OR_RETURN(s.output_device_, cuda::DeviceBuffer::allocate(output_bytes));
  PAGODA_RETURN_IF_ERROR(
      s.reserve_input(aligned16(static_cast<std::size_t>(options.max_rows) * sizeof(RowRecord))));
  return s;
}

std::int64_t DeviceSampler::device_bytes() const {
  return static_cast<std::int64_t>(processed_.bytes() + input_device_.bytes() +
                                   output_device_.bytes()) +
         slots_.device_bytes();
}

// Grows the input buffers (rows and masks); called before the step's rows are packed.
Status DeviceSampler::reserve_input(std::size_t bytes) {
  if (bytes <= input_host_.bytes()) return Status::ok_status();
  const std::size_t capacity = std::max(bytes, 2 * input_host_.bytes());
  PAGODA_ASSIGN_OR_RETURN(input_host_, cuda::PinnedHostBuffer::allocate(capacity));
  PAGODA_ASSIGN_OR_RETURN(input_device_, cuda::DeviceBuffer::allocate(capacity));
  return Status::ok_status();
}

Status DeviceSampler::reserve_returned(std::size_t floats) {
  if (floats * sizeof(float) <= returned_host_.bytes()) return Status::ok_status();
  const std::size_t capacity = std::max(floats * sizeof(float), 2 * returned_host_.bytes());
  PAGODA_ASSIGN_OR_RETURN(returned_host_, cuda::PinnedHostBuffer::allocate(capacity));
  return Status::ok_status();
}

Status DeviceSampler::begin_step(const SamplingBatch& batch, cudaStream_t stream) {
  const std::int64_t vocab = options_.vocab_size;
  const auto num_rows = static_cast<std::int64_t>(batch.rows.size());
  if (num_rows > options_.max_rows) {
    return invalid_argument("a step of " + std::to_string(num_rows) +
                            " sampling rows exceeds the sampler's " +
                            std::to_string(options_.max_rows));
  }
  const auto words = static_cast<std::size_t>(SamplingBatch::mask_words(vocab));
  if (batch.allowed_masks.size() % words != 0) {
    return invalid_argument("allowed_masks holds " + std::to_string(batch.allowed_masks.size()) +
                            " words, not whole masks of " + std::to_string(words));
  }
  const auto num_masks = static_cast<std::int64_t>(batch.allowed_masks.size() / words);
  const std::size_t rows_bytes = static_cast<std::size_t>(num_rows) * sizeof(RowRecord);
  const std::size_t masks_offset = aligned16(rows_bytes);
  const std::size_t total = masks_offset + batch.allowed_masks.size() * sizeof(std::uint32_t);
  PAGODA_RETURN_IF_ERROR(reserve_input(total));

  // The host buffer is free: the previous step ended with a stream sync.
  auto* records = input_host_.as<RowRecord>();
  std::int64_t num_logprobs_rows = 0;
  std::int64_t num_returned = 0;
  returned_row_.assign(static_cast<std::size_t>(num_rows), -1);
  for (std::int64_t i = 0; i < num_rows; ++i) {
    const SamplingRow& row = batch.rows[static_cast<std::size_t>(i)];
    RowRecord r;
    if (row.return_logits) {
      r.flags = kRowReturnLogits;
      returned_row_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(num_returned++);
      records[i] = r;
      continue;
    }
    const SlotRecord* slot = slots_.record(row.slot);
    if (slot == nullptr) {
      return invalid_argument("sampling row " + std::to_string(i) + ": slot " +
                              std::to_string(row.slot) + " is not open");
    }
    if (row.forced_token >= vocab) {
      return invalid_argument("sampling row " + std::to_string(i) + ": forced token " +
                              std::to_string(row.forced_token) + " is outside the vocabulary");
    }
    if (row.num_logprobs > kMaxLogprobs) {
      return invalid_argument("sampling row " + std::to_string(i) + " asks for " +
                              std::to_string(row.num_logprobs) + " logprobs; at most " +
                              std::to_string(kMaxLogprobs));
    }
    if (row.allowed_mask >= num_masks) {
      return invalid_argument("sampling row " + std::to_string(i) + ": allowed mask " +
                              std::to_string(row.allowed_mask) + " of " +
                              std::to_string(num_masks));
    }
    r.seed = row.seed;
    r.position = row.position;
    r.slot = row.slot;
    r.temperature = row.temperature;
    r.top_k = row.top_k > 0 && row.top_k < vocab ? row.top_k : 0;
    r.top_p = row.top_p;
    r.min_p = row.min_p;
    r.forced_token = row.forced_token;
    r.num_logprobs = row.num_logprobs;
    r.allowed_mask = row.allowed_mask;
    if (row.num_logprobs >= 0) r.logprobs_index = static_cast<std::int32_t>(num_logprobs_rows++);
    const bool banning = row.position < slot->min_tokens && slot->banned_count > 0;
    const bool sparse = slot->bias_count > 0 || banning;
    // A forced token needs no processed logits (its logprobs come from the raw ones).
    if (row.forced_token < 0 && (sparse || row.allowed_mask >= 0 || slot->penalty_row >= 0)) {
      r.flags |= kRowProcessed | (sparse ? kRowSparse : 0u);
    }
    if (slot->penalty_row >= 0) r.flags |= kRowCountToken;
    records[i] = r;
  }
  if (!batch.allowed_masks.empty()) {
    std::memcpy(input_host_.as<std::uint8_t>() + masks_offset, batch.allowed_masks.data(),
                batch.allowed_masks.size() * sizeof(std::uint32_t));
  }
  if (total > 0) {
    PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(input_device_.data(), input_host_.data(), total,
                                                cudaMemcpyHostToDevice, stream));
  }
  PAGODA_RETURN_IF_ERROR(
      reserve_returned(static_cast<std::size_t>(num_returned) * static_cast<std::size_t>(vocab)));
  num_rows_ = num_rows;
  masks_offset_ = masks_offset;
  records_offset_ = records_offset(num_rows);
  num_logprobs_rows_ = num_logprobs_rows;
  num_returned_ = num_returned;
  return Status::ok_status();
}

Status DeviceSampler::sample_chunk(const float* logits, std::int64_t first_row,
                                   std::int64_t num_rows, cudaStream_t stream) {
  if (first_row < 0 || num_rows < 0 || first_row + num_rows > num_rows_ ||
      num_rows > options_.max_chunk_rows) {
    return invalid_argument("sample_chunk: rows [" + std::to_string(first_row) + ", " +
                            std::to_string(first_row + num_rows) + ") of a step of " +
                            std::to_string(num_rows_) + ", chunks of at most " +
                            std::to_string(options_.max_chunk_rows));
  }
  if (num_rows == 0) return Status::ok_status();
  const std::int64_t vocab = options_.vocab_size;
  const RowRecord* host = host_rows() + first_row;
  bool any_processed = false;
  bool any_logprobs = false;
  for (std::int64_t i = 0; i < num_rows; ++i) {
    any_processed |= (host[i].flags & kRowProcessed) != 0u;
    any_logprobs |= host[i].logprobs_index >= 0;
  }
  const auto* rows = input_device_.as<RowRecord>() + first_row;
  auto* tokens = output_device_.as<std::int32_t>() + first_row;
  if (any_processed) {
    PAGODA_RETURN_IF_ERROR(launch_process_logits(
        {.logits = logits,
         .processed = processed_.as<float>(),
         .rows = rows,
         .allowed_masks = reinterpret_cast<const std::uint32_t*>(input_device_.as<std::uint8_t>() +
                                                                 masks_offset_),
         .slots = slots_.arrays(),
         .num_rows = num_rows,
         .vocab_size = vocab},
        stream));
  }
  PAGODA_RETURN_IF_ERROR(launch_sample_tokens({.logits = logits,
                                               .processed = processed_.as<float>(),
                                               .rows = rows,
                                               .num_rows = num_rows,
                                               .vocab_size = vocab,
                                               .out_tokens = tokens},
                                              stream));
  if (any_logprobs) {
    PAGODA_RETURN_IF_ERROR(launch_compute_logprobs(
        {.logits = logits,
         .rows = rows,
         .tokens = tokens,
         .num_rows = num_rows,
         .vocab_size = vocab,
         .out = reinterpret_cast<LogprobsRecord*>(output_device_.as<std::uint8_t>() +
                                                  records_offset_)},
        stream));
  }
  // Returned rows: one copy per run of consecutive ones (draft rows sit together).
  const auto row_bytes = static_cast<std::size_t>(vocab) * sizeof(float);
  for (std::int64_t i = 0; i < num_rows;) {
    const std::int32_t first_returned = returned_row_[static_cast<std::size_t>(first_row + i)];
    if (first_returned < 0) {
      ++i;
      continue;
    }
    std::int64_t run = 1;
    while (i + run < num_rows &&
           returned_row_[static_cast<std::size_t>(first_row + i + run)] >= 0) {
      ++run;
    }
    PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        returned_host_.as<float>() + static_cast<std::int64_t>(first_returned) * vocab,
        logits + i * vocab, static_cast<std::size_t>(run) * row_bytes, cudaMemcpyDeviceToHost,
        stream));
    i += run;
  }
  return Status::ok_status();
}

Status DeviceSampler::finish_step(cudaStream_t stream, StepOutput& out) {
  const std::int64_t vocab = options_.vocab_size;
  const auto* tokens_device = output_device_.as<std::int32_t>();
  bool any_counted = false;
  for (std::int64_t i = 0; i < num_rows_; ++i) {
    any_counted |= (host_rows()[i].flags & kRowCountToken) != 0u;
  }
  if (any_counted) {
    PAGODA_RETURN_IF_ERROR(launch_count_tokens({.rows = input_device_.as<RowRecord>(),
                                                .tokens = tokens_device,
                                                .slots = slots_.arrays(),
                                                .num_rows = num_rows_,
                                                .vocab_size = vocab},
                                               stream));
  }
  const std::size_t bytes =
      num_logprobs_rows_ > 0
          ? records_offset_ + static_cast<std::size_t>(num_logprobs_rows_) * sizeof(LogprobsRecord)
          : static_cast<std::size_t>(num_rows_) * sizeof(std::int32_t);
  if (bytes > 0) {
    PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(output_host_.data(), output_device_.data(), bytes,
                                                cudaMemcpyDeviceToHost, stream));
  }
  PAGODA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  last_step_d2h_bytes_ = static_cast<std::int64_t>(bytes) +
                         num_returned_ * vocab * static_cast<std::int64_t>(sizeof(float));

  const auto n = static_cast<std::size_t>(num_rows_);
  const auto* tokens = output_host_.as<std::int32_t>();
  const auto* records =
      reinterpret_cast<const LogprobsRecord*>(output_host_.as<std::uint8_t>() + records_offset_);
  out.vocab_size = vocab;
  out.token_ids.assign(tokens, tokens + n);
  out.returned_row.assign(returned_row_.begin(), returned_row_.end());
  out.logprobs.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const RowRecord& row = host_rows()[i];
    SampledLogprobs& lp = out.logprobs[i];
    lp.token_id = tokens[i];
    lp.top.clear();
    if (row.logprobs_index < 0) {
      lp.logprob = 0.0f;
      lp.rank = 0;
      continue;
    }
    const LogprobsRecord& record = records[row.logprobs_index];
    lp.logprob = record.logprob;
    lp.rank = record.rank;
    const int num_top =
        std::min<std::int64_t>({row.num_logprobs, vocab, static_cast<std::int64_t>(kMaxLogprobs)});
    for (int j = 0; j < num_top; ++j) {
      lp.top.emplace_back(record.top_ids[j], record.top_logprobs[j]);
    }
  }
  const float* returned = returned_host_.as<float>();
  out.returned_logits.assign(returned, returned + num_returned_ * vocab);
  return Status::ok_status();
}

}  // namespace pagoda::kernels
