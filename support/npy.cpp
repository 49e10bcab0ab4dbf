#include "support/npy.h"

#include "support/error.h"
#include "support/half.h"
#include "support/regular_file.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

namespace kiln {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kMaxHeaderBytes = size_t{1} << 20; // NumPy itself writes a few hundred bytes

// The header dictionary: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
public:
  HeaderParser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}')
        break;
      std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        h.descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        h.shape = parse_shape();
        have_shape = true;
      } else {
        bad(fmt::format("an unknown header key '{}'", key));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}')
        bad("',' or '}' after a header entry");
    }
    if (!have_descr || !have_order || !have_shape)
      bad("a header with 'descr', 'fortran_order' and 'shape'");
    return h;
  }

private:
  [[noreturn]] void bad(const std::string& what) const {
    fail("'{}' is not a valid .npy file: expected {} in its header at character {}, got \"{}\"", file_, what,
         pos_, text_.substr(0, 120));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t'))
      ++pos_;
  }
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  void expect(char c) {
    if (peek() != c)
      bad(fmt::format("'{}'", c));
    ++pos_;
  }
  std::string parse_string() {
    char q = peek();
    if (q != '\'' && q != '"')
      bad("a quoted string");
    size_t end = text_.find(q, pos_ + 1);
    if (end == std::string_view::npos)
      bad("a closing quote");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  bool parse_bool() {
    skip_space();
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("True or False for 'fortran_order'");
  }
  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(');
    while (peek() != ')') {
      skip_space();
      size_t start = pos_;
      int64_t v = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10)
          bad("a dimension that fits in 64 bits");
        v = v * 10 + (text_[pos_] - '0');
        ++pos_;
      }
      if (start == pos_)
        bad("a non-negative integer dimension");
      if (peek() == 'L') // Python 2 longs
        ++pos_;
      shape.push_back(v);
      if (peek() == ',')
        ++pos_;
      else if (peek() != ')')
        bad("',' or ')' in the shape");
    }
    ++pos_;
    return shape;
  }

  std::string_view text_, file_;
  size_t pos_ = 0;
};

uint64_t read_uint(const unsigned char* p, int bytes, bool big_endian) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    int shift = big_endian ? 8 * (bytes - 1 - i) : 8 * i;
    v |= uint64_t{p[i]} << shift;
  }
  return v;
}

double decode(const unsigned char* p, const NpyArray& a) {
  uint64_t raw = read_uint(p, a.item_bytes, a.big_endian);
  switch (a.kind) {
  case 'f':
    if (a.item_bytes == 2)
      return f16_bits_to_float(static_cast<uint16_t>(raw));
    if (a.item_bytes == 4)
      return std::bit_cast<float>(static_cast<uint32_t>(raw));
    return std::bit_cast<double>(raw);
  case 'i': {
    int shift = 64 - 8 * a.item_bytes; // sign-extend
    return static_cast<double>(static_cast<int64_t>(raw << shift) >> shift);
  }
  case 'u':
    return static_cast<double>(raw);
  default:
    return raw != 0 ? 1.0 : 0.0; // 'b'
  }
}

// Single-rounding f64 → f32 with round-to-odd: the result keeps a sticky bit, so that a later rounding to
// a narrower format (f16, bf16: at most 11 significant bits, far fewer than f32's 24) rounds as if from x.
float to_f32_round_to_odd(double x) {
  float f = static_cast<float>(x);
  if (std::isnan(x) || static_cast<double>(f) == x)
    return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(x))
    f = std::nextafter(f, 0.0f); // truncate toward zero
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

} // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string NpyArray::descr() const {
  char order = item_bytes == 1 ? '|' : (big_endian ? '>' : '<');
  return fmt::format("{}{}{}", order, kind, item_bytes);
}

std::string NpyArray::dtype_str() const {
  switch (kind) {
  case 'f':
    return fmt::format("float{}", item_bytes * 8);
  case 'i':
    return fmt::format("int{}", item_bytes * 8);
  case 'u':
    return fmt::format("uint{}", item_bytes * 8);
  default:
    return "bool";
  }
}

