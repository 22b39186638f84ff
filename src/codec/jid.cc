// Job ids: NewJid (codec/jid.h) and the random bytes behind it,
// with a per-thread pool that a forked child refills before use. Nothing
// else in the codec needs randomness, so there is no private header.
//
// Thread safety: NewJid may be called from any thread; each thread draws
// from its own pool.

#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "codec/jid.h"

namespace reliableq::codec {

namespace {

// Bumped in every forked child, so that a child never hands out jids from
// random bytes its parent buffered (and may hand out too).
std::atomic<uint64_t> fork_generation{0};
std::once_flag atfork_once;

void OnForkChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

bool ReadUrandom(unsigned char* out, size_t size) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, out + got, size - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fd);
  return got == size;
}

// Last resort when the kernel gives no randomness at all: splitmix64 over the
// time, the pid and a counter keeps jids distinct, if not unpredictable.
void FallbackRandom(unsigned char* out, size_t size) {
  static std::atomic<uint64_t> counter{0};
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t state = (static_cast<uint64_t>(ts.tv_sec) << 32) ^ static_cast<uint64_t>(ts.tv_nsec) ^
                   (static_cast<uint64_t>(getpid()) << 16) ^
                   counter.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed);
  for (size_t i = 0; i < size; i += 8) {
    state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    std::memcpy(out + i, &z, std::min<size_t>(8, size - i));
  }
}

void FillRandom(unsigned char* out, size_t size) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = getrandom(out + got, size - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // ENOSYS on kernels before 3.17, or a seccomp filter.
    }
  }
  if (got == size) return;
  if (ReadUrandom(out, size)) return;
  FallbackRandom(out, size);
}

constexpr size_t kJidBytes = 12;

// One getrandom call serves 64 jids: bulk pushes would otherwise spend most
// of their encoding time in the system call.
struct RandomPool {
  unsigned char bytes[kJidBytes * 64];
  size_t used = sizeof(bytes);
  uint64_t generation = 0;
};

}  // namespace

std::string NewJid() {
  std::call_once(atfork_once, [] { pthread_atfork(nullptr, nullptr, OnForkChild); });
  thread_local RandomPool pool;
  uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  if (pool.used + kJidBytes > sizeof(pool.bytes) || pool.generation != generation) {
    FillRandom(pool.bytes, sizeof(pool.bytes));
    pool.used = 0;
    pool.generation = generation;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string jid(kJidBytes * 2, '0');
  for (size_t i = 0; i < kJidBytes; ++i) {
    unsigned char b = pool.bytes[pool.used + i];
    jid[2 * i] = kHex[b >> 4];
    jid[2 * i + 1] = kHex[b & 15];
  }
  pool.used += kJidBytes;
  return jid;
}

}  // namespace reliableq::codec
