// .npz files: zip archives of .npy files.
//
// Note [The zip layout]
// An archive is, for each member, a local header and the member's bytes, then
// the central directory (one entry per member), then the end record:
//   local header    sig 0x04034b50, version, flags, method, time, date, crc32,
//                   compressed size, size (uint32 each), name length, extra
//                   length (uint16), name, extra; 30 bytes before the name
//   central entry   sig 0x02014b50, versions, flags, method, time, date, crc32,
//                   sizes, name/extra/comment lengths, disk, attributes, offset
//                   of the local header; 46 bytes before the name
//   end record      sig 0x06054b50, disks, entry counts (uint16), directory
//                   size and offset (uint32), comment length; 22 bytes + comment
// ZIP64 (sizes or offsets of 4 GiB and more, 65535 entries and more): a field
// that does not fit holds all ones and the real value is in the entry's extra
// field 0x0001 (size, compressed size, offset: those that overflowed, in that
// order); the end record is preceded by a ZIP64 end record (sig 0x06064b50,
// 64-bit counts, directory size and offset) and its locator (sig 0x07064b50,
// 20 bytes, holding the ZIP64 end record's offset). The central directory is
// authoritative: a local header may carry zeros and a data descriptor instead
// of sizes (flag bit 3), as streaming writers do. Methods: 0 stored, 8
// deflated (raw deflate). Written here: members stored with their sizes known
// up front, or deflated and followed by a data descriptor (sig 0x08074b50,
// crc32, sizes; 64-bit sizes under ZIP64), and the ZIP64 fields only where a
// value needs them.
#include <zlib.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "tessera/io/io.h"
#include "tessera/io/npy.h"

