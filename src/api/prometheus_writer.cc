#include "api/prometheus_writer.h"

#include <charconv>
#include <cmath>

namespace pagoda::api {

namespace {

void append_escaped(std::string_view value, bool escape_quotes, std::string& out) {
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Whole numbers (counts) as integers rather than "1e+06".
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    return std::to_string(static_cast<std::int64_t>(value));
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

void PrometheusWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  append_escaped(help, /*escape_quotes=*/false, text_);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void PrometheusWriter::labels(const MetricLabels& labels, std::string_view extra_name,
                              std::string_view extra_value) {
  if (labels.empty() && extra_name.empty()) return;
  text_ += '{';
  bool first = true;
  auto add = [&](std::string_view name, std::string_view value) {
    if (!first) text_ += ',';
    first = false;
    text_ += name;
    text_ += "=\"";
    append_escaped(value, /*escape_quotes=*/true, text_);
    text_ += '"';
  };
  for (const auto& [name, value] : labels) add(name, value);
  if (!extra_name.empty()) add(extra_name, extra_value);
  text_ += '}';
}

void PrometheusWriter::sample(std::string_view name, const MetricLabels& sample_labels,
                              double value) {
  text_ += name;
  labels(sample_labels);
  text_ += ' ';
  text_ += prometheus_number(value);
  text_ += '\n';
}

void PrometheusWriter::histogram(std::string_view name, const MetricLabels& sample_labels,
                                 const Histogram::Snapshot& snapshot) {
  const std::string bucket = std::string(name) + "_bucket";
  for (std::size_t i = 0; i < snapshot.bounds.size(); ++i) {
    text_ += bucket;
    labels(sample_labels, "le", prometheus_number(snapshot.bounds[i]));
    text_ += ' ';
    text_ += std::to_string(snapshot.cumulative[i]);
    text_ += '\n';
  }
  text_ += bucket;
  labels(sample_labels, "le", "+Inf");
  text_ += ' ' + std::to_string(snapshot.count) + '\n';
  sample(std::string(name) + "_sum", sample_labels, snapshot.sum);
  sample(std::string(name) + "_count", sample_labels, static_cast<double>(snapshot.count));
}

}  // namespace pagoda::api
