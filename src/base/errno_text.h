// The text of an errno value, for error messages.
//
// Thread safety: any thread (strerror_r, not strerror, whose buffer is
// shared: the exec folder calls it from handler threads).

#ifndef RELIABLEQ_BASE_ERRNO_TEXT_H_
#define RELIABLEQ_BASE_ERRNO_TEXT_H_

#include <string>

namespace reliableq::base {

// "No such file or directory" for ENOENT; "Unknown error N" for a value
// the C library does not know.
std::string ErrnoText(int error);

}  // namespace reliableq::base

#endif  // RELIABLEQ_BASE_ERRNO_TEXT_H_
