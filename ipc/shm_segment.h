// ShmSegment: a named POSIX shared-memory segment, mapped read-write.
//
// Built on boost::interprocess::shared_memory_object and mapped_region. The
// process that Create()s a segment owns its name: the destructor unmaps it
// and removes the name from /dev/shm, unless Disown() handed that duty to
// someone else (e.g. the launcher). Open() only maps; it never removes. The
// mapping is released by every destructor. A ShmSegment is move-only and not
// thread-safe itself (the bytes it maps are shared by every process that maps
// them; synchronising access is the caller's job). The static functions are
// thread- and process-safe.
#pragma once

#include <cstddef>
#include <string>

#include <boost/interprocess/mapped_region.hpp>

namespace up::ipc {

class ShmSegment {
 public:
  // Creates `name` (which must not exist) with permissions 0600, sizes it to
  // `bytes`, maps it and touches every page so that later accesses do not
  // fault. Throws UsageError for a bad name or zero size, RuntimeError if the
  // name exists or the system refuses.
  static ShmSegment Create(const std::string& name, size_t bytes);

  // Maps an existing segment read-write. Throws UsageError for a bad name and
  // RuntimeError if it does not exist or cannot be mapped.
  static ShmSegment Open(const std::string& name);

  // Removes the name (mappings stay valid). Returns false if it did not exist.
  static bool Remove(const std::string& name);
  static bool Exists(const std::string& name);

  // Throws UsageError unless `name` matches [A-Za-z0-9._-]{1,200}.
  static void ValidateName(const std::string& name);

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  void* data() { return region_.get_address(); }
  const void* data() const { return region_.get_address(); }
  size_t size() const { return region_.get_size(); }
  const std::string& name() const { return name_; }
  // True if the destructor will remove the name.
  bool owns_name() const { return owner_; }
  // The destructor will leave the name in place (it still unmaps).
  void Disown() { owner_ = false; }

 private:
  ShmSegment(std::string name, boost::interprocess::mapped_region region, bool owner);
  void RemoveIfOwner() noexcept;

  std::string name_;
  boost::interprocess::mapped_region region_;
  bool owner_ = false;
};

}  // namespace up::ipc
