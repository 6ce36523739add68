#include <cstdio>

#include "cli/commands.h"

namespace pagoda::cli {

int report_error(const Status& status) {
  std::fprintf(stderr, "pagoda: error: %s\n", status.message().c_str());
  return 1;
}

}  // namespace pagoda::cli
