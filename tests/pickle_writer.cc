#include "tests/pickle_writer.h"

#include <algorithm>

namespace dsc::test {

namespace {
void Le32(std::string* o, uint32_t v) {
  for (int i = 0; i < 4; ++i) o->push_back(char(v >> (8 * i)));
}
}  // namespace

Py2Pickler::Py2Pickler() { out_ = std::string("\x80\x02", 2); }

void Py2Pickler::Put() {
  if (memo_ < 256) {
    out_ += 'q';
    out_.push_back(char(memo_));
  } else {
    out_ += 'r';
    Le32(&out_, memo_);
  }
  ++memo_;
}

void Py2Pickler::BeginDict(size_t items) {
  out_ += '}';
  Put();
  if (items > 1) out_ += '(';
  dict_items_.push_back(items);
}

void Py2Pickler::EndDict() {
  out_ += dict_items_.back() > 1 ? 'u' : 's';
  dict_items_.pop_back();
}

void Py2Pickler::Str(const std::string& s) {
  if (s.size() < 256) {
    out_ += 'U';
    out_.push_back(char(s.size()));
  } else {
    out_ += 'T';
    Le32(&out_, uint32_t(s.size()));
  }
  out_ += s;
  Put();
}

void Py2Pickler::Int(int64_t v) {
  if (v >= 0 && v < 256) {
    out_ += 'K';
    out_.push_back(char(v));
  } else if (v >= 0 && v < 65536) {
    out_ += 'M';
    out_.push_back(char(v & 0xFF));
    out_.push_back(char(v >> 8));
  } else {
    out_ += 'J';
    Le32(&out_, uint32_t(int32_t(v)));
  }
}

void Py2Pickler::IntList(const std::vector<int>& v) {
  out_ += ']';
  Put();
  for (size_t i = 0; i < v.size(); i += 1000) {
    size_t n = std::min<size_t>(1000, v.size() - i);
    if (n > 1) out_ += '(';
    for (size_t k = 0; k < n; ++k) Int(v[i + k]);
    out_ += n > 1 ? 'e' : 'a';
  }
}

void Py2Pickler::StrList(const std::vector<std::string>& v) {
  out_ += ']';
  Put();
  for (size_t i = 0; i < v.size(); i += 1000) {
    size_t n = std::min<size_t>(1000, v.size() - i);
    if (n > 1) out_ += '(';
    for (size_t k = 0; k < n; ++k) Str(v[i + k]);
    out_ += n > 1 ? 'e' : 'a';
  }
}

void Py2Pickler::U8Array(const uint8_t* data, int64_t rows, int64_t cols) {
  out_ += "cnumpy.core.multiarray\n_reconstruct\n";
  Put();
  out_ += "cnumpy\nndarray\n";
  Put();
  Int(0);
  out_ += '\x85';  // TUPLE1
  Put();
  Str("b");
  out_ += '\x87';  // TUPLE3
  Put();
  out_ += 'R';
  Put();
  out_ += '(';
  Int(1);
  Int(rows);
  Int(cols);
  out_ += '\x86';  // TUPLE2 (shape)
  Put();
  out_ += "cnumpy\ndtype\n";
  Put();
  Str("u1");
  Int(0);
  Int(1);
  out_ += '\x87';
  Put();
  out_ += 'R';
  Put();
  out_ += '(';
  Int(3);
  Str("|");
  out_ += "NNN";
  Int(-1);
  Int(-1);
  Int(0);
  out_ += 't';
  Put();
  out_ += 'b';
  out_ += '\x89';  // NEWFALSE: C order
  Str(std::string(reinterpret_cast<const char*>(data), size_t(rows * cols)));
  out_ += 't';
  Put();
  out_ += 'b';
}

std::string Py2Pickler::Finish() { return out_ + "."; }

}  // namespace dsc::test
