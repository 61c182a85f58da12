// ShmSegment implementation (see shm_segment.h): boost::interprocess calls,
// with every boost exception turned into an up:: error that names the segment
// and says what to do.
#include "ipc/shm_segment.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include "common/base/errors.h"

namespace up::ipc {
namespace bip = boost::interprocess;

namespace {

constexpr size_t kMaxNameLength = 200;

std::string ShmPath(const std::string& name) { return "/dev/shm/" + name; }

// Removes a freshly created name unless Dismiss() is called: used while
// Create() can still fail after the name exists.
class RemoveGuard {
 public:
  explicit RemoveGuard(const std::string& name) : name_(name) {}
  ~RemoveGuard() {
    if (armed_) bip::shared_memory_object::remove(name_.c_str());
  }
  RemoveGuard(const RemoveGuard&) = delete;
  RemoveGuard& operator=(const RemoveGuard&) = delete;
  void Dismiss() { armed_ = false; }

 private:
  const std::string& name_;
  bool armed_ = true;
};

}  // namespace

void ShmSegment::ValidateName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= kMaxNameLength;
  for (char c : name) {
    const bool allowed = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    ok = ok && allowed;
  }
  if (!ok || name == "." || name == "..") {
    throw UsageError("shared memory name '" + name + "' (" + std::to_string(name.size()) +
                     " characters) is invalid; use 1 to 200 of [A-Za-z0-9._-], no slash");
  }
}

ShmSegment ShmSegment::Create(const std::string& name, size_t bytes) {
  ValidateName(name);
  if (bytes == 0) {
    throw UsageError("shared memory segment '" + name + "' requested with 0 bytes; ask for > 0");
  }
  bip::permissions perms;
  perms.set_permissions(0600);
  bip::shared_memory_object shm;
  try {
    shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write, perms);
  } catch (const bip::interprocess_exception& e) {
    if (e.get_error_code() == bip::already_exists_error) {
      throw RuntimeError("shared memory segment " + ShmPath(name) +
                         " exists already (a leftover of a dead run, or a run in progress); "
                         "if no run uses it, remove it with `rm " +
                         ShmPath(name) + "`");
    }
    throw RuntimeError("cannot create shared memory segment " + ShmPath(name) + ": " + e.what() +
                       "; check that /dev/shm is mounted and writable");
  }
  RemoveGuard guard(name);
  try {
    shm.truncate(static_cast<bip::offset_t>(bytes));
  } catch (const bip::interprocess_exception& e) {
    throw RuntimeError("cannot size shared memory segment " + ShmPath(name) + " to " +
                       std::to_string(bytes) + " bytes: " + e.what());
  }
  // Reserve the pages now: touching a page of a full tmpfs would raise SIGBUS,
  // this reports it as an error instead.
  const int rc = ::posix_fallocate(shm.get_mapping_handle().handle, 0, static_cast<off_t>(bytes));
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
    throw RuntimeError("cannot reserve " + std::to_string(bytes) + " bytes for shared memory " +
                       ShmPath(name) + ": " + std::strerror(rc) +
                       "; free space in /dev/shm (df -h /dev/shm) or use fewer/smaller slots");
  }
  bip::mapped_region region;
  try {
    region = bip::mapped_region(shm, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    throw RuntimeError("cannot map shared memory segment " + ShmPath(name) + " (" +
                       std::to_string(bytes) + " bytes): " + e.what());
  }
  // Pre-fault: write every page once so the data path never takes a fault.
  auto* p = static_cast<volatile unsigned char*>(region.get_address());
  const size_t page = bip::mapped_region::get_page_size();
  for (size_t off = 0; off < region.get_size(); off += page) p[off] = 0;
  guard.Dismiss();
  return ShmSegment(name, std::move(region), /*owner=*/true);
}

ShmSegment ShmSegment::Open(const std::string& name) {
  ValidateName(name);
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
    bip::mapped_region region(shm, bip::read_write);
    return ShmSegment(name, std::move(region), /*owner=*/false);
  } catch (const bip::interprocess_exception& e) {
    if (e.get_error_code() == bip::not_found_error) {
      throw RuntimeError("shared memory segment " + ShmPath(name) +
                         " does not exist; start the process that creates it first, "
                         "or check the name and run id");
    }
    throw RuntimeError("cannot open shared memory segment " + ShmPath(name) + ": " + e.what() +
                       "; check that it belongs to this user and is not empty");
  }
}

bool ShmSegment::Remove(const std::string& name) {
  ValidateName(name);
  return bip::shared_memory_object::remove(name.c_str());
}

bool ShmSegment::Exists(const std::string& name) {
  ValidateName(name);
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_only);
    return true;
  } catch (const bip::interprocess_exception& e) {
    // Present but not ours to open still counts as existing.
    return e.get_error_code() != bip::not_found_error;
  }
}

ShmSegment::ShmSegment(std::string name, bip::mapped_region region, bool owner)
    : name_(std::move(name)), region_(std::move(region)), owner_(owner) {}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      region_(std::move(other.region_)),
      owner_(std::exchange(other.owner_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    RemoveIfOwner();
    bip::mapped_region().swap(region_);  // unmap ours
    name_ = std::move(other.name_);
    region_.swap(other.region_);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() { RemoveIfOwner(); }

void ShmSegment::RemoveIfOwner() noexcept {
  if (owner_) bip::shared_memory_object::remove(name_.c_str());
  owner_ = false;
}

}  // namespace up::ipc
