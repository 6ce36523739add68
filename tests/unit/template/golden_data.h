// Loads the golden files that tests/golden/template/make_golden.py renders with Python jinja2.
#pragma once

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace pagoda::testing {

/// Parses tests/data/template/<name>, keeping key order.
inline nlohmann::ordered_json load_template_json(const std::string& name) {
  std::ifstream in(std::string(PAGODA_TEST_DATA_DIR) + "/template/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::ordered_json::parse(text.str());
}

/// The instant make_golden.py pins strftime_now() to: 2025-03-14 09:26:53.
inline std::tm golden_now() {
  std::tm now{};
  now.tm_year = 2025 - 1900;
  now.tm_mon = 2;
  now.tm_mday = 14;
  now.tm_hour = 9;
  now.tm_min = 26;
  now.tm_sec = 53;
  now.tm_wday = 5;
  now.tm_yday = 72;
  return now;
}

/// A gtest-safe name: letters, digits and underscores.
inline std::string test_name(std::string name) {
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

}  // namespace pagoda::testing
