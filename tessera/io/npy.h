// The .npy format, shared by npy.cpp and the .npz archives (not a public header).
//
// Note [The .npy layout]
// A .npy file is
//   "\x93NUMPY", major, minor (1.0: header length uint16; 2.0 and 3.0: uint32),
//   the header: a Python dict literal such as
//     {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//   padded with spaces and ended by '\n' so that the data starts at a multiple
//   of 64 bytes, then the data: the elements in C order, or in Fortran order
//   when fortran_order is True. descr is the array-protocol type string: byte
//   order ('<' little, '>' big, '|' not applicable, '=' native), kind and size
//   ('f4', 'i8', 'b1', 'c8'); '<V2' is bfloat16 as MLX writes it.
#pragma once

#include <string>

#include "tessera/io/bytes.h"

namespace tessera::io::detail {

// What the .npy file of an array consists of: the header (magic to '\n') and
// the array, evaluated, whose bytes follow it. `op` and `name` are for errors
// (bfloat16 has no NumPy dtype).
struct Npy {
  std::string header;
  array data;
};
Npy npy_of(const array& a, const char* op, const std::string& name);

// The array of a .npy file whose bytes are b (a file, or an archive member).
array read_npy(const Bytes& b, StreamOrDevice s);

}  // namespace tessera::io::detail
