// Writes the Prometheus text exposition format (version 0.0.4), one metric family at a time:
//
//   # HELP pagoda:num_requests_running Requests in the running batch.
//   # TYPE pagoda:num_requests_running gauge
//   pagoda:num_requests_running{model_name="m"} 3
//
// Label values are escaped (\\, \", \n); numbers are written so that parsers read back the same
// double (+Inf, -Inf and NaN spelled as Prometheus spells them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/histogram.h"

namespace pagoda::api {

/// Label name/value pairs of one sample.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

/// Appends metric families to a text body.
class PrometheusWriter {
 public:
  /// HELP and TYPE lines of a family; every sample of the family must follow before the next.
  /// `type` is "counter", "gauge" or "histogram".
  void family(std::string_view name, std::string_view type, std::string_view help);
  /// One sample line: name{labels} value.
  void sample(std::string_view name, const MetricLabels& labels, double value);
  /// A histogram's _bucket (cumulative, le="+Inf" last), _sum and _count lines.
  void histogram(std::string_view name, const MetricLabels& labels,
                 const Histogram::Snapshot& snapshot);

  /// The text so far.
  const std::string& text() const { return text_; }

 private:
  void labels(const MetricLabels& labels, std::string_view extra_name = {},
              std::string_view extra_value = {});

  std::string text_;
};

/// The Content-Type of the text format.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

/// A double as Prometheus writes it: shortest round-trip form, "+Inf", "-Inf", "NaN".
std::string prometheus_number(double value);

}  // namespace pagoda::api
