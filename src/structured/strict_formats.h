// JSON-schema string formats that the grammar engine reads more loosely than validators do,
// rewritten as the equivalent strict `pattern` before compiling: xgrammar's "ipv4" lets octets
// have leading zeros ("120.000.000.001"), which Python's ipaddress (and so the jsonschema
// package) refuses. A format beside an explicit pattern is left alone.
#pragma once

#include <string>

namespace pagoda::structured {

/// `schema` (serialized JSON) with each such format replaced; unchanged when it has none or is
/// not JSON (the compiler reports that).
std::string with_strict_formats(const std::string& schema);

}  // namespace pagoda::structured
