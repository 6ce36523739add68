// PAGODA_CHECK: broken internal invariants abort with file:line and a message. Untrusted input
// never reaches a CHECK; it gets a Status (pagoda/status.h).
#pragma once

#include <sstream>

namespace pagoda::detail {

/// Collects the message of a failed check and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

/// Lets `PAGODA_CHECK(c) << "msg"` be a void expression in both branches of the ternary.
struct Voidify {
  void operator&(CheckFailure&) {}
};

}  // namespace pagoda::detail

#define PAGODA_CHECK(condition)               \
  (condition) ? (void)0                       \
              : ::pagoda::detail::Voidify() & \
                    ::pagoda::detail::CheckFailure(__FILE__, __LINE__, #condition)

#define PAGODA_CHECK_EQ(a, b) PAGODA_CHECK((a) == (b)) << (a) << " vs " << (b) << " "
#define PAGODA_CHECK_LT(a, b) PAGODA_CHECK((a) < (b)) << (a) << " vs " << (b) << " "
#define PAGODA_CHECK_LE(a, b) PAGODA_CHECK((a) <= (b)) << (a) << " vs " << (b) << " "
