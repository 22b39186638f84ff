#include "base/errno_text.h"

#include <string.h>

namespace reliableq::base {

std::string ErrnoText(int error) {
  char buffer[128];
  // The GNU strerror_r: returns the text, in `buffer` or a static string.
  return strerror_r(error, buffer, sizeof buffer);
}

}  // namespace reliableq::base
