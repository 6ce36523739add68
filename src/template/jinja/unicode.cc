#include "template/jinja/unicode.h"

#include <cctype>

namespace pagoda::jinja {
namespace {

std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

bool is_ascii_alpha(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0;
}

}  // namespace

char32_t decode_utf8(std::string_view s, std::size_t& pos) {
  auto lead = static_cast<unsigned char>(s[pos]);
  std::size_t len = sequence_length(lead);
  if (len == 1 || pos + len > s.size()) {
    ++pos;
    return lead;
  }
  char32_t cp = lead & (0xFF >> (len + 1));
  for (std::size_t i = 1; i < len; ++i) {
    auto c = static_cast<unsigned char>(s[pos + i]);
    if ((c >> 6) != 0x2) {
      ++pos;
      return lead;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  pos += len;
  return cp;
}

std::vector<std::size_t> code_point_offsets(std::string_view s) {
  std::vector<std::size_t> offsets;
  offsets.reserve(s.size() + 1);
  std::size_t pos = 0;
  while (pos < s.size()) {
    offsets.push_back(pos);
    decode_utf8(s, pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

std::size_t code_point_count(std::string_view s) {
  std::size_t count = 0;
  std::size_t pos = 0;
  while (pos < s.size()) {
    decode_utf8(s, pos);
    ++count;
  }
  return count;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_python_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {

template <typename Pred>
std::string_view strip_if(std::string_view s, bool left, bool right, Pred pred) {
  std::size_t begin = 0;
  std::size_t end = s.size();
  if (left) {
    while (begin < end) {
      std::size_t next = begin;
      if (!pred(decode_utf8(s, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      std::size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) >> 6) == 0x2) --start;
      std::size_t probe = start;
      if (!pred(decode_utf8(s, probe))) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

}  // namespace

std::string_view strip_python_space(std::string_view s, bool left, bool right) {
  return strip_if(s, left, right, is_python_space);
}

std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
  std::vector<char32_t> set;
  for (std::size_t pos = 0; pos < chars.size();) set.push_back(decode_utf8(chars, pos));
  return strip_if(s, left, right, [&](char32_t cp) {
    for (char32_t c : set) {
      if (c == cp) return true;
    }
    return false;
  });
}

namespace {

// Simple case mapping for the scripts chat text meets most (Latin-1, Latin Extended-A, Greek,
// Cyrillic); other code points pass through unchanged.
char32_t upper_cp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) ||
      (c >= 0x430 && c <= 0x44F)) {
    return c - 32;
  }
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0x100 && c <= 0x17F && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_is_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_is_lower ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
  }
  return c;
}

char32_t lower_cp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
      (c >= 0x410 && c <= 0x42F)) {
    return c + 32;
  }
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_is_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_is_lower ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
  }
  return c;
}

std::string map_code_points(std::string_view s, char32_t (*fn)(char32_t)) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t pos = 0; pos < s.size();) {
    std::size_t start = pos;
    char32_t cp = decode_utf8(s, pos);
    char32_t mapped = fn(cp);
    if (mapped == cp) {
      out.append(s.substr(start, pos - start));
    } else {
      append_utf8(out, mapped);
    }
  }
  return out;
}

}  // namespace

std::string to_upper(std::string_view s) {
  return map_code_points(s, upper_cp);
}

std::string to_lower(std::string_view s) {
  return map_code_points(s, lower_cp);
}

std::string to_title(std::string_view s) {
  std::string out(s);
  bool previous_cased = false;
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      previous_cased = true;  // Non-ASCII letters keep their case but still join the word.
    } else if (is_ascii_alpha(c)) {
      c = static_cast<char>(previous_cased ? std::tolower(u) : std::toupper(u));
      previous_cased = true;
    } else {
      previous_cased = false;
    }
  }
  return out;
}

std::string to_capitalized(std::string_view s) {
  std::string out = to_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

}  // namespace pagoda::jinja