std::string NpyArray::shape_str() const {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

// The preamble: magic, version and header length. Returns where the data starts (the header's end); `bytes`
// needs only its first 12 bytes (fewer when the file is shorter).
size_t npy_data_start(std::string_view bytes, std::string_view name) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic)
    fail("'{}' is not an .npy file: it does not start with the NumPy magic \"\\x93NUMPY\"", name);
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = u[6];
  if (major < 1 || major > 3)
    fail("'{}': .npy format version {}.{} is not supported (expected 1.0, 2.0 or 3.0)", name, major,
         int{u[7]});
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes)
    fail("'{}' is truncated: the .npy header length is cut off", name);
  const size_t header_len = static_cast<size_t>(read_uint(u + 8, static_cast<int>(len_bytes), false));
  if (header_len > kMaxHeaderBytes)
    fail("'{}': its .npy header says it is {} bytes long; kiln reads headers of at most {} bytes", name,
         header_len, kMaxHeaderBytes);
  return 8 + len_bytes + header_len;
}

void check_header_fits(size_t data_start, uint64_t file_bytes, std::string_view name) {
  if (file_bytes < data_start)
    fail("'{}' is truncated: its header ends at byte {} but the file has {} bytes", name, data_start,
         file_bytes);
}

// The array described by the header in bytes [0, data_start), without its values.
NpyArray parse_header(std::string_view bytes, size_t data_start, std::string_view name) {
  const size_t header_start = bytes[6] == 1 ? 10 : 12;
  Header h = HeaderParser(bytes.substr(header_start, data_start - header_start), name).parse();
  NpyArray a;
  a.fortran_order = h.fortran_order;
  a.shape = h.shape;
  const std::string& d = h.descr;
  bool valid = d.size() >= 3 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=');
  if (valid) {
    a.kind = d[1];
    a.big_endian = d[0] == '>';
    char* end = nullptr;
    long bytes_per = std::strtol(d.c_str() + 2, &end, 10);
    a.item_bytes = static_cast<int>(bytes_per);
    valid = *end == '\0' && ((a.kind == 'f' && (bytes_per == 2 || bytes_per == 4 || bytes_per == 8)) ||
                             ((a.kind == 'i' || a.kind == 'u') &&
                              (bytes_per == 1 || bytes_per == 2 || bytes_per == 4 || bytes_per == 8)) ||
                             (a.kind == 'b' && bytes_per == 1));
  }
  if (!valid)
    fail("'{}': dtype '{}' is not supported; expected a float (f2, f4, f8), integer or bool array", name, d);
  return a;
}

// The data bytes the header declares, checked against the `have` bytes the file holds after its header
// before anything is allocated: a header may declare any size.
uint64_t checked_data_bytes(const NpyArray& a, uint64_t have, size_t data_start, std::string_view name) {
  const bool empty = std::find(a.shape.begin(), a.shape.end(), 0) != a.shape.end();
  unsigned __int128 need = empty ? 0 : a.item_bytes; // each step stays below 2^64 * 2^63
  bool huge = false;                                 // more than 2^64 bytes
  for (size_t k = 0; k < a.shape.size() && !empty && !huge; ++k) {
    need *= static_cast<uint64_t>(a.shape[k]);
    huge = need > std::numeric_limits<uint64_t>::max();
  }
  if (huge)
    fail("'{}' is truncated: shape {} of {} declares more than 2^64 data bytes, but the file holds {} after "
         "its {}-byte header",
         name, a.shape_str(), a.dtype_str(), have, data_start);
  const uint64_t n = static_cast<uint64_t>(need);
  if (have < n)
    fail("'{}' is truncated: shape {} of {} declares {} data bytes, but the file holds {} after its {}-byte "
         "header",
         name, a.shape_str(), a.dtype_str(), n, have, data_start);
  if (have > n)
    fail("'{}' has {} bytes after its data (shape {} of {} needs {}); not a single .npy array", name,
         have - n, a.shape_str(), a.dtype_str(), n);
  return n;
}

