#include "api/sampling_fields.h"

#include <chrono>
#include <cmath>
#include <random>

#include "engine/stop_string_matcher.h"
#include "pagoda/sampling_params.h"

namespace pagoda::api {

namespace {

// A token id from a logit_bias key: decimal digits only, as OpenAI writes them.
std::optional<std::int64_t> parse_token_id_key(const std::string& key) {
  if (key.empty() || key.size() > 10) return {};
  std::int64_t id = 0;
  for (const char c : key) {
    if (c < '0' || c > '9') return {};
    id = id * 10 + (c - '0');
  }
  return id;
}

void read_logit_bias(RequestFields& fields, const ServedModel& model, SamplingParams& sampling) {
  const Json* bias = fields.object("logit_bias");
  if (bias == nullptr) return;
  for (const auto& [key, value] : bias->items()) {
    const std::optional<std::int64_t> id = parse_token_id_key(key);
    if (!id) {
      fields.fail("logit_bias",
                  "'logit_bias' keys must be token ids written as decimal strings "
                  "(\"50256\"), got \"" +
                      key + "\"");
      return;
    }
    if (*id >= model.vocab_size) {
      fields.fail("logit_bias", "'logit_bias' names token id " + key +
                                    ", outside the vocabulary [0, " +
                                    std::to_string(model.vocab_size) + ")");
      return;
    }
    if (!value.is_number()) {
      fields.fail("logit_bias", "'logit_bias' values must be numbers, got " +
                                    json_type_name(value) + " for token " + key);
      return;
    }
    const double b = value.get<double>();
    if (!(b >= -100.0 && b <= 100.0)) {
      fields.fail("logit_bias", "'logit_bias' values must be in [-100, 100], got " +
                                    format_number(b) + " for token " + key);
      return;
    }
    sampling.logit_bias[static_cast<std::int32_t>(*id)] = b;
  }
}

void read_stop(RequestFields& fields, engine::EngineRequest& request) {
  const Json* stop = fields.find("stop");
  if (stop == nullptr || !fields.ok()) return;
  if (stop->is_string()) {
    request.stop = {stop->get<std::string>()};
  } else if (stop->is_array()) {
    for (const Json& s : *stop) {
      if (!s.is_string()) {
        fields.fail("stop", "'stop' must be a string or a list of strings, got a list holding " +
                                json_type_name(s));
        return;
      }
      request.stop.push_back(s.get<std::string>());
    }
  } else {
    fields.fail("stop",
                "'stop' must be a string or a list of strings, got " + json_type_name(*stop));
    return;
  }
  if (Status s = engine::StopStringMatcher::validate(request.stop); !s.ok()) {
    fields.fail("stop", s.message());
  }
}

void read_stop_token_ids(RequestFields& fields, const ServedModel& model,
                         engine::EngineRequest& request) {
  const Json* ids = fields.array("stop_token_ids");
  if (ids == nullptr) return;
  for (const Json& id : *ids) {
    const std::optional<std::int64_t> value = json_integer(id);
    if (!value || *value < 0 || *value >= model.vocab_size) {
      fields.fail("stop_token_ids", "'stop_token_ids' must hold token ids in [0, " +
                                        std::to_string(model.vocab_size) + "), got " + id.dump());
      return;
    }
    request.stop_token_ids.push_back(static_cast<std::int32_t>(*value));
  }
}

void read_seed(RequestFields& fields, SamplingParams& sampling) {
  const Json* seed = fields.find("seed");
  if (seed == nullptr || !fields.ok()) return;
  // Any 64-bit value, signed or not (vLLM's range); negatives wrap to their bit pattern.
  if (seed->is_number_unsigned()) {
    sampling.seed = seed->get<std::uint64_t>();
  } else if (const std::optional<std::int64_t> s = json_integer(*seed)) {
    sampling.seed = static_cast<std::uint64_t>(*s);
  } else {
    fields.fail("seed", "'seed' must be a 64-bit integer, got " + seed->dump());
  }
}

// max_reasoning_tokens (a number of tokens) or reasoning_effort (low / medium / high, mapped by
// the server's budgets); the explicit number wins when both are given.
void read_reasoning_fields(RequestFields& fields, const ServedModel& model,
                           engine::EngineRequest& request) {
  const std::optional<std::int64_t> max_tokens = fields.integer("max_reasoning_tokens", 0);
  const std::optional<std::string> effort = fields.string("reasoning_effort");
  if (!max_tokens && !effort) return;
  if (!model.reasoning) {
    fields.fail(max_tokens ? "max_reasoning_tokens" : "reasoning_effort",
                "this model has no reasoning span; start the server with --reasoning-parser to "
                "budget it");
    return;
  }
  if (max_tokens) {
    request.max_reasoning_tokens = *max_tokens;
    return;
  }
  if (*effort == "low") {
    request.max_reasoning_tokens = model.reasoning->low;
  } else if (*effort == "medium") {
    request.max_reasoning_tokens = model.reasoning->medium;
  } else if (*effort == "high") {
    request.max_reasoning_tokens = model.reasoning->high;
  } else {
    fields.fail(
        "reasoning_effort",
        "'reasoning_effort' must be \"low\", \"medium\" or \"high\", got \"" + *effort + "\"");
  }
}

}  // namespace

void read_response_fields(RequestFields& fields, const ServedModel& model,
                          const RequestContext& context, std::string_view id_prefix,
                          ResponseOptions& response) {
  response.model = model.name();
  if (std::optional<std::string> name = fields.string("model")) {
    if (!model.serves(*name)) fields.fail(ApiError::model_not_found(*name));
    response.model = std::move(*name);
  }
  response.stream = fields.boolean("stream").value_or(false);
  if (const Json* options = fields.object("stream_options")) {
    if (!response.stream) {
      fields.fail("stream_options", "'stream_options' can only be given when 'stream' is true");
    }
    RequestFields stream_fields(*options, "stream_options.");
    response.include_usage = stream_fields.boolean("include_usage").value_or(false);
    if (stream_fields.error()) fields.fail(*stream_fields.error());
  }
  response.id = context.id.empty() ? random_response_id(id_prefix) : context.id;
  response.created = context.created != 0 ? context.created : unix_time_now();
}

void read_sampling_fields(RequestFields& fields, const ServedModel& model,
                          engine::EngineRequest& request) {
  SamplingParams& s = request.sampling;
  const GenerationDefaults& defaults = model.generation;
  if (defaults.temperature) s.temperature = *defaults.temperature;
  if (defaults.do_sample && !*defaults.do_sample) s.temperature = 0.0;
  if (defaults.top_p) s.top_p = *defaults.top_p;
  if (defaults.top_k) s.top_k = *defaults.top_k;
  if (defaults.min_p) s.min_p = *defaults.min_p;
  if (defaults.repetition_penalty) s.repetition_penalty = *defaults.repetition_penalty;

  if (auto v = fields.number_in("temperature", 0.0, kMaxTemperature)) s.temperature = *v;
  if (auto v = fields.number_in("top_p", 0.0, 1.0)) {
    if (*v == 0.0) fields.fail("top_p", "'top_p' must be in (0, 1], got 0");
    s.top_p = *v;
  }
  if (auto v = fields.integer("top_k", -1)) s.top_k = *v;
  if (auto v = fields.number_in("min_p", 0.0, 1.0)) s.min_p = *v;
  if (auto v = fields.number_in("presence_penalty", -2.0, 2.0)) s.presence_penalty = *v;
  if (auto v = fields.number_in("frequency_penalty", -2.0, 2.0)) s.frequency_penalty = *v;
  if (auto v = fields.number("repetition_penalty")) {
    if (!(*v > 0.0) || !std::isfinite(*v)) {
      fields.fail("repetition_penalty",
                  "'repetition_penalty' must be a number > 0 (1 is off), "
                  "got " +
                      format_number(*v));
    }
    s.repetition_penalty = *v;
  }
  read_logit_bias(fields, model, s);
  read_seed(fields, s);
  if (auto v = fields.integer("n", 1, SamplingParams::kMaxN)) s.n = *v;
  if (auto v = fields.integer("min_tokens", 0)) s.min_tokens = *v;

  read_stop(fields, request);
  read_stop_token_ids(fields, model, request);
  request.ignore_eos = fields.boolean("ignore_eos").value_or(false);
  request.skip_special_tokens = fields.boolean("skip_special_tokens").value_or(true);
  request.include_stop_str_in_output = fields.boolean("include_stop_str_in_output").value_or(false);
  if (auto v = fields.integer("priority", std::numeric_limits<std::int32_t>::min(),
                              std::numeric_limits<std::int32_t>::max())) {
    request.priority = static_cast<std::int32_t>(*v);
  }
  if (auto v = fields.string("cache_salt")) {
    if (v->empty()) fields.fail("cache_salt", "'cache_salt' must not be empty when given");
    request.cache_salt = std::move(*v);
  }
  read_reasoning_fields(fields, model, request);
  // Pagoda's own: trace this request (as the X-Pagoda-Trace header does).
  if (fields.boolean("trace").value_or(false)) request.trace = true;
  // Accepted for compatibility; OpenAI uses it for abuse monitoring, which a local server has not.
  (void)fields.string("user");
  if (fields.boolean("use_beam_search").value_or(false)) {
    fields.fail("use_beam_search", "beam search is not supported");
  }
}

std::optional<ApiError> fit_context(const ContextFit& fit, const ServedModel& model,
                                    engine::EngineRequest& request) {
  const std::int64_t limit = model.max_model_len;
  const std::string prompt_where = fit.prompt_param == "messages" ? "messages" : "prompt";
  if (fit.num_prompt_tokens >= limit) {
    return ApiError::invalid_request(
        "This model's maximum context length is " + std::to_string(limit) +
            " tokens. However, your request has " + std::to_string(fit.num_prompt_tokens) +
            " input tokens, which leaves no room for a completion. Please reduce the length of "
            "the " +
            prompt_where + ".",
        std::string(fit.prompt_param));
  }
  const std::int64_t room = limit - fit.num_prompt_tokens;
  if (fit.requested_max_tokens) {
    const std::int64_t wanted = *fit.requested_max_tokens;
    if (wanted > room) {
      return ApiError::invalid_request(
          "This model's maximum context length is " + std::to_string(limit) +
              " tokens. However, you requested " + std::to_string(fit.num_prompt_tokens + wanted) +
              " tokens (" + std::to_string(fit.num_prompt_tokens) + " in the " + prompt_where +
              ", " + std::to_string(wanted) +
              " in the completion). Please reduce the length of "
              "the " +
              prompt_where + " or completion.",
          std::string(fit.max_tokens_param));
    }
    request.max_tokens = wanted;
  } else if (fit.default_max_tokens) {
    request.max_tokens = std::min(*fit.default_max_tokens, room);
  } else {
    request.max_tokens.reset();
  }
  const std::int64_t max_tokens = request.max_tokens.value_or(room);
  if (request.sampling.min_tokens > max_tokens) {
    return ApiError::invalid_request(
        "'min_tokens' (" + std::to_string(request.sampling.min_tokens) +
            ") is greater than the most tokens this request may generate (" +
            std::to_string(max_tokens) + ")",
        "min_tokens");
  }
  return std::nullopt;
}

std::string random_response_id(std::string_view prefix) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = generator();
    for (int i = 0; i < 16; ++i, bits >>= 4) id.push_back(kHex[bits & 0xF]);
  }
  return id;
}

std::int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace pagoda::api
