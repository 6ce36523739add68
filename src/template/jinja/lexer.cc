#include "template/jinja/lexer.h"

#include <cctype>
#include <cstdint>

#include "template/jinja/unicode.h"

namespace pagoda::jinja {

Status template_error(const std::string& message, int line) {
  return invalid_argument(message + " (template line " + std::to_string(line) + ")");
}

namespace {

// jinja2 turns \r\n and \r into \n and drops one trailing newline (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool all_space(std::string_view s) {
  return strip_python_space(s, true, false).empty();
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  StatusOr<std::vector<Token>> run() {
    while (pos_ < src_.size()) {
      std::size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos_));
        pos_ = src_.size();
        break;
      }
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      std::string text = src_.substr(pos_, tag - pos_);
      if (sign == '-') {
        text = std::string(strip_python_space(text, false, true));
      } else if (sign != '+' && kind != '{') {
        std::size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting_) && all_space(std::string_view(text).substr(l_pos))) {
          text.resize(l_pos);
        }
      }
      int text_line = line_;
      line_ += count_newlines(src_.substr(pos_, tag - pos_));
      emit(TokenType::kText, std::move(text), text_line);
      pos_ = tag + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      line_starting_ = false;
      Status status = kind == '#'   ? lex_comment()
                      : kind == '{' ? lex_tag(TokenType::kVariableBegin, '}')
                                    : lex_block();
      if (!status.ok()) return status;
    }
    tokens_.push_back({TokenType::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  void emit(TokenType type, std::string text, int line) {
    if (type == TokenType::kText && text.empty()) return;
    tokens_.push_back({type, std::move(text), line});
  }

  void emit_text(std::string text) {
    int line = line_;
    line_ += count_newlines(text);
    emit(TokenType::kText, std::move(text), line);
  }

  // Consumes a closing `X}` at pos_ with its whitespace control; true when one was there.
  bool match_end(char closer, bool trims_newline) {
    std::size_t p = pos_;
    char sign = src_[p];
    if (sign == '-' || sign == '+') ++p;
    if (p + 1 >= src_.size() + 0 || src_[p] != closer || p + 1 >= src_.size() ||
        src_[p + 1] != '}') {
      return false;
    }
    p += 2;
    std::size_t start = pos_;
    if (sign == '-') {
      while (p < src_.size() && is_space(src_[p])) ++p;
    } else if (sign != '+' && trims_newline && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    line_ += count_newlines(std::string_view(src_).substr(start, p - start));
    line_starting_ = p > start && src_[p - 1] == '\n';
    pos_ = p;
    return true;
  }

  Status lex_comment() {
    int line = line_;
    while (pos_ < src_.size()) {
      if (match_end('#', true)) return Status::ok_status();
      if (src_[pos_] == '\n') ++line_;
      ++pos_;
    }
    return template_error("Missing end of comment tag", line);
  }

  Status lex_block() {
    std::size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") == 0 &&
        (p + 3 >= src_.size() || !std::isalnum(static_cast<unsigned char>(src_[p + 3])))) {
      std::size_t q = p + 3;
      while (q < src_.size() && is_space(src_[q])) ++q;
      std::size_t saved = pos_;
      pos_ = q;
      if (match_end('%', false)) return lex_raw_body();
      pos_ = saved;
    }
    return lex_tag(TokenType::kBlockBegin, '%');
  }

  Status lex_raw_body() {
    int line = line_;
    for (std::size_t i = src_.find("{%", pos_); i != std::string::npos;
         i = src_.find("{%", i + 1)) {
      std::size_t p = i + 2;
      char sign = p < src_.size() ? src_[p] : '\0';
      if (sign == '-' || sign == '+') ++p;
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && is_space(src_[p])) ++p;
      std::size_t body_end = i;
      std::string body = src_.substr(pos_, body_end - pos_);
      std::size_t saved = pos_;
      pos_ = p;
      int before = line_;
      if (!match_end('%', true)) {
        pos_ = saved;
        line_ = before;
        continue;
      }
      if (sign == '-') {
        body = std::string(strip_python_space(body, false, true));
      } else if (sign != '+') {
        std::size_t l_pos = body.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (all_space(std::string_view(body).substr(l_pos))) body.resize(l_pos);
      }
      line_ += count_newlines(std::string_view(src_).substr(saved, body_end - saved));
      emit(TokenType::kText, std::move(body), line);
      return Status::ok_status();
    }
    return template_error("Missing end of raw directive", line);
  }

  Status lex_tag(TokenType begin, char closer) {
    int begin_line = line_;
    emit(begin, "", line_);
    std::vector<char> brackets;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) {
        return template_error(closer == '%'
                                  ? "unexpected end of template, expected 'end of statement block'"
                                  : "unexpected end of template, expected 'end of print statement'",
                              begin_line);
      }
      int line = line_;
      if (brackets.empty() && match_end(closer, closer == '%')) {
        emit(begin == TokenType::kBlockBegin ? TokenType::kBlockEnd : TokenType::kVariableEnd, "",
             line);
        return Status::ok_status();
      }
      char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t start = pos_;
        while (pos_ < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
          ++pos_;
        emit(TokenType::kName, src_.substr(start, pos_ - start), line);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number(line);
      } else if (c == '\'' || c == '"') {
        PAGODA_RETURN_IF_ERROR(lex_string(line));
      } else {
        PAGODA_RETURN_IF_ERROR(lex_operator(brackets, line));
      }
    }
  }

  void lex_number(int line) {
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (pos_ < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
        if (src_[pos_] != '_') digits += src_[pos_];
        ++pos_;
      }
    };
    take_digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      digits += src_[pos_++];
      take_digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      std::size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        is_float = true;
        digits += src_.substr(pos_, p - pos_);
        pos_ = p;
        take_digits();
      }
    }
    emit(is_float ? TokenType::kFloat : TokenType::kInteger, std::move(digits), line);
  }

  Status lex_string(int line) {
    char quote = src_[pos_++];
    std::string value;
    while (pos_ < src_.size() && src_[pos_] != quote) {
      char c = src_[pos_++];
      if (c == '\n') ++line_;
      if (c != '\\' || pos_ >= src_.size()) {
        value += c;
        continue;
      }
      char e = src_[pos_++];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case 'a': value += '\a'; break;
        case '0': value += '\0'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': ++line_; break;
        case 'x':
        case 'u':
        case 'U': {
          std::size_t len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + len > src_.size())
            return template_error("truncated escape in string literal", line);
          std::uint32_t cp = 0;
          for (std::size_t i = 0; i < len; ++i) {
            char h = src_[pos_ + i];
            if (!std::isxdigit(static_cast<unsigned char>(h))) {
              return template_error("invalid escape in string literal", line);
            }
            cp = cp * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                          ? h - '0'
                                                          : (std::tolower(h) - 'a' + 10));
          }
          if (cp > 0x10FFFF) return template_error("invalid escape in string literal", line);
          pos_ += len;
          append_utf8(value, cp);
          break;
        }
        default: value += '\\'; value += e;
      }
    }
    if (pos_ >= src_.size())
      return template_error("unexpected end of template inside a string", line);
    ++pos_;
    emit(TokenType::kString, std::move(value), line);
    return Status::ok_status();
  }

  Status lex_operator(std::vector<char>& brackets, int line) {
    static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        pos_ += 2;
        emit(TokenType::kOperator, std::string(op), line);
        return Status::ok_status();
      }
    }
    char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}.:,|=<>").find(c) == std::string_view::npos) {
      return template_error(std::string("unexpected char '") + c + "'", line);
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) return template_error(std::string("unexpected '") + c + "'", line);
      if (brackets.back() != c) {
        return template_error(
            std::string("unexpected '") + c + "', expected '" + brackets.back() + "'", line);
      }
      brackets.pop_back();
    }
    ++pos_;
    emit(TokenType::kOperator, std::string(1, c), line);
    return Status::ok_status();
  }

  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

StatusOr<std::vector<Token>> tokenize(std::string_view source) {
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace pagoda::jinja
