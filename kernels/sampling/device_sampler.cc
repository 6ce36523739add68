#include "kernels/sampling/device_sampler.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

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

DeviceSampler::HostStep::HostStep(HostStep&& other) noexcept {
  *this = std::move(other);
}

DeviceSampler::HostStep& DeviceSampler::HostStep::operator=(HostStep&& other) noexcept {
  if (this != &other) {
    if (done != nullptr) cudaEventDestroy(done);
    input = std::move(other.input);
    output = std::move(other.output);
    returned = std::move(other.returned);
    done = std::exchange(other.done, nullptr);
    num_rows = other.num_rows;
    masks_offset = other.masks_offset;
    records_offset = other.records_offset;
    num_logprobs_rows = other.num_logprobs_rows;
    returned_row = std::move(other.returned_row);
    num_returned = other.num_returned;
    d2h_bytes = other.d2h_bytes;
  }
  return *this;
}

DeviceSampler::HostStep::~HostStep() {
  if (done != nullptr) cudaEventDestroy(done);
}

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
  PAGODA_ASSIGN_OR_RETURN(s.output_device_, cuda::DeviceBuffer::allocate(output_bytes));
  s.steps_.resize(kHostSteps);
  for (HostStep& step : s.steps_) {
    PAGODA_ASSIGN_OR_RETURN(step.output, cuda::PinnedHostBuffer::allocate(output_bytes));
    PAGODA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&step.done, cudaEventDisableTiming));
    PAGODA_RETURN_IF_ERROR(s.reserve_input(
        step, aligned16(static_cast<std::size_t>(options.max_rows) * sizeof(RowRecord))));
  }
  return s;
}

std::int64_t DeviceSampler::device_bytes() const {
  return static_cast<std::int64_t>(processed_.bytes() + input_device_.bytes() +
                                   output_device_.bytes()) +
         slots_.device_bytes();
}

// Grows a step's input buffer (rows and masks), and the device one with it; called before the
// step's rows are packed. (Freeing the old device buffer waits for the device: rare.)
Status DeviceSampler::reserve_input(HostStep& step, std::size_t bytes) {
  if (bytes > step.input.bytes()) {
    const std::size_t capacity = std::max(bytes, 2 * step.input.bytes());
    PAGODA_ASSIGN_OR_RETURN(step.input, cuda::PinnedHostBuffer::allocate(capacity));
  }
  if (bytes > input_device_.bytes()) {
    PAGODA_ASSIGN_OR_RETURN(input_device_, cuda::DeviceBuffer::allocate(step.input.bytes()));
  }
  return Status::ok_status();
}

Status DeviceSampler::reserve_returned(HostStep& step, std::size_t floats) {
  if (floats * sizeof(float) <= step.returned.bytes()) return Status::ok_status();
  const std::size_t capacity = std::max(floats * sizeof(float), 2 * step.returned.bytes());
  PAGODA_ASSIGN_OR_RETURN(step.returned, cuda::PinnedHostBuffer::allocate(capacity));
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
  // This step's host buffers are free: at most kMaxStepsInFlight others are in flight.
  HostStep& step = current();
  PAGODA_RETURN_IF_ERROR(reserve_input(step, total));
  auto* records = step.input.as<RowRecord>();
  std::int64_t num_logprobs_rows = 0;
  std::int64_t num_returned = 0;
  std::vector<std::int32_t>& returned_row = step.returned_row;
  returned_row.assign(static_cast<std::size_t>(num_rows), -1);
  for (std::int64_t i = 0; i < num_rows; ++i) {
    const SamplingRow& row = batch.rows[static_cast<std::size_t>(i)];
    RowRecord r;
    if (row.return_logits) {
      r.flags = kRowReturnLogits;
      returned_row[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(num_returned++);
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
    if (slot->penalty_row >= 0 && !row.prompt_row) r.flags |= kRowCountToken;
    records[i] = r;
  }
  if (rows_bytes > 0) {
    PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(input_device_.data(), step.input.data(), rows_bytes,
                                                cudaMemcpyHostToDevice, stream));
  }
  PAGODA_RETURN_IF_ERROR(reserve_returned(
      step, static_cast<std::size_t>(num_returned) * static_cast<std::size_t>(vocab)));
  step.num_rows = num_rows;
  step.masks_offset = masks_offset;
  step.records_offset = records_offset(num_rows);
  step.num_logprobs_rows = num_logprobs_rows;
  step.num_returned = num_returned;
  return Status::ok_status();
}

Status DeviceSampler::stage_masks(const SamplingBatch& batch, cudaStream_t stream) {
  batch.wait_for_masks();
  if (batch.allowed_masks.empty()) return Status::ok_status();
  HostStep& step = current();
  const std::size_t bytes = batch.allowed_masks.size() * sizeof(std::uint32_t);
  std::memcpy(step.input.as<std::uint8_t>() + step.masks_offset, batch.allowed_masks.data(), bytes);
  PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(input_device_.as<std::uint8_t>() + step.masks_offset,
                                              step.input.as<std::uint8_t>() + step.masks_offset,
                                              bytes, cudaMemcpyHostToDevice, stream));
  return Status::ok_status();
}

