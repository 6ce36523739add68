#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

enum class Step { kValid, kInvalid, kIncomplete };

// Scans one character at `pos` (a non-ASCII lead byte) per RFC 3629 / Unicode Table 3-7; sets
// `end` to the first byte after the character or after the maximal invalid subpart.
Step scan_char(std::string_view s, std::size_t pos, std::size_t& end) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  int need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    end = pos + 1;
    return Step::kInvalid;
  }
  std::size_t i = pos + 1;
  for (int k = 0; k < need; ++k, ++i) {
    if (i >= s.size()) {
      end = i;
      return Step::kIncomplete;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < lo || c > hi) {
      end = i;
      return Step::kInvalid;
    }
    lo = 0x80;
    hi = 0xBF;
  }
  end = i;
  return Step::kValid;
}

}  // namespace

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      out.push_back(bytes[pos++]);
      continue;
    }
    std::size_t end = pos;
    if (scan_char(bytes, pos, end) == Step::kValid) {
      out.append(bytes.substr(pos, end - pos));
    } else {
      out.append(kReplacementChar);
    }
    pos = end;
  }
}

bool is_valid_utf8(std::string_view bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    std::size_t end = pos;
    if (scan_char(bytes, pos, end) != Step::kValid) return false;
    pos = end;
  }
  return true;
}

std::size_t utf8_stable_prefix(std::string_view bytes) {
  // Only the last 3 bytes can start an incomplete character; scanning from 4 back is enough,
  // provided the scan starts on a character boundary, so scan from the start of the tail that
  // contains the last lead byte.
  std::size_t start = bytes.size() > 4 ? bytes.size() - 4 : 0;
  while (start > 0 && (static_cast<unsigned char>(bytes[start]) & 0xC0) == 0x80) --start;
  std::size_t pos = start;
  while (pos < bytes.size()) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    std::size_t end = pos;
    if (scan_char(bytes, pos, end) == Step::kIncomplete) return pos;
    pos = end;
  }
  return bytes.size();
}

std::size_t utf8_char_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return lead < 0xF8 ? 4 : 1;
}

void append_code_point(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace pagoda
