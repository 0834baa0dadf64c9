// Where the formats of io.h read and write their bytes: a Reader (a mapped
// file, or bytes in memory) and a Writer (a file replaced only once complete).
//
//   auto in = std::make_shared<io::FileReader>("w.npy");   // maps the file
//   array a = load(in);
//   auto out = std::make_shared<io::FileWriter>("x.npy");
//   save(out, a);                                         // x.npy appears when complete
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace tessera::io {

class Reader {
 public:
  virtual ~Reader() = default;
  // Names the source in error messages (a path, or "<stream>").
  virtual std::string label() const = 0;
  virtual size_t size() const = 0;
  // Copies the bytes [offset, offset + n), which lie within size(), to dst.
  virtual void read(char* dst, size_t n, size_t offset) const = 0;
  // All size() bytes in memory, valid while the returned pointer or a copy of
  // it lives (arrays loaded without a copy hold one). By default: read() into
  // a new buffer.
  virtual std::shared_ptr<const char> contents() const;
};

class Writer {
 public:
  virtual ~Writer() = default;
  virtual std::string label() const = 0;
  // Appends n bytes; throws std::runtime_error naming the destination on failure.
  virtual void write(const char* data, size_t n) = 0;
  // Every save ends with finish() once all its bytes are written.
  virtual void finish() {}
};

// Note [Saving in place]
// A FileWriter writes a temporary file in the target's directory (so that the
// rename stays within one file system) and, in finish(), flushes it to the
// disk (fsync), closes it and renames it over the target. A writer destroyed
// before finish() (a save that threw) removes its temporary file: an existing
// target is never truncated or half-written, and a failed save leaves no file
// behind.
class FileWriter : public Writer {
 public:
  // Throws std::runtime_error when the temporary file cannot be created.
  explicit FileWriter(std::string path);
  ~FileWriter() override;
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  std::string label() const override { return path_; }
  void write(const char* data, size_t n) override;
  void finish() override;

 private:
  std::string path_;
  std::string temp_;
  int fd_ = -1;
};

// Note [Mapped files]
// A FileReader maps its file privately (copy-on-write; a file system that
// cannot map files is read into memory instead). Arrays loaded from it
// whose bytes lie in the file in their final form use the mapping as their
// memory, without a copy; the mapping lives while any of them does. Such
// memory is borrowed (Note [Borrowed memory] in memory/allocator.h), so no
// kernel writes it in place, and a write through data<T>() would stay private
// to the process. A save over the same path replaces the file by a rename
// (Note [Saving in place]) and leaves the mapped, older contents intact;
// another program that truncates the file in place while it is mapped is the
// one case the loaders cannot guard against (the OS signals a read past the
// new end).
class FileReader : public Reader {
 public:
  // Throws std::runtime_error when the file cannot be opened or mapped.
  explicit FileReader(std::string path);

  std::string label() const override { return path_; }
  size_t size() const override { return size_; }
  void read(char* dst, size_t n, size_t offset) const override;
  std::shared_ptr<const char> contents() const override { return map_; }

 private:
  std::string path_;
  size_t size_ = 0;
  std::shared_ptr<const char> map_;
};

// Bytes already in memory (a stream read whole, a file built by hand).
class BytesReader : public Reader {
 public:
  explicit BytesReader(std::string bytes, std::string label = "<bytes>");

  std::string label() const override { return label_; }
  size_t size() const override { return bytes_->size(); }
  void read(char* dst, size_t n, size_t offset) const override;
  std::shared_ptr<const char> contents() const override;

 private:
  std::shared_ptr<const std::string> bytes_;
  std::string label_;
};

}  // namespace tessera::io
