// The dashboard's pool of blocking Admin connections. Private to src/web/.
//
// Thread safety: Acquire and a Lease's end lock the pool; a Lease itself
// belongs to one request thread.

#ifndef RELIABLEQ_WEB_ADMIN_POOL_H_
#define RELIABLEQ_WEB_ADMIN_POOL_H_

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "reliableq/admin.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::web {

// Blocking Admin connections for the request threads: a thread borrows one
// for a request and gives it back, so there are never more connections
// than threads, and no connection is used by two threads at once.
class AdminPool {
 public:
  AdminPool(RedisOptions redis, AdminOptions admin) : redis_(std::move(redis)), admin_(admin) {}

  class Lease {
   public:
    Lease(AdminPool* pool, std::unique_ptr<Admin> admin) : pool_(pool), admin_(std::move(admin)) {}
    Lease(Lease&&) = default;
    ~Lease();
    Admin* operator->() { return admin_.get(); }
    Admin& operator*() { return *admin_; }

   private:
    AdminPool* pool_;
    std::unique_ptr<Admin> admin_;
  };

  // An idle connection, or a new one (Admin::Open).
  Result<Lease> Acquire();

 private:
  RedisOptions redis_;
  AdminOptions admin_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Admin>> idle_;
};

}  // namespace reliableq::web

#endif  // RELIABLEQ_WEB_ADMIN_POOL_H_