namespace tessera {

namespace io {

namespace {

using namespace detail;  // the byte readers and writers of bytes.h

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr uint32_t kDescriptorSig = 0x08074b50;
constexpr uint32_t kAllOnes32 = 0xffffffffu;
constexpr uint16_t kAllOnes16 = 0xffffu;
// Deflate expands data by at most about 1032:1; a larger claim is corrupt.
constexpr uint64_t kMaxDeflateRatio = 1032;

struct Member {
  std::string name;
  uint16_t flags, method;
  uint32_t crc;
  uint64_t compressed, size, offset;
};

uint32_t crc_of(uint32_t crc, const char* p, uint64_t n) {
  uLong c = crc;
  for (uint64_t done = 0; done < n;) {
    uInt k = static_cast<uInt>(std::min<uint64_t>(n - done, 1u << 30));
    c = crc32(c, reinterpret_cast<const Bytef*>(p + done), k);
    done += k;
  }
  return static_cast<uint32_t>(c);
}

[[noreturn]] void bad_zip(const Bytes& b, const std::string& what) {
  fail("load", "the .npz archive " + b.label + " is corrupt: " + what);
}

// The ZIP64 extra field of a central entry replaces the fields holding all ones.
void apply_zip64_extra(const Bytes& b, std::string_view extra, Member& m, bool size64,
                       bool compressed64, bool offset64) {
  size_t i = 0;
  while (i + 4 <= extra.size()) {
    uint16_t id = read_le<uint16_t>(extra.data() + i);
    uint16_t n = read_le<uint16_t>(extra.data() + i + 2);
    if (i + 4 + n > extra.size()) break;
    if (id == 0x0001) {
      size_t j = i + 4;
      for (auto [wanted, field] : {std::pair{size64, &m.size}, std::pair{compressed64, &m.compressed},
                                   std::pair{offset64, &m.offset}}) {
        if (!wanted) continue;
        if (j + 8 > i + 4 + n) bad_zip(b, "the ZIP64 field of member " + repr(m.name) + " is short");
        *field = read_le<uint64_t>(extra.data() + j);
        j += 8;
      }
      return;
    }
    i += 4 + n;
  }
  if (size64 || compressed64 || offset64) {
    bad_zip(b, "member " + repr(m.name) + " lacks the ZIP64 field its sizes refer to");
  }
}

std::vector<Member> central_directory(const Bytes& b) {
  // The end record: the last signature that leaves room for its comment.
  size_t end = std::string::npos;
  size_t lowest = b.size > 22 + 0xffff ? b.size - 22 - 0xffff : 0;
  for (size_t p = b.size >= 22 ? b.size - 22 + 1 : 0; p-- > lowest;) {
    if (read_le<uint32_t>(b.data + p) == kEndSig &&
        p + 22 + read_le<uint16_t>(b.data + p + 20) <= b.size) {
      end = p;
      break;
    }
  }
  if (end == std::string::npos) fail("load", b.label + " is not a zip archive (.npz): it has no end record");
  uint64_t count = read_le<uint16_t>(b.data + end + 10);
  uint64_t dir_size = read_le<uint32_t>(b.data + end + 12);
  uint64_t dir_offset = read_le<uint32_t>(b.data + end + 16);
  if (end >= 20 && read_le<uint32_t>(b.data + end - 20) == kLocator64Sig) {
    uint64_t at = read_le<uint64_t>(b.data + end - 20 + 8);
    if (at > end - 20 || end - 20 - at < 56 || read_le<uint32_t>(b.data + at) != kEnd64Sig) {
      bad_zip(b, "its ZIP64 locator points at byte " + std::to_string(at) +
                     ", where no ZIP64 end record is");
    }
    count = read_le<uint64_t>(b.data + at + 32);
    dir_size = read_le<uint64_t>(b.data + at + 40);
    dir_offset = read_le<uint64_t>(b.data + at + 48);
  }
  if (dir_offset > end || dir_size > end - dir_offset) {
    bad_zip(b, "its central directory of " + std::to_string(dir_size) + " bytes at byte " +
                   std::to_string(dir_offset) + " lies beyond the end record at byte " +
                   std::to_string(end));
  }
  Cursor c(b, dir_offset);
  std::vector<Member> members;
  for (uint64_t i = 0; i < count; ++i) {
    std::string what = "central directory entry " + std::to_string(i);
    if (c.get<uint32_t>(what) != kCentralSig) bad_zip(b, what + " has no signature");
    auto fixed = c.take(42, what);
    Member m;
    m.flags = read_le<uint16_t>(fixed.data() + 4);
    m.method = read_le<uint16_t>(fixed.data() + 6);
    m.crc = read_le<uint32_t>(fixed.data() + 12);
    m.compressed = read_le<uint32_t>(fixed.data() + 16);
    m.size = read_le<uint32_t>(fixed.data() + 20);
    uint16_t name_len = read_le<uint16_t>(fixed.data() + 24);
    uint16_t extra_len = read_le<uint16_t>(fixed.data() + 26);
    uint16_t comment_len = read_le<uint16_t>(fixed.data() + 28);
    m.offset = read_le<uint32_t>(fixed.data() + 38);
    m.name = std::string(c.take(name_len, what));
    auto extra = c.take(extra_len, what);
    c.take(comment_len, what);
    apply_zip64_extra(b, extra, m, m.size == kAllOnes32, m.compressed == kAllOnes32,
                      m.offset == kAllOnes32);
    members.push_back(std::move(m));
  }
  if (c.pos() > dir_offset + dir_size) {
    bad_zip(b, "its " + std::to_string(count) + " central directory entries overrun the " +
                   std::to_string(dir_size) + " bytes of the directory");
  }
  return members;
}

// The bytes of one member's .npy file: a part of the archive when stored, else
// inflated into a new buffer.
Bytes member_bytes(const Bytes& b, const Member& m) {
  std::string label = b.label + " member " + repr(m.name);
  if (m.flags & 1) fail("load", label + " is encrypted, which is not supported");
  Bytes zip = b;
  zip.format = "npz";
  Cursor c(zip, m.offset);
  std::string what = "the local header of member " + repr(m.name);
  if (m.offset > b.size || c.get<uint32_t>(what) != kLocalSig) {
    bad_zip(b, "member " + repr(m.name) + " has no local header at byte " + std::to_string(m.offset));
  }
  auto fixed = c.take(26, what);
  c.take(read_le<uint16_t>(fixed.data() + 22), what);
  c.take(read_le<uint16_t>(fixed.data() + 24), what);
  c.need(m.compressed, 1, "the data of member " + repr(m.name));
  const char* data = b.data + c.pos();
  Bytes out;
  out.label = label;
  out.format = "npy";
  out.size = m.size;
  if (m.method == 0) {
    if (m.compressed != m.size) {
      bad_zip(b, "stored member " + repr(m.name) + " has " + std::to_string(m.compressed) +
                     " bytes but claims " + std::to_string(m.size));
    }
    out.owner = b.owner;
    out.data = data;
  } else if (m.method == 8) {
    if (m.size > m.compressed * kMaxDeflateRatio + 1024) {
      bad_zip(b, "deflated member " + repr(m.name) + " of " + std::to_string(m.compressed) +
                     " bytes claims to hold " + std::to_string(m.size));
    }
    auto* p = static_cast<char*>(::operator new(std::max<uint64_t>(m.size, 1), std::align_val_t(64)));
    out.owner = std::shared_ptr<const char>(p, [](const char* q) {
      ::operator delete(const_cast<char*>(q), std::align_val_t(64));
    });
    out.data = p;
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw std::runtime_error("[load] zlib: inflateInit2 failed");
    uint64_t in_left = m.compressed, out_left = m.size;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z.next_out = reinterpret_cast<Bytef*>(p);
    int rc = Z_OK;
    while (rc == Z_OK) {
      uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
      uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(out_left, 1u << 30));
      z.avail_in = in_chunk;
      z.avail_out = out_chunk;
      rc = inflate(&z, Z_NO_FLUSH);
      in_left -= in_chunk - z.avail_in;
      out_left -= out_chunk - z.avail_out;
      if (rc == Z_OK && in_chunk == z.avail_in && out_chunk == z.avail_out) rc = Z_BUF_ERROR;
    }
    std::string why = z.msg ? std::string(" (") + z.msg + ")" : "";
    inflateEnd(&z);
    if (rc != Z_STREAM_END || out_left != 0) {
      bad_zip(b, "deflated member " + repr(m.name) + " does not inflate to its " +
                     std::to_string(m.size) + " bytes" + why);
    }
  } else {
    fail("load", label + " is compressed with zip method " + std::to_string(m.method) +
                     ", which is not supported (0, stored, and 8, deflated, are)");
  }
  if (crc_of(0, out.data, out.size) != m.crc) bad_zip(b, "member " + repr(m.name) + " fails its CRC-32 check");
  return out;
}

// ---- writing ----------------------------------------------------------------

// Counts what it writes, for the offsets of the central directory.
struct Counting {
  Writer& out;
  uint64_t written = 0;
  void write(const std::string& s) { write(s.data(), s.size()); }
  void write(const char* p, uint64_t n) {
    if (n) out.write(p, n);
    written += n;
  }
};

// 1980-01-01 00:00: the members carry no time, so that equal arrays give equal files.
constexpr uint16_t kDosTime = 0, kDosDate = (0 << 9) | (1 << 5) | 1;

void write_member(Counting& w, std::vector<Member>& dir, const std::string& name,
                  const detail::Npy& npy, bool compressed) {
  Member m;
  m.name = name;
  m.method = compressed ? 8 : 0;
  m.offset = w.written;
  m.size = npy.header.size() + npy.data.nbytes();
  const char* data = detail::bytes_of(npy.data);
  // A deflated member's compressed size is known after it is written: it
  // follows in a data descriptor (flag bit 3), with ZIP64 sizes when the
  // compressed size could reach 4 GiB.
  bool zip64 = (compressed ? m.size + m.size / 1000 + 1024 : m.size) >= kAllOnes32;
  m.flags = (compressed ? 8 : 0) |
            (std::any_of(name.begin(), name.end(), [](char c) { return c & 0x80; }) ? 0x800 : 0);
  std::string head;
  put_le(head, kLocalSig);
  put_le(head, uint16_t(zip64 ? 45 : 20));
  put_le(head, m.flags);
  put_le(head, m.method);
  put_le(head, kDosTime);
  put_le(head, kDosDate);
  if (compressed) {
    put_le(head, uint32_t(0));
    put_le(head, zip64 ? kAllOnes32 : 0u);
    put_le(head, zip64 ? kAllOnes32 : 0u);
  } else {
    m.crc = crc_of(crc_of(0, npy.header.data(), npy.header.size()), data, npy.data.nbytes());
    m.compressed = m.size;
    put_le(head, m.crc);
    put_le(head, zip64 ? kAllOnes32 : uint32_t(m.size));
    put_le(head, zip64 ? kAllOnes32 : uint32_t(m.size));
  }
  put_le(head, uint16_t(name.size()));
  put_le(head, uint16_t(zip64 ? 20 : 0));
  head += name;
  if (zip64) {
    put_le(head, uint16_t(0x0001));
    put_le(head, uint16_t(16));
    put_le(head, compressed ? uint64_t(0) : m.size);
    put_le(head, compressed ? uint64_t(0) : m.size);
  }
  w.write(head);
  if (!compressed) {
    w.write(npy.header);
    w.write(data, npy.data.nbytes());
  } else {
    z_stream z{};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw std::runtime_error("[savez] zlib: deflateInit2 failed");
    }
    std::unique_ptr<z_stream, int (*)(z_streamp)> guard(&z, deflateEnd);
    std::vector<char> chunk(1 << 20);
    uint32_t crc = 0;
    uint64_t before = w.written;
    auto pump = [&](const char* p, uint64_t n, bool last) {
      crc = crc_of(crc, p, n);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
      do {
        uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
        z.avail_in = in_chunk;
        int flush = last && in_chunk == n ? Z_FINISH : Z_NO_FLUSH;
        int rc;
        do {
          z.next_out = reinterpret_cast<Bytef*>(chunk.data());
          z.avail_out = static_cast<uInt>(chunk.size());
          rc = deflate(&z, flush);
          if (rc == Z_STREAM_ERROR) throw std::runtime_error("[savez] zlib: deflate failed");
          w.write(chunk.data(), chunk.size() - z.avail_out);
        } while (z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
        n -= in_chunk;
      } while (n > 0);
    };
    pump(npy.header.data(), npy.header.size(), false);
    pump(data, npy.data.nbytes(), true);
    m.crc = crc;
    m.compressed = w.written - before;
    std::string desc;
    put_le(desc, kDescriptorSig);
    put_le(desc, m.crc);
    if (zip64) {
      put_le(desc, m.compressed);
      put_le(desc, m.size);
    } else {
      put_le(desc, uint32_t(m.compressed));
      put_le(desc, uint32_t(m.size));
    }
    w.write(desc);
  }
  dir.push_back(std::move(m));
}

void write_directory(Counting& w, const std::vector<Member>& dir) {
  uint64_t start = w.written;
  for (auto& m : dir) {
    bool size64 = m.size >= kAllOnes32, comp64 = m.compressed >= kAllOnes32,
         off64 = m.offset >= kAllOnes32;
    std::string extra;
    for (auto [big, v] : {std::pair{size64, m.size}, std::pair{comp64, m.compressed},
                          std::pair{off64, m.offset}}) {
      if (big) put_le(extra, v);
    }
    std::string e;
    put_le(e, kCentralSig);
    put_le(e, uint16_t(extra.empty() ? 20 : 45));  // made by: MS-DOS attributes
    put_le(e, uint16_t(extra.empty() ? 20 : 45));
    put_le(e, m.flags);
    put_le(e, m.method);
    put_le(e, kDosTime);
    put_le(e, kDosDate);
    put_le(e, m.crc);
    put_le(e, comp64 ? kAllOnes32 : uint32_t(m.compressed));
    put_le(e, size64 ? kAllOnes32 : uint32_t(m.size));
    put_le(e, uint16_t(m.name.size()));
    put_le(e, uint16_t(extra.empty() ? 0 : extra.size() + 4));
    put_le(e, uint16_t(0));  // comment
    put_le(e, uint16_t(0));  // disk
    put_le(e, uint16_t(0));  // internal attributes
    put_le(e, uint32_t(0));  // external attributes
    put_le(e, off64 ? kAllOnes32 : uint32_t(m.offset));
    e += m.name;
    if (!extra.empty()) {
      put_le(e, uint16_t(0x0001));
      put_le(e, uint16_t(extra.size()));
      e += extra;
    }
    w.write(e);
  }
  uint64_t size = w.written - start, count = dir.size();
  std::string end;
  if (count >= kAllOnes16 || size >= kAllOnes32 || start >= kAllOnes32) {
    uint64_t at = w.written;
    put_le(end, kEnd64Sig);
    put_le(end, uint64_t(44));
    put_le(end, uint16_t(45));
    put_le(end, uint16_t(45));
    put_le(end, uint32_t(0));
    put_le(end, uint32_t(0));
    put_le(end, count);
    put_le(end, count);
    put_le(end, size);
    put_le(end, start);
    put_le(end, kLocator64Sig);
    put_le(end, uint32_t(0));
    put_le(end, at);
    put_le(end, uint32_t(1));
  }
  put_le(end, kEndSig);
  put_le(end, uint16_t(0));
  put_le(end, uint16_t(0));
  put_le(end, uint16_t(std::min<uint64_t>(count, kAllOnes16)));
  put_le(end, uint16_t(std::min<uint64_t>(count, kAllOnes16)));
  put_le(end, uint32_t(std::min<uint64_t>(size, kAllOnes32)));
  put_le(end, uint32_t(std::min<uint64_t>(start, kAllOnes32)));
  put_le(end, uint16_t(0));
  w.write(end);
}

}  // namespace

Entries<array> read_npz(const Reader& in, StreamOrDevice s) {
  Bytes b = detail::bytes_of(in, "npz");
  Entries<array> out;
  std::set<std::string> seen;
  for (auto& m : central_directory(b)) {
    if (!m.name.empty() && m.name.back() == '/') continue;  // a directory
    std::string key = m.name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    if (!seen.insert(key).second) bad_zip(b, "it holds two members named " + repr(key));
    out.emplace_back(key, detail::read_npy(member_bytes(b, m), s));
  }
  return out;
}

void write_npz(Writer& out, const Entries<array>& arrays, bool compressed) {
  const char* op = compressed ? "savez_compressed" : "savez";
  std::set<std::string> names;
  for (auto& [name, a] : arrays) {
    if (!names.insert(name).second) fail(op, "two arrays are named " + repr(name));
    if (name.size() + 4 > 0xffff) fail(op, "the name " + repr(name.substr(0, 40)) + "... is too long for a zip archive");
    // npy_of refuses bfloat16: before anything is written.
    if (a.dtype() == bfloat16) detail::npy_of(a, op, repr(name));
  }
  Counting w{out};
  std::vector<Member> dir;
  for (auto& [name, a] : arrays) {
    write_member(w, dir, name + ".npy", detail::npy_of(a, op, repr(name)), compressed);
  }
  write_directory(w, dir);
  out.finish();
}

}  // namespace io

void savez(std::shared_ptr<io::Writer> out, const std::unordered_map<std::string, array>& arrays,
           bool compressed) {
  io::write_npz(*out, io::detail::sorted(arrays), compressed);
}

void savez(std::string file, const std::unordered_map<std::string, array>& arrays,
           bool compressed) {
  savez(std::make_shared<io::FileWriter>(io::with_extension(std::move(file), ".npz")), arrays,
        compressed);
}

std::unordered_map<std::string, array> load_npz(std::shared_ptr<io::Reader> in, StreamOrDevice s) {
  return io::detail::to_map(io::read_npz(*in, s));
}

std::unordered_map<std::string, array> load_npz(std::string file, StreamOrDevice s) {
  return load_npz(std::make_shared<io::FileReader>(std::move(file)), s);
}

}  // namespace tessera
