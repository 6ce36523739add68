#include "api/request_body.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/string_map.h"
#include "tokenizer/utf8.h"

namespace pagoda::api {

namespace {

// Offset of the first byte that is not part of a valid UTF-8 sequence.
std::size_t first_invalid_utf8(std::string_view bytes) {
  std::size_t lo = 0;
  const std::size_t hi = bytes.size();
  while (lo < hi) {
    const std::size_t len = utf8_char_length(static_cast<unsigned char>(bytes[lo]));
    if (lo + len > hi || !is_valid_utf8(bytes.substr(lo, len))) return lo;
    lo += len;
  }
  return hi;
}

// Objects up to this size find a duplicate key by scanning; larger ones keep a hash index.
constexpr std::size_t kIndexedObjectKeys = 16;

// Builds the body's Json from nlohmann's SAX events (nlohmann::json_sax), counting against the
// limits as it goes; the first limit crossed stops the parse with its error.
//
//   {"logit_bias": {"1": 5, "2": -5}, "messages": [{"role": "user"}]}
//   frames_ while "role" is read:  [root object] [messages array] [messages[0] object]
//
// Each frame is an open container; an object frame also knows which of its entries the next
// value fills. A frame's container lives inside its parent, which does not grow while the
// frame is open, so the pointers stay valid (nlohmann's own DOM parser relies on the same).
class BodyBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  bool null() { return place(Json(nullptr)) != nullptr; }
  bool boolean(bool value) { return place(Json(value)) != nullptr; }
  bool number_integer(number_integer_t value) { return place(Json(value)) != nullptr; }
  bool number_unsigned(number_unsigned_t value) { return place(Json(value)) != nullptr; }
  bool number_float(number_float_t value, const string_t&) {
    return place(Json(value)) != nullptr;
  }
  bool string(string_t& value) { return place(Json(std::move(value))) != nullptr; }
  bool binary(binary_t& value) { return place(Json::binary(std::move(value))) != nullptr; }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool end_object() {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_array() {
    frames_.pop_back();
    return true;
  }
  bool key(string_t& key);
  bool parse_error(std::size_t, const std::string&, const Json::exception& e);

  Json& root() { return root_; }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  using Entries = Json::object_t::Container;  // ordered_map's vector of (key, value)

  struct Frame {
    Json* container = nullptr;
    // Objects: the entry the next value goes to, and (past kIndexedObjectKeys) each key's place.
    Entries::value_type* entry = nullptr;
    StringMap<std::size_t> index;
  };

  // Puts `value` where the innermost open container wants it; null after a limit error.
  Json* place(Json&& value);
  bool open(Json&& container);
  bool fail(std::string message, std::string param);
  // Where frames_[depth]'s container sits ("messages[2]"); empty for the root.
  std::string path(std::size_t depth) const;

  Json root_;
  std::vector<Frame> frames_;
  std::int64_t num_values_ = 0;
  std::optional<ApiError> error_;
};

Json* BodyBuilder::place(Json&& value) {
  if (++num_values_ > kMaxJsonValues) {
    const std::string where = frames_.empty() ? "" : path(frames_.size() - 1);
    const std::string limit = std::to_string(kMaxJsonValues) +
                              " JSON values (each number, string, boolean, null, array and "
                              "object counts one)";
    fail(where.empty() ? "the request body holds more than " + limit
                       : "'" + where + "' takes the request body over " + limit,
         where);
    return nullptr;
  }
  if (frames_.empty()) {
    root_ = std::move(value);
    return &root_;
  }
  Frame& top = frames_.back();
  if (top.container->is_array()) {
    auto& items = top.container->get_ref<Json::array_t&>();
    items.push_back(std::move(value));
    return &items.back();
  }
  top.entry->second = std::move(value);
  return &top.entry->second;
}

bool BodyBuilder::open(Json&& container) {
  if (frames_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
    return fail("the request body nests arrays and objects deeper than " +
                    std::to_string(kMaxJsonDepth) + " levels",
                "");
  }
  Json* placed = place(std::move(container));
  if (placed == nullptr) return false;
  frames_.push_back({.container = placed});
  return true;
}

bool BodyBuilder::key(string_t& key) {
  Frame& top = frames_.back();
  Entries& entries = top.container->get_ref<Json::object_t&>();
  if (top.index.empty() && entries.size() >= kIndexedObjectKeys) {
    top.index.reserve(entries.size() * 2);
    for (std::size_t i = 0; i < entries.size(); ++i) top.index.emplace(entries[i].first, i);
  }
  if (top.index.empty()) {
    for (auto& entry : entries) {
      if (entry.first == key) {
        top.entry = &entry;
        return true;
      }
    }
  } else if (const auto it = top.index.find(key); it != top.index.end()) {
    top.entry = &entries[it->second];
    return true;
  }
  if (entries.size() >= static_cast<std::size_t>(kMaxJsonObjectKeys)) {
    const std::string where = path(frames_.size() - 1);
    return fail((where.empty() ? "the request body" : "'" + where + "'") + " has more than " +
                    std::to_string(kMaxJsonObjectKeys) + " keys",
                where);
  }
  if (!top.index.empty()) top.index.emplace(key, entries.size());
  entries.emplace_back(std::move(key), nullptr);
  top.entry = &entries.back();
  return true;
}

bool BodyBuilder::parse_error(std::size_t, const std::string&, const Json::exception& e) {
  // parse_error (syntax) or out_of_range (a number too large for a double). what() starts with
  // "[json.exception.parse_error.101] "; the rest says where and why.
  std::string_view what = e.what();
  if (const auto end = what.find("] "); what.starts_with('[') && end != what.npos) {
    what.remove_prefix(end + 2);
  }
  return fail("the request body is not valid JSON: " + std::string(what), "");
}

bool BodyBuilder::fail(std::string message, std::string param) {
  if (!error_) {
    error_ = ApiError::invalid_request(std::move(message), param.empty()
                                                               ? std::nullopt
                                                               : std::optional(std::move(param)));
  }
  return false;
}

std::string BodyBuilder::path(std::size_t depth) const {
  std::string out;
  for (std::size_t d = 0; d < depth; ++d) {
    const Frame& frame = frames_[d];
    if (frame.container->is_array()) {
      out += "[" + std::to_string(frame.container->size() - 1) + "]";
    } else {
      if (!out.empty()) out += '.';
      out += frame.entry->first;
    }
  }
  return out;
}

}  // namespace

ApiErrorOr<Json> parse_request_body(std::string_view body) {
  if (!is_valid_utf8(body)) {
    return ApiError::invalid_request("the request body is not valid UTF-8 (first bad byte at " +
                                     std::to_string(first_invalid_utf8(body)) + ")");
  }
  BodyBuilder builder;
  if (!Json::sax_parse(body.begin(), body.end(), &builder)) {
    if (builder.error()) return *builder.error();
    return ApiError::invalid_request("the request body is not valid JSON");
  }
  Json& parsed = builder.root();
  if (!parsed.is_object()) {
    return ApiError::invalid_request(std::string("the request body must be a JSON object, got ") +
                                     parsed.type_name());
  }
  return std::move(parsed);
}

}  // namespace pagoda::api
