#include "writer/pickle.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "format/bytes.h"
#include "format/error.h"

namespace dsc::pickle {

namespace {

using Kind = Value::Kind;

Ref Make(Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}

bool IsContainer(Kind k) { return k == Kind::kList || k == Kind::kTuple || k == Kind::kDict; }

bool IsAny(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

// UTF-8 text whose code points are all < 256 back to bytes (how Python 3 pickles bytes at protocol 2).
bool Latin1FromUtf8(const std::string& in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    uint8_t c = uint8_t(in[i]);
    if (c < 0x80) { out->push_back(char(c)); continue; }
    if ((c & 0xE0) != 0xC0 || i + 1 >= in.size()) return false;
    uint32_t cp = (uint32_t(c & 0x1F) << 6) | (uint8_t(in[i + 1]) & 0x3F);
    if (cp > 0xFF) return false;
    out->push_back(char(cp));
    ++i;
  }
  return true;
}

class Machine {
 public:
  Machine(const uint8_t* p, size_t n) : p_(p), n_(n), copy_budget_(kMaxCopyFactor * n + kMaxCopySlack) {}
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;
  // A parse that failed may have left lists or dicts holding themselves (shared_ptr cycles): empty
  // every container so that all of them are freed. A finished parse was checked to have no cycle.
  ~Machine() {
    if (finished_) return;
    for (const Ref& c : containers_) {
      c->items.clear();
      c->dict.clear();
    }
  }

