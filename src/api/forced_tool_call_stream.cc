#include "api/forced_tool_call_stream.h"

#include <utility>

namespace pagoda::api {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// A complete JSON string token (quotes included) decoded; nullopt when it is not one.
std::optional<std::string> decode_string(const std::string& token) {
  const Json value = Json::parse(token, nullptr, /*allow_exceptions=*/false);
  if (!value.is_string()) return std::nullopt;
  return value.get<std::string>();
}

}  // namespace

ForcedToolCallStream::ForcedToolCallStream(ToolCallFormat format)
    : format_(std::move(format)), state_(State::kBeforeList) {}

std::vector<ForcedToolCallDelta> ForcedToolCallStream::feed(std::string_view text) {
  std::vector<ForcedToolCallDelta> out;
  if (text.empty()) return out;
  if (format_.function_name) {
    // The whole output is the one call's arguments.
    ForcedToolCallDelta& delta = delta_for(0, out);
    if (num_named_ == 0) {
      delta.name = *format_.function_name;
      num_named_ = 1;
    }
    delta.arguments = std::string(text);
    return out;
  }
  for (const char c : text) step(c, out);
  return out;
}

ForcedToolCallDelta& ForcedToolCallStream::delta_for(std::size_t index,
                                                     std::vector<ForcedToolCallDelta>& out) {
  if (out.empty() || out.back().index != index) out.push_back({.index = index});
  return out.back();
}

void ForcedToolCallStream::emit_arguments(std::string_view fragment,
                                          std::vector<ForcedToolCallDelta>& out) {
  if (num_named_ > call_) {
    delta_for(call_, out).arguments += fragment;
  } else {
    held_ += fragment;
  }
}

bool ForcedToolCallStream::value_step(char c, bool& consumed) {
  consumed = true;
  if (!started_value_) {
    started_value_ = true;
    if (c == '{' || c == '[') {
      depth_ = 1;
    } else if (c == '"') {
      in_string_ = true;
    } else {
      scalar_ = true;
    }
    return false;
  }
  if (in_string_) {
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      in_string_ = false;
      return depth_ == 0;
    }
    return false;
  }
  if (scalar_) {
    if (c == ',' || c == '}' || c == ']' || is_space(c)) {
      consumed = false;
      return true;
    }
    return false;
  }
  if (c == '"') {
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    ++depth_;
  } else if (c == '}' || c == ']') {
    return --depth_ == 0;
  }
  return false;
}

void ForcedToolCallStream::step(char c, std::vector<ForcedToolCallDelta>& out) {
  switch (state_) {
    case State::kBeforeList:
      if (is_space(c)) return;
      state_ = c == '[' ? State::kBetweenCalls : State::kDone;
      return;
    case State::kBetweenCalls:
      if (is_space(c) || c == ',') return;
      if (c == '{') {
        held_.clear();
        state_ = State::kBeforeKey;
      } else {
        state_ = State::kDone;  // ']' or something the grammar does not write
      }
      return;
    case State::kBeforeKey:
      if (is_space(c) || c == ',') return;
      if (c == '"') {
        token_ = "\"";
        escaped_ = false;
        state_ = State::kKey;
      } else if (c == '}') {
        ++call_;
        state_ = State::kBetweenCalls;
      } else {
        state_ = State::kDone;
      }
      return;
    case State::kKey:
    case State::kName: {
      token_ += c;
      if (escaped_) {
        escaped_ = false;
        return;
      }
      if (c == '\\') {
        escaped_ = true;
        return;
      }
      if (c != '"') return;
      std::optional<std::string> text = decode_string(token_);
      if (!text) {
        state_ = State::kDone;
        return;
      }
      if (state_ == State::kKey) {
        key_ = std::move(*text);
        state_ = State::kBeforeValue;
        return;
      }
      ForcedToolCallDelta& delta = delta_for(call_, out);
      delta.name = std::move(*text);
      ++num_named_;
      delta.arguments += std::exchange(held_, {});
      state_ = State::kBeforeKey;
      return;
    }
    case State::kBeforeValue:
      if (is_space(c) || c == ':') return;
      if (key_ == "name" && c == '"' && num_named_ == call_) {
        token_ = "\"";
        escaped_ = false;
        state_ = State::kName;
        return;
      }
      in_arguments_ = key_ == "arguments";
      depth_ = 0;
      in_string_ = scalar_ = started_value_ = escaped_ = false;
      state_ = State::kValue;
      [[fallthrough]];
    case State::kValue: {
      bool consumed = true;
      const bool ended = value_step(c, consumed);
      if (consumed && in_arguments_) emit_arguments(std::string_view(&c, 1), out);
      if (!ended) return;
      state_ = State::kBeforeKey;
      if (!consumed) step(c, out);
      return;
    }
    case State::kDone: return;
  }
}

}  // namespace pagoda::api
