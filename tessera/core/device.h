// Devices and streams.
//
//   Stream s = new_stream(Device::cpu);
//   auto y = add(x, x, s);          // runs on s
//   StreamContext ctx(s);           // s is the default within this scope
#pragma once

#include <ostream>
#include <variant>
#include <vector>

namespace tessera {

struct Device {
  enum class DeviceType { cpu, gpu };
  static constexpr DeviceType cpu = DeviceType::cpu;
  static constexpr DeviceType gpu = DeviceType::gpu;

  DeviceType type;
  int index;

  constexpr Device(DeviceType type, int index = 0) : type(type), index(index) {}
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

std::ostream& operator<<(std::ostream& os, const Device& d);

const Device& default_device();
void set_default_device(const Device& d);
bool is_available(const Device& d);
int device_count(Device::DeviceType type);

struct Stream {
  int index;
  Device device;
  Stream(int index, Device device) : index(index), device(device) {}
  bool operator==(const Stream& o) const { return index == o.index; }
  bool operator!=(const Stream& o) const { return index != o.index; }
};

std::ostream& operator<<(std::ostream& os, const Stream& s);

using StreamOrDevice = std::variant<std::monostate, Stream, Device, Device::DeviceType>;

// The default stream of a device, the stream named by s, or the default stream
// of the default device when s is empty.
Stream to_stream(StreamOrDevice s);
Stream to_stream(StreamOrDevice s, Device default_device);

Stream default_stream(Device d);
void set_default_stream(Stream s);
Stream new_stream(Device d);
std::vector<Stream> get_streams();

// Block until every task queued on s (or on every stream) has run.
void synchronize(Stream s);
void synchronize();

// Sets the default device and its default stream for the scope.
class StreamContext {
 public:
  explicit StreamContext(StreamOrDevice s);
  ~StreamContext();
  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;

 private:
  Device prev_device_;
  Stream prev_stream_;
};

}  // namespace tessera