  Ref Run() {
    while (true) {
      op_at_ = pos_;
      uint8_t op = Byte();
      switch (op) {
        case 0x80: Byte(); break;                 // PROTO
        case 0x95: Take(8); break;                // FRAME (length only)
        case '}': Push(Container(Kind::kDict)); break; // EMPTY_DICT
        case ']': Push(Container(Kind::kList)); break; // EMPTY_LIST
        case ')': Push(Container(Kind::kTuple)); break;
        case '(': marks_.push_back(stack_.size()); break;
        case 't': {
          auto t = Container(Kind::kTuple);
          t->items = PopToMark();
          for (const Ref& v : t->items) Hold(t.get(), *v);
          Push(t);
          break;
        }
        case 0x85: case 0x86: case 0x87: {      // TUPLE1..3
          size_t k = op - 0x84;
          auto t = Container(Kind::kTuple);
          Need(k);
          t->items.assign(stack_.end() - k, stack_.end());
          stack_.resize(stack_.size() - k);
          for (const Ref& v : t->items) Hold(t.get(), *v);
          Push(t);
          break;
        }
        case 'q': memo_[Byte()] = Top(); break;   // BINPUT
        case 'r': memo_[U32()] = Top(); break;    // LONG_BINPUT
        case 0x94: memo_[uint32_t(memo_.size())] = Top(); break;  // MEMOIZE
        case 'h': Push(Get(Byte())); break;       // BINGET
        case 'j': Push(Get(U32())); break;        // LONG_BINGET
        case 'c': {                               // GLOBAL "module\nname\n"
          std::string mod = Line(), name = Line();
          Spend(mod.size() + name.size());
          auto g = Make(Kind::kGlobal);
          g->s = mod + "." + name;
          Push(g);
          break;
        }
        case 0x93: {                              // STACK_GLOBAL
          Ref name = Pop(), mod = Pop();
          if (mod->kind != Kind::kStr || name->kind != Kind::kStr) Fail("STACK_GLOBAL needs two strings");
          Spend(mod->s.size() + name->s.size());  // the same memoised strings may be glued many times
          auto g = Make(Kind::kGlobal);
          g->s = mod->s + "." + name->s;
          Push(g);
          break;
        }
        case 'R': case 0x81: { Ref args = Pop(), fn = Pop(); Push(Reduce(*fn, *args)); break; }  // REDUCE, NEWOBJ
        case 'b': { Ref state = Pop(); Build(*Top(), *state); break; }
        case 's': {
          Ref v = Pop(), k = Pop();
          Value* d = DictOf(Top());
          Hold(d, *k);
          Hold(d, *v);
          d->dict.emplace_back(k, v);
          break;
        }
        case 'u': {
          auto items = PopToMark();
          if (items.size() % 2) Fail("SETITEMS with an odd number of items");
          Value* d = DictOf(Top());
          for (const Ref& v : items) Hold(d, *v);
          for (size_t i = 0; i < items.size(); i += 2) d->dict.emplace_back(items[i], items[i + 1]);
          break;
        }
        case 'a': {
          Ref v = Pop();
          Value* l = ListOf(Top());
          Hold(l, *v);
          l->items.push_back(v);
          break;
        }
        case 'e': {
          auto items = PopToMark();
          Value* l = ListOf(Top());
          for (const Ref& v : items) Hold(l, *v);
          l->items.insert(l->items.end(), items.begin(), items.end());
          break;
        }
        case 'J': PushInt(int32_t(U32())); break;
        case 'K': PushInt(Byte()); break;
        case 'M': { const uint8_t* b = Take(2); PushInt(le::get16(b)); break; }
        case 0x8a: PushInt(Long(Byte())); break;  // LONG1
        case 0x8b: PushInt(Long(U32())); break;   // LONG4
        case 'N': Push(Make(Kind::kNone)); break;
        case 0x88: case 0x89: { auto b = Make(Kind::kBool); b->i = op == 0x88; Push(b); break; }
        case 'G': {                               // BINFLOAT, big-endian double
          const uint8_t* b = Take(8);
          uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = bits << 8 | b[i];
          auto f = Make(Kind::kFloat);
          std::memcpy(&f->f, &bits, 8);
          Push(f);
          break;
        }
        case 'U': PushBytes(Kind::kBytes, Byte()); break;   // SHORT_BINSTRING (py2 str)
        case 'T': PushBytes(Kind::kBytes, U32()); break;    // BINSTRING
        case 'C': PushBytes(Kind::kBytes, Byte()); break;   // SHORT_BINBYTES
        case 'B': PushBytes(Kind::kBytes, U32()); break;    // BINBYTES
        case 0x8e: PushBytes(Kind::kBytes, U64()); break;   // BINBYTES8
        case 0x96: PushBytes(Kind::kBytes, U64()); break;   // BYTEARRAY8
        case 0x8c: PushBytes(Kind::kStr, Byte()); break;    // SHORT_BINUNICODE
        case 'X': PushBytes(Kind::kStr, U32()); break;      // BINUNICODE
        case 0x8d: PushBytes(Kind::kStr, U64()); break;     // BINUNICODE8
        case '.': {
          if (stack_.size() != 1) Fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
          CheckGraph();
          finished_ = true;
          return stack_.back();
        }
        case 0x97: case 0x98: Fail("out-of-band buffers are not supported");
        default: Fail("unsupported opcode 0x" + Hex(op));
      }
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& why) {
    throw Error("pickle: " + why + " at byte " + std::to_string(op_at_));
  }
  [[noreturn]] void FailAt(uint64_t at, const std::string& why) {
    op_at_ = at;
    Fail(why);
  }
  [[noreturn]] void FailDepth() { Fail("values nested deeper than " + std::to_string(kMaxDepth) + " levels"); }

  // Counts bytes about to be copied against the budget (pickle.h): fails before the allocation.
  void Spend(uint64_t k) {
    if (k > copy_budget_)
      Fail("the pickle materialises more than " + std::to_string(kMaxCopyFactor) + " x its size + " +
           std::to_string(kMaxCopySlack >> 20) + " MiB (" + std::to_string(kMaxCopyFactor * n_ + kMaxCopySlack) +
           " bytes)");
    copy_budget_ -= k;
  }

  // A new list, tuple or dict, remembered so that a failed parse can break any cycles (~Machine).
  Ref Container(Kind k) {
    auto c = Make(k);
    c->depth = 1;
    c->changed_at = op_at_;
    containers_.push_back(c);
    return c;
  }
  // Container c gets v: its depth as far as known now. Catches deep nesting built bottom-up (the usual
  // way) at the opcode that does it; CheckGraph catches the rest (containers changed after being nested).
  void Hold(Value* c, const Value& v) {
    if (v.depth >= kMaxDepth) FailDepth();
    c->depth = std::max(c->depth, v.depth + 1);
    c->changed_at = op_at_;
  }

  // The whole object graph, once, without recursion: no container holds itself (directly or through
  // others) and none nests deeper than kMaxDepth. Linear: every container and reference is seen once.
  void CheckGraph() {
    struct Seen {
      bool open;        // on the current path
      uint32_t height;  // when done: container levels at and below
      size_t frame;     // when open: its index in the path
    };
    struct Frame {
      const Value* v;
      size_t next;
      uint32_t height;
    };
    std::unordered_map<const Value*, Seen> seen;
    seen.reserve(containers_.size());
    std::vector<Frame> path;
    // The latest change among the containers path[from..]: the opcode that closed a cycle through them
    // or made them too deep is at or before it.
    auto latest = [&path](size_t from) {
      uint64_t at = 0;
      for (size_t i = from; i < path.size(); ++i) at = std::max(at, path[i].v->changed_at);
      return at;
    };
    for (const Ref& start : containers_) {
      if (seen.count(start.get())) continue;
      seen[start.get()] = {true, 0, 0};
      path.push_back({start.get(), 0, 1});
      while (!path.empty()) {
        Frame& f = path.back();
        const Value& v = *f.v;
        const size_t n = v.items.size() + 2 * v.dict.size();
        if (f.next == n) {
          const uint32_t h = f.height;
          seen[f.v] = {false, h, 0};
          path.pop_back();
          if (!path.empty()) path.back().height = std::max(path.back().height, h + 1);
          continue;
        }
        const size_t i = f.next++;
        const Value* c = i < v.items.size() ? v.items[i].get()
                         : (i - v.items.size()) % 2 ? v.dict[(i - v.items.size()) / 2].second.get()
                                                    : v.dict[(i - v.items.size()) / 2].first.get();
        if (!IsContainer(c->kind)) continue;
        auto it = seen.find(c);
        if (it == seen.end()) {
          if (path.size() >= kMaxDepth) FailAt(latest(0), "values nested deeper than " + std::to_string(kMaxDepth) + " levels");
          seen[c] = {true, 0, path.size()};
          path.push_back({c, 0, 1});  // f is not used after this
        } else if (it->second.open) {
          FailAt(latest(it->second.frame), "a list or dict contains itself (a reference cycle)");
        } else {
          if (path.size() + it->second.height > kMaxDepth)
            FailAt(latest(0), "values nested deeper than " + std::to_string(kMaxDepth) + " levels");
          f.height = std::max(f.height, it->second.height + 1);
        }
      }
    }
  }
  static std::string Hex(uint8_t v) {
    const char* d = "0123456789abcdef";
    return std::string{d[v >> 4], d[v & 15]};
  }
  const uint8_t* Take(uint64_t k) {
    if (k > n_ - pos_) Fail("data ends inside an opcode");
    const uint8_t* r = p_ + pos_;
    pos_ += k;
    return r;
  }
  uint8_t Byte() { return *Take(1); }
  uint32_t U32() { return le::get32(Take(4)); }
  uint64_t U64() { return le::get64(Take(8)); }
  std::string Line() {
    size_t start = pos_;
    while (pos_ < n_ && p_[pos_] != '\n') ++pos_;
    if (pos_ >= n_) Fail("unterminated GLOBAL");
    return std::string(reinterpret_cast<const char*>(p_ + start), pos_++ - start);
  }
  int64_t Long(uint64_t k) {
    if (k > 8) Fail("integer too large");
    const uint8_t* b = Take(k);
    uint64_t v = 0;
    for (uint64_t i = 0; i < k; ++i) v |= uint64_t(b[i]) << (8 * i);
    if (k > 0 && k < 8 && (b[k - 1] & 0x80)) v |= ~uint64_t(0) << (8 * k);  // sign-extend
    return int64_t(v);
  }
  void Push(Ref v) { stack_.push_back(std::move(v)); }
  void PushInt(int64_t v) { auto r = Make(Kind::kInt); r->i = v; Push(r); }
  void PushBytes(Kind k, uint64_t len) {
    const uint8_t* b = Take(len);
    Spend(len);
    auto r = Make(k);
    r->s.assign(reinterpret_cast<const char*>(b), len);
    Push(r);
  }
  void Need(size_t k) {
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + k) Fail("stack underflow");
  }
  Ref Pop() { Need(1); Ref r = stack_.back(); stack_.pop_back(); return r; }
  const Ref& Top() { Need(1); return stack_.back(); }
  Ref Get(uint32_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) Fail("memo key " + std::to_string(k) + " not defined");
    return it->second;
  }
  std::vector<Ref> PopToMark() {
    if (marks_.empty()) Fail("no MARK on the stack");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return items;
  }
  Value* DictOf(const Ref& r) { if (r->kind != Kind::kDict) Fail("SETITEM(S) on a non-dict"); return r.get(); }
  Value* ListOf(const Ref& r) { if (r->kind != Kind::kList) Fail("APPEND(S) on a non-list"); return r.get(); }