Status DeviceSampler::sample_chunk(const float* logits, std::int64_t first_row,
                                   std::int64_t num_rows, cudaStream_t stream) {
  const HostStep& step = current();
  if (first_row < 0 || num_rows < 0 || first_row + num_rows > step.num_rows ||
      num_rows > options_.max_chunk_rows) {
    return invalid_argument("sample_chunk: rows [" + std::to_string(first_row) + ", " +
                            std::to_string(first_row + num_rows) + ") of a step of " +
                            std::to_string(step.num_rows) + ", chunks of at most " +
                            std::to_string(options_.max_chunk_rows));
  }
  if (num_rows == 0) return Status::ok_status();
  const std::int64_t vocab = options_.vocab_size;
  const RowRecord* host = step.rows() + first_row;
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
                                                                 step.masks_offset),
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
                                                  step.records_offset)},
        stream));
  }
  // Returned rows: one copy per run of consecutive ones (draft rows sit together).
  const auto row_bytes = static_cast<std::size_t>(vocab) * sizeof(float);
  for (std::int64_t i = 0; i < num_rows;) {
    const std::int32_t first_returned = step.returned_row[static_cast<std::size_t>(first_row + i)];
    if (first_returned < 0) {
      ++i;
      continue;
    }
    std::int64_t run = 1;
    while (i + run < num_rows &&
           step.returned_row[static_cast<std::size_t>(first_row + i + run)] >= 0) {
      ++run;
    }
    PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        step.returned.as<float>() + static_cast<std::int64_t>(first_returned) * vocab,
        logits + i * vocab, static_cast<std::size_t>(run) * row_bytes, cudaMemcpyDeviceToHost,
        stream));
    i += run;
  }
  return Status::ok_status();
}

Status DeviceSampler::finish_step(cudaStream_t stream, StepOutput& out) {
  PAGODA_RETURN_IF_ERROR(end_step(stream));
  return collect_step(out);
}

Status DeviceSampler::end_step(cudaStream_t stream) {
  if (in_flight_ >= kMaxStepsInFlight) {
    return Status(StatusCode::kFailedPrecondition,
                  "end_step: " + std::to_string(in_flight_) + " steps are already in flight");
  }
  HostStep& step = current();
  const std::int64_t vocab = options_.vocab_size;
  bool any_counted = false;
  for (std::int64_t i = 0; i < step.num_rows; ++i) {
    any_counted |= (step.rows()[i].flags & kRowCountToken) != 0u;
  }
  if (any_counted) {
    PAGODA_RETURN_IF_ERROR(launch_count_tokens({.rows = input_device_.as<RowRecord>(),
                                                .tokens = output_device_.as<std::int32_t>(),
                                                .slots = slots_.arrays(),
                                                .num_rows = step.num_rows,
                                                .vocab_size = vocab},
                                               stream));
  }
  const std::size_t bytes =
      step.num_logprobs_rows > 0
          ? step.records_offset +
                static_cast<std::size_t>(step.num_logprobs_rows) * sizeof(LogprobsRecord)
          : static_cast<std::size_t>(step.num_rows) * sizeof(std::int32_t);
  if (bytes > 0) {
    PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(step.output.data(), output_device_.data(), bytes,
                                                cudaMemcpyDeviceToHost, stream));
  }
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventRecord(step.done, stream));
  step.d2h_bytes = static_cast<std::int64_t>(bytes) +
                   step.num_returned * vocab * static_cast<std::int64_t>(sizeof(float));
  last_step_rows_ = step.num_rows;
  current_ = (current_ + 1) % kHostSteps;
  ++in_flight_;
  return Status::ok_status();
}

Status DeviceSampler::collect_step(StepOutput& out) {
  if (in_flight_ == 0) {
    return Status(StatusCode::kFailedPrecondition, "collect_step: no step is in flight");
  }
  HostStep& step = steps_[(current_ - in_flight_ + kHostSteps) % kHostSteps];
  --in_flight_;
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(step.done));
  last_step_d2h_bytes_ = step.d2h_bytes;
  const std::int64_t vocab = options_.vocab_size;
  const auto n = static_cast<std::size_t>(step.num_rows);
  const auto* tokens = step.output.as<std::int32_t>();
  const auto* records =
      reinterpret_cast<const LogprobsRecord*>(step.output.as<std::uint8_t>() + step.records_offset);
  out.vocab_size = vocab;
  out.token_ids.assign(tokens, tokens + n);
  out.returned_row.assign(step.returned_row.begin(), step.returned_row.end());
  out.logprobs.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const RowRecord& row = step.rows()[i];
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
  const float* returned = step.returned.as<float>();
  out.returned_logits.assign(returned, returned + step.num_returned * vocab);
  return Status::ok_status();
}

}  // namespace pagoda::kernels
