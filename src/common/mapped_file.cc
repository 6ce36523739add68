#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pagoda {

namespace {

Status errno_status(const std::string& what, const std::string& path) {
  int err = errno;
  std::string msg = path + ": cannot " + what + ": " + std::strerror(err);
  if (err == ENOENT) return not_found(msg);
  return invalid_argument(msg);
}

}  // namespace

StatusOr<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = errno_status("stat", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(path + ": not a regular file");
  }
  auto size = static_cast<std::size_t>(st.st_size);
  const std::uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      Status s = errno_status("mmap", path);
      ::close(fd);
      return s;
    }
    data = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps its own reference to the file
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

void release_mapped_pages(std::span<const std::uint8_t> bytes) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data());
  const std::uintptr_t first = (begin + page - 1) / page * page;
  const std::uintptr_t last = (begin + bytes.size()) / page * page;
  if (first >= last) return;
  // Advice only: on failure the pages simply stay resident.
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

StatusOr<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return not_found(path + ": no such file");
    return invalid_argument(path + ": cannot be read");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace pagoda