  static const Value& Arg(const Value& args, size_t i) {
    static const Value none;
    return i < args.items.size() ? *args.items[i] : none;
  }

  void SetDtype(Value* d, const std::string& spec) {
    // "u1", "<i8", "|u1": an optional byte-order prefix, then kind and size.
    d->s = spec;
    if (!spec.empty() && std::strchr("<>|=", spec[0])) {
      d->byte_order = spec[0];
      d->s = spec.substr(1);
    }
  }

  Ref Reduce(const Value& fn, const Value& args) {
    if (fn.kind != Kind::kGlobal) Fail("REDUCE on a non-callable");
    if (args.kind != Kind::kTuple) Fail("REDUCE arguments are not a tuple");
    const std::string& name = fn.s;
    if (IsAny(name, {"numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct"})) {
      return Make(Kind::kArray);  // filled by BUILD
    }
    if (name == "numpy.dtype") {
      if (Arg(args, 0).kind != Kind::kStr && Arg(args, 0).kind != Kind::kBytes) Fail("numpy.dtype needs a string");
      Spend(Arg(args, 0).s.size());
      auto d = Make(Kind::kDtype);
      SetDtype(d.get(), Arg(args, 0).s);
      return d;
    }
    if (name == "_codecs.encode") {
      Spend(Arg(args, 0).s.size());
      auto b = Make(Kind::kBytes);
      if (Arg(args, 0).kind != Kind::kStr || !Latin1FromUtf8(Arg(args, 0).s, &b->s))
        Fail("_codecs.encode of something other than latin-1 text");
      return b;
    }
    if (IsAny(name, {"__builtin__.bytes", "builtins.bytes", "__builtin__.bytearray", "builtins.bytearray"})) {
      Spend(Arg(args, 0).s.size());
      auto b = Make(Kind::kBytes);
      if (!args.items.empty()) {
        if (Arg(args, 0).kind == Kind::kBytes) b->s = Arg(args, 0).s;
        else if (Arg(args, 0).kind != Kind::kStr || !Latin1FromUtf8(Arg(args, 0).s, &b->s)) Fail("bad bytes() argument");
      }
      return b;
    }
    if (IsAny(name, {"numpy.core.numeric._frombuffer", "numpy._core.numeric._frombuffer"})) {
      const Value &buf = Arg(args, 0), &dt = Arg(args, 1), &shape = Arg(args, 2), &order = Arg(args, 3);
      if (buf.kind != Kind::kBytes || dt.kind != Kind::kDtype || shape.kind != Kind::kTuple) Fail("bad _frombuffer arguments");
      Spend(buf.s.size() + dt.s.size() + 8 * shape.items.size());
      auto a = Make(Kind::kArray);
      a->s = dt.s;
      a->byte_order = dt.byte_order;
      a->data = buf.s;
      for (auto& d : shape.items) a->shape.push_back(d->i);
      a->fortran = order.kind == Kind::kStr && order.s == "F";
      return a;
    }
    if (IsAny(name, {"numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar"})) {
      const Value &dt = Arg(args, 0), &raw = Arg(args, 1);
      if (dt.kind != Kind::kDtype || raw.kind != Kind::kBytes) Fail("bad numpy scalar");
      Spend(dt.s.size() + 2 * raw.s.size());  // the array's copy and ToInts' result
      Value a;
      a.kind = Kind::kArray;
      a.s = dt.s;
      a.byte_order = dt.byte_order;
      a.data = raw.s;
      a.shape = {1};
      auto r = Make(Kind::kInt);
      r->i = ToInts(a, "numpy scalar").at(0);
      return r;
    }
    Fail("unsupported callable " + name);
  }

