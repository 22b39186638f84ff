// New job ids.
//
// Thread safety: any thread; a forked child gets ids of its own.

#ifndef RELIABLEQ_CODEC_JID_H_
#define RELIABLEQ_CODEC_JID_H_

#include <string>

namespace reliableq::codec {

// A new job id: 24 lowercase hex digits from 12 random bytes (getrandom(2),
// /dev/urandom where that is missing). Different in a forked child.
std::string NewJid();

}  // namespace reliableq::codec

#endif  // RELIABLEQ_CODEC_JID_H_