// Fills a.values from the file's data bytes, in C order.
void decode_values(NpyArray& a, std::string_view data_bytes) {
  const int64_t numel = a.numel();
  a.values.resize(static_cast<size_t>(numel));
  const auto* data = reinterpret_cast<const unsigned char*>(data_bytes.data());
  if (!a.fortran_order) {
    for (int64_t i = 0; i < numel; ++i)
      a.values[static_cast<size_t>(i)] = decode(data + i * a.item_bytes, a);
    return;
  }
  // Fortran order: the first index varies fastest in the file. Walk C order and compute each file offset.
  const size_t rank = a.shape.size();
  std::vector<int64_t> fstride(rank, 1), idx(rank, 0);
  for (size_t k = 1; k < rank; ++k)
    fstride[k] = fstride[k - 1] * a.shape[k - 1];
  for (int64_t i = 0; i < numel; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < rank; ++k)
      off += idx[k] * fstride[k];
    a.values[static_cast<size_t>(i)] = decode(data + off * a.item_bytes, a);
    for (size_t k = rank; k-- > 0;) { // C-order increment: last index fastest
      if (++idx[k] < a.shape[k])
        break;
      idx[k] = 0;
    }
  }
}

} // namespace

NpyArray parse_npy(std::string_view bytes, std::string_view name) {
  const size_t data_start = npy_data_start(bytes, name);
  check_header_fits(data_start, bytes.size(), name);
  NpyArray a = parse_header(bytes, data_start, name);
  checked_data_bytes(a, bytes.size() - data_start, data_start, name);
  decode_values(a, bytes.substr(data_start));
  return a;
}

NpyArray read_npy(const std::string& path, const std::function<void(const NpyArray&)>& check_header) {
  const RegularFile file(path, Symlinks::Follow);
  const size_t data_start = npy_data_start(file.read(0, std::min<uint64_t>(file.size(), 12)), path);
  check_header_fits(data_start, file.size(), path);
  NpyArray a = parse_header(file.read(0, data_start), data_start, path);
  const uint64_t data_bytes = checked_data_bytes(a, file.size() - data_start, data_start, path);
  if (check_header)
    check_header(a);
  try {
    decode_values(a, file.read(data_start, data_bytes));
  } catch (const std::bad_alloc&) {
    fail("out of host memory reading '{}': shape {} of {} is {} bytes of data, read as {} values of 8 bytes",
         path, a.shape_str(), a.dtype_str(), data_bytes, a.numel());
  }
  return a;
}

double round_exactly_to(double x, DType t) {
  if (t == DType::f16 || t == DType::bf16)
    return round_to_dtype(static_cast<double>(to_f32_round_to_odd(x)), t);
  return round_to_dtype(x, t);
}

std::string serialize_npy(DType dtype, const std::vector<int64_t>& shape, const std::vector<double>& values) {
  std::string descr;
  int bytes = 0;
  switch (dtype) {
  case DType::f16:
    descr = "<f2", bytes = 2;
    break;
  case DType::f32:
    descr = "<f4", bytes = 4;
    break;
  case DType::f64:
    descr = "<f8", bytes = 8;
    break;
  case DType::bf16:
    fail(".npy output as bf16 is not supported: NumPy has no bfloat16 dtype; use f32, f16 or f64");
  default:
    fail(".npy output supports f16, f32 and f64 only");
  }
  int64_t numel = 1;
  for (int64_t d : shape)
    numel *= d;
  KILN_INTERNAL_CHECK(numel == static_cast<int64_t>(values.size()),
                      "shape holds {} elements, {} values given", numel, values.size());
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    shape_text += (i ? ", " : "") + std::to_string(shape[i]);
  shape_text += shape.size() == 1 ? ",)" : ")";
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_text);
  // Pad with spaces so that the data starts on a 64-byte boundary; the header ends with '\n'.
  size_t total = kMagic.size() + 2 + 2 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  KILN_INTERNAL_CHECK(dict.size() <= 0xffff, "header of {} bytes does not fit format 1.0", dict.size());

  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.reserve(out.size() + values.size() * static_cast<size_t>(bytes));
  for (double v : values) {
    uint64_t raw = 0;
    double r = round_exactly_to(v, dtype);
    if (dtype == DType::f16)
      raw = float_to_f16_bits(static_cast<float>(r));
    else if (dtype == DType::f32)
      raw = std::bit_cast<uint32_t>(static_cast<float>(r));
    else
      raw = std::bit_cast<uint64_t>(r);
    for (int i = 0; i < bytes; ++i)
      out += static_cast<char>((raw >> (8 * i)) & 0xff);
  }
  return out;
}

} // namespace kiln