  void Build(Value& obj, const Value& state) {
    if (obj.kind == Kind::kDtype) {
      // (version, byteorder, subarray, names, fields, elsize, alignment, flags)
      if (state.kind == Kind::kTuple && state.items.size() > 1 &&
          (state.items[1]->kind == Kind::kStr || state.items[1]->kind == Kind::kBytes) && state.items[1]->s.size() == 1)
        obj.byte_order = state.items[1]->s[0];
      return;
    }
    if (obj.kind == Kind::kArray) {
      // (version, shape, dtype, is_fortran, data)
      if (state.kind != Kind::kTuple || state.items.size() != 5) Fail("unexpected ndarray state");
      const Value &shape = *state.items[1], &dt = *state.items[2], &fortran = *state.items[3], &raw = *state.items[4];
      if (shape.kind != Kind::kTuple || dt.kind != Kind::kDtype) Fail("unexpected ndarray state");
      if (raw.kind != Kind::kBytes) Fail("ndarray data is not a byte string (object arrays are not supported)");
      Spend(raw.s.size() + dt.s.size() + 8 * shape.items.size());
      obj.shape.clear();
      for (auto& d : shape.items) obj.shape.push_back(d->i);
      obj.s = dt.s;
      obj.byte_order = dt.byte_order;
      obj.fortran = fortran.i != 0;
      obj.data = raw.s;
      return;
    }
    Fail("BUILD on an unsupported object");
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, Ref> memo_;
  uint64_t copy_budget_;
  std::vector<Ref> containers_;  // every list, tuple and dict made, in order
  bool finished_ = false;
};

}  // namespace

Value::~Value() {
  if (items.empty() && dict.empty()) return;
  // Children are moved to a work list; a child whose last owner is that list has its own children moved
  // out before it dies, so no destructor ever runs more than one level deep.
  std::vector<Ref> pending;
  auto take = [&pending](Value& v) {
    for (Ref& r : v.items) pending.push_back(std::move(r));
    for (auto& kv : v.dict) {
      pending.push_back(std::move(kv.first));
      pending.push_back(std::move(kv.second));
    }
    v.items.clear();
    v.dict.clear();
  };
  take(*this);
  while (!pending.empty()) {
    Ref r = std::move(pending.back());
    pending.pop_back();
    if (r && r.use_count() == 1) take(*r);
  }
}

Ref Parse(const uint8_t* data, size_t size) { return Machine(data, size).Run(); }

const Value* DictGet(const Value& dict, const std::string& key) {
  if (dict.kind != Kind::kDict) return nullptr;
  for (const auto& kv : dict.dict)
    if ((kv.first->kind == Kind::kStr || kv.first->kind == Kind::kBytes) && kv.first->s == key) return kv.second.get();
  return nullptr;
}

std::vector<int64_t> ToInts(const Value& v, const std::string& what) {
  std::vector<int64_t> out;
  if (v.kind == Kind::kList || v.kind == Kind::kTuple) {
    for (const auto& it : v.items) {
      if (it->kind != Kind::kInt) throw Error(what + ": expected a list of integers");
      out.push_back(it->i);
    }
    return out;
  }
  if (v.kind != Kind::kArray || v.s.size() != 2 || (v.s[0] != 'u' && v.s[0] != 'i'))
    throw Error(what + ": expected integers, got something else");
  const bool is_signed = v.s[0] == 'i';
  const size_t width = size_t(v.s[1] - '0');
  if (width != 1 && width != 2 && width != 4 && width != 8) throw Error(what + ": unsupported integer width");
  if (v.byte_order == '>' && width > 1) throw Error(what + ": big-endian arrays are not supported");
  if (v.data.size() % width) throw Error(what + ": array data is not a whole number of elements");
  const uint8_t* p = reinterpret_cast<const uint8_t*>(v.data.data());
  for (size_t i = 0; i < v.data.size() / width; ++i) {
    uint64_t u = 0;
    for (size_t b = 0; b < width; ++b) u |= uint64_t(p[i * width + b]) << (8 * b);
    if (is_signed && width < 8 && (u >> (8 * width - 1)) & 1) u |= ~uint64_t(0) << (8 * width);
    out.push_back(int64_t(u));
  }
  return out;
}

std::vector<std::string> ToStrings(const Value& v, const std::string& what) {
  if (v.kind != Kind::kList && v.kind != Kind::kTuple) throw Error(what + ": expected a list of strings");
  std::vector<std::string> out;
  for (const auto& it : v.items) {
    if (it->kind != Kind::kStr && it->kind != Kind::kBytes) throw Error(what + ": expected a list of strings");
    out.push_back(it->s);
  }
  return out;
}

}  // namespace dsc::pickle
