#include "web/admin_pool.h"

namespace reliableq::web {

AdminPool::Lease::~Lease() {
  if (admin_ == nullptr) return;
  std::lock_guard<std::mutex> lock(pool_->mutex_);
  pool_->idle_.push_back(std::move(admin_));
}

Result<AdminPool::Lease> AdminPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<Admin> admin = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(admin));
    }
  }
  Result<std::unique_ptr<Admin>> admin = Admin::Open(redis_, admin_);
  if (!admin.ok()) return admin.status();
  return Lease(this, std::move(admin.value()));
}

}  // namespace reliableq::web
