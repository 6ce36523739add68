// A JSON schema as handed to the grammar engine: two kinds of node are rewritten first into an
// equivalent form that xgrammar reads both strictly and cheaply. Every output of the rewritten
// schema is valid for the original one.
//
//   {"type": "string", "format": "ipv4"}      xgrammar lets octets have leading zeros
//     -> strict pattern                         ("120.000.000.001"), which Python's ipaddress
//                                               (and so the jsonschema package) refuses
//   {"type": "string", "maxLength": N}        xgrammar tracks a character budget at run time
//     -> pattern ^[^"\\\x00-\x1f]{min,N}$      (~200 us per mask on a 49k vocabulary, against
//                                               ~7 us for the pattern's precomputed states);
//                                               the string then holds no escapes
//
// A node that already has a pattern (or a format, or an enum/const) is left alone, and so are
// strings past the first 256 pattern states of a schema (each state is a token mask computed at
// compile time: hundreds of bounded strings would take the compile past its timeout).
#pragma once

#include <string>

namespace pagoda::structured {

/// `schema` (serialized JSON) with those nodes rewritten; unchanged when it has none or is not
/// JSON (the compiler reports that).
std::string rewrite_schema(const std::string& schema);

}  // namespace pagoda::structured
