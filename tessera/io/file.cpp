#include "tessera/io/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

namespace tessera::io {

namespace {

[[noreturn]] void system_error(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " '" + path + "': " + std::strerror(errno));
}

// Empty sources have no mapping; their contents point here.
std::shared_ptr<const char> empty_contents() {
  static const char nothing[1] = {0};
  return std::shared_ptr<const char>(nothing, [](const char*) {});
}

}  // namespace

std::shared_ptr<const char> Reader::contents() const {
  size_t n = size();
  if (n == 0) return empty_contents();
  // 64-byte aligned, so that elements aligned in the file stay aligned here.
  auto* p = static_cast<char*>(::operator new(n, std::align_val_t(64)));
  std::shared_ptr<const char> out(p, [](const char* q) {
    ::operator delete(const_cast<char*>(q), std::align_val_t(64));
  });
  read(p, n, 0);
  return out;
}

// ---- FileWriter: Note [Saving in place] ----------------------------------

FileWriter::FileWriter(std::string path) : path_(std::move(path)) {
  static std::atomic<unsigned> counter{0};
  auto slash = path_.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = dir + "." + base + ".tmp" + std::to_string(getpid()) + "-" +
            std::to_string(counter++);
    // 0666 before the umask, as for any new file.
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt > 100)) {
      system_error("[save] cannot create a file beside", path_);
    }
  }
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void FileWriter::write(const char* data, size_t n) {
  if (fd_ < 0) throw std::runtime_error("[save] '" + path_ + "' is already complete");
  while (n > 0) {
    ssize_t m = ::write(fd_, data, n < (size_t{1} << 30) ? n : (size_t{1} << 30));
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) system_error("[save] cannot write", path_);
    data += m;
    n -= static_cast<size_t>(m);
  }
}

void FileWriter::finish() {
  if (fd_ < 0) return;
  int fd = fd_;
  fd_ = -1;
  // The data reaches the disk before the rename makes it the target's.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    int err = errno;
    ::close(fd);
    ::unlink(temp_.c_str());
    errno = err;
    system_error("[save] cannot write", path_);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp_.c_str());
    errno = err;
    system_error("[save] cannot write", path_);
  }
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_.c_str());
    errno = err;
    system_error("[save] cannot replace", path_);
  }
}

// ---- FileReader: Note [Mapped files] --------------------------------------

FileReader::FileReader(std::string path) : path_(std::move(path)) {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) system_error("[load] cannot open", path_);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    system_error("[load] cannot read", path_);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error("[load] '" + path_ + "' is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) {
    ::close(fd);
    map_ = empty_contents();
    return;
  }
  // Writable and private, so that a write through a borrowing array cannot
  // fault; not reserved, since no page is written in practice.
  void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
  if (p != MAP_FAILED) {
    ::close(fd);  // the mapping keeps the file open
    size_t n = size_;
    map_ = std::shared_ptr<const char>(static_cast<const char*>(p), [n](const char* q) {
      ::munmap(const_cast<char*>(q), n);
    });
    return;
  }
  // A file system that cannot map files: read it into memory.
  auto* buf = static_cast<char*>(::operator new(size_, std::align_val_t(64)));
  map_ = std::shared_ptr<const char>(buf, [](const char* q) {
    ::operator delete(const_cast<char*>(q), std::align_val_t(64));
  });
  for (size_t done = 0; done < size_;) {
    ssize_t m = ::pread(fd, buf + done, size_ - done, static_cast<off_t>(done));
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) {
      int err = m < 0 ? errno : EIO;
      ::close(fd);
      errno = err;
      system_error("[load] cannot read", path_);
    }
    done += static_cast<size_t>(m);
  }
  ::close(fd);
}

void FileReader::read(char* dst, size_t n, size_t offset) const {
  if (n) std::memcpy(dst, map_.get() + offset, n);
}

// ---- BytesReader ----------------------------------------------------------

BytesReader::BytesReader(std::string bytes, std::string label)
    : bytes_(std::make_shared<const std::string>(std::move(bytes))), label_(std::move(label)) {}

void BytesReader::read(char* dst, size_t n, size_t offset) const {
  if (n) std::memcpy(dst, bytes_->data() + offset, n);
}

std::shared_ptr<const char> BytesReader::contents() const {
  // Shares ownership of the string (aliasing constructor).
  return std::shared_ptr<const char>(bytes_, bytes_->data());
}

}  // namespace tessera::io
