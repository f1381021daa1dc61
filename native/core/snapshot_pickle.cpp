// The native snapshot decoder (snapshot_pickle.hpp): a port of the JavaScript fast path
// (src-main/services/import/pytorch-fast.ts, FastDecoder) and of SnapshotMapper.apply, function for
// function, so that what it decodes is decoded as there. Where it differs it gives up more often,
// never less: strings that are not well-formed UTF-8 (or open with a byte order mark, which
// TextDecoder drops), frame names or files holding NUL (the mapper keys frames by text joined with
// NUL), LONG1 of more than 8 bytes outside events, a snapshot whose device_traces it did not read
// itself. Positions are int64_t, -1 where it gives up; every read of the input is bounds-checked.
#include "vramscope/snapshot_pickle.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <unordered_map>

namespace vramscope::snapshot_pickle {

namespace {

enum op : int {
  MARK = 0x28, EMPTY_TUPLE = 0x29, STOP = 0x2e, BINFLOAT = 0x47, BININT = 0x4a, BININT1 = 0x4b,
  BININT2 = 0x4d, NONE = 0x4e, BINUNICODE = 0x58, EMPTY_LIST = 0x5d, APPEND = 0x61, APPENDS = 0x65,
  BINGET = 0x68, LONG_BINGET = 0x6a, BINPUT = 0x71, LONG_BINPUT = 0x72, SETITEM = 0x73, TUPLE = 0x74,
  SETITEMS = 0x75, EMPTY_DICT = 0x7d, PROTO = 0x80, TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87,
  NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d,
  MEMOIZE = 0x94, FRAME = 0x95,
};
/** What byte() reads past the end: no opcode. */
constexpr int PAST_END = 0x100;

enum memo_kind : uint8_t { m_unset, m_string, m_number, m_generic, m_frame, m_frames, m_event, m_lazy };

enum code : uint8_t {
  c_other, c_action, c_addr, c_size, c_stream, c_time_us, c_frames, c_user_metadata, c_name, c_filename,
  c_line, c_device_traces, c_alloc, c_free_requested, c_free, c_free_completed, c_segment_alloc,
  c_segment_free, c_segment_map, c_segment_unmap, c_oom, c_snapshot,
  // What the finish reads outside the events (the root's segments and annotations).
  c_segments, c_allocator_settings, c_external_annotations, c_device, c_address, c_total_size,
  c_is_expandable, c_segment_type, c_blocks, c_state, c_requested_size, c_stage, c_active_allocated,
  c_active_pending_free, c_small, c_large,
};

enum scalar_kind : int { s_string = 1, s_int, s_float, s_nil, s_bool };

constexpr std::size_t GENERIC_STACK = 1u << 16;
constexpr uint32_t BATCH_ITEMS = 1u << 18;
constexpr uint32_t MEMO_JUMP = 1u << 16;
constexpr int DEPTH_NEEDED = 16;
constexpr uint32_t MAX_DEVICE = 65535;
constexpr double MAX_SAFE = 9007199254740991.0;
// A constant: std::nan("") parses its argument on every call.
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();

// Layout ops and event kinds (src-main/services/trace/layout.ts, model.ts).
enum : uint8_t { k_alloc = 0, k_free = 1, k_marker = 2, k_oom = 3 };
enum : uint8_t { l_alloc = 0, l_free = 1, l_free_pending = 2, l_free_completed = 3, l_region_reserve = 4,
                 l_region_release = 5, l_map = 8, l_unmap = 9, l_failure = 12 };

code classify(const uint8_t* p, std::size_t n) {
#define IS(lit) (n == sizeof(lit) - 1 && std::memcmp(p, lit, sizeof(lit) - 1) == 0)
  switch (n) {
    case 3: if (IS("oom")) return c_oom; break;
    case 4: if (IS("addr")) return c_addr; if (IS("size")) return c_size; if (IS("free")) return c_free;
      if (IS("name")) return c_name;
      if (IS("line")) return c_line;
      break;
    case 5: if (IS("alloc")) return c_alloc; if (IS("state")) return c_state; if (IS("stage")) return c_stage;
      if (IS("small")) return c_small;
      if (IS("large")) return c_large;
      break;
    case 6: if (IS("action")) return c_action; if (IS("stream")) return c_stream; if (IS("frames")) return c_frames;
      if (IS("device")) return c_device;
      if (IS("blocks")) return c_blocks;
      break;
    case 7: if (IS("time_us")) return c_time_us; if (IS("address")) return c_address; break;
    case 8: if (IS("filename")) return c_filename; if (IS("snapshot")) return c_snapshot; if (IS("segments")) return c_segments; break;
    case 10: if (IS("total_size")) return c_total_size; break;
    case 11: if (IS("segment_map")) return c_segment_map; break;
    case 12: if (IS("segment_free")) return c_segment_free; if (IS("segment_type")) return c_segment_type; break;
    case 13: if (IS("user_metadata")) return c_user_metadata; if (IS("device_traces")) return c_device_traces;
      if (IS("segment_alloc")) return c_segment_alloc;
      if (IS("segment_unmap")) return c_segment_unmap;
      if (IS("is_expandable")) return c_is_expandable;
      break;
    case 14: if (IS("free_requested")) return c_free_requested; if (IS("free_completed")) return c_free_completed;
      if (IS("requested_size")) return c_requested_size;
      break;
    case 16: if (IS("active_allocated")) return c_active_allocated; break;
    case 18: if (IS("allocator_settings")) return c_allocator_settings; break;
    case 19: if (IS("active_pending_free")) return c_active_pending_free; break;
    case 20: if (IS("external_annotations")) return c_external_annotations; break;
  }
  return c_other;
#undef IS
}

/** Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): decoding it is one-to-one. */
bool well_formed_utf8(const uint8_t* s, std::size_t n) {
  if (n >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf) return false;  // TextDecoder drops a leading BOM
  std::size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) { i++; continue; }
    std::size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) { len = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
    else return false;
    if (n - i < len) return false;
    if (s[i + 1] < lo || s[i + 1] > hi) return false;
    for (std::size_t k = 2; k < len; k++) if (s[i + k] < 0x80 || s[i + k] > 0xbf) return false;
    i += len;
  }
  return true;
}

uint32_t read_u32(const uint8_t* b, std::size_t p) {
  return uint32_t(b[p]) | (uint32_t(b[p + 1]) << 8) | (uint32_t(b[p + 2]) << 16) | (uint32_t(b[p + 3]) << 24);
}

/** Bytes [at, at + n) little-endian, n <= 8. */
uint64_t read_le(const uint8_t* b, std::size_t at, std::size_t n) {
  uint64_t x = 0;
  if (n == 8) {
    for (std::size_t i = 0; i < 8; i++) x |= uint64_t(b[at + i]) << (8 * i);
    return x;
  }
  if (n >= 4) {
    x = read_u32(b, at);
    for (std::size_t i = 4; i < n; i++) x |= uint64_t(b[at + i]) << (8 * i);
    return x;
  }
  for (std::size_t i = 0; i < n; i++) x |= uint64_t(b[at + i]) << (8 * i);
  return x;
}

/** LONG1's n (at most 8) bytes as a number when |v| <= 2^53 - 1, else NaN (pytorch-fast.ts' smallLong). */
double small_long(const uint8_t* b, std::size_t at, std::size_t n) {
  if (n == 0) return 0;
  uint64_t x = read_le(b, at, n);
  if (n < 8 && (b[at + n - 1] & 0x80)) x |= ~uint64_t(0) << (8 * n);
  int64_t v = int64_t(x);
  if (v > int64_t(9007199254740991LL) || v < -int64_t(9007199254740991LL)) return NaN;
  return double(v);
}

/** A LONG1 of more than 8 bytes as decodeLong reads it: a number where its value is safe, else NaN (a bigint). */
double wide_long(const uint8_t* b, std::size_t at, std::size_t n) {
  uint8_t sign = (b[at + n - 1] & 0x80) ? 0xff : 0x00;
  for (std::size_t i = 8; i < n; i++) if (b[at + i] != sign) return NaN;
  if ((b[at + 7] & 0x80) != (sign & 0x80)) return NaN;
  return small_long(b, at, 8);
}

bool is_safe_integer(double v) { return std::isfinite(v) && std::trunc(v) == v && std::fabs(v) <= MAX_SAFE; }

/** PyTorch's round_size (pytorch.ts' roundedSize): the same double operations. */
double rounded_size(double requested) { return requested < 512 ? 512 : std::ceil(requested / 512) * 512; }

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

/** Slots of ids in open addressing; the caller hashes and compares. */
struct id_slots {
  std::vector<int32_t> slots = std::vector<int32_t>(256, -1);
  std::size_t count = 0;
  template <class Hash>
  void grow_if_needed(Hash&& hash_of) {
    if (2 * count <= slots.size()) return;
    std::vector<int32_t> next(slots.size() * 2, -1);
    std::size_t mask = next.size() - 1;
    for (int32_t id : slots) {
      if (id < 0) continue;
      std::size_t s = hash_of(id) & mask;
      while (next[s] >= 0) s = (s + 1) & mask;
      next[s] = id;
    }
    slots.swap(next);
  }
};

// ---- the generic part's values ----

enum gtag : uint8_t { g_none, g_bool, g_number, g_string, g_long, g_list, g_tuple, g_dict };

struct gval {
  uint8_t tag = g_none;
  int32_t i = 0;  // bool, string id, container index
  double number = 0;
  uint32_t off = 0, len = 0;  // g_long
  bool container() const { return tag >= g_list; }
};

struct container {
  uint8_t tag;
  std::vector<gval> items;  // dict: key, value, ...
  int32_t emitted = -1;
  int32_t as_frame = -1;   // frame id once read back as a frame
  int32_t as_stack = -3;   // local stack id once read back as a frames list (-1: empty)
};

struct generic_entry {
  gval value;
  int32_t depth;
  int32_t slot = -1;
  int32_t as_stack = 0;  // local stack id + 2, 0 not yet
  int32_t as_frame = 0;  // frame id + 2
};

constexpr uint8_t OPEN_LIST = 1, OPEN_DICT = 2, SEALED = 3;

// ---- the mapper (SnapshotMapper: apply and its tables) ----

struct mapper {
  decoded& out;
  int64_t wanted;
  std::vector<int32_t> device_state;  // device -> index in out.devices, -1
  int32_t last_device = -1, last_state = -1;
  std::unordered_map<uint64_t, uint32_t> stream_index;  // by the value's bits, 0 for -0
  double last_stream_value = NaN;
  uint32_t last_stream = 0;
  std::vector<int32_t> tag_of_string;  // string id -> tag + 1
  std::vector<int32_t> unknown_of_string;  // string id -> index + 1
  struct frame_key { int32_t name, file; uint64_t line; bool operator==(const frame_key& o) const { return name == o.name && file == o.file && line == o.line; } };
  struct frame_hash { std::size_t operator()(const frame_key& k) const { return mix(uint64_t(uint32_t(k.name)) * 0x9e3779b97f4a7c15ULL ^ uint64_t(uint32_t(k.file)) * 0xc2b2ae3d27d4eb4fULL ^ k.line); } };
  std::unordered_map<frame_key, uint32_t, frame_hash> frame_index;
  std::unordered_map<uint64_t, std::vector<uint32_t>> stacks_by_hash;

  mapper(decoded& o, int64_t w, std::size_t input_bytes) : out(o), wanted(w), first_rows(std::min<std::size_t>(input_bytes / 90 + 64, 1u << 16)) {}

  /** Rows guessed from the file's size (torch writes 60 to 90 bytes an event), as the JavaScript mapper does. */
  std::size_t first_rows;
  void reserve(device_result& s) const {
    auto& e = s.events;
    for (auto* v : {&e.size, &e.time}) v->reserve(first_rows);
    for (auto* v : {&e.id, &e.stream}) v->reserve(first_rows);
    for (auto* v : {&e.stack, &e.tag}) v->reserve(first_rows);
    e.kind.reserve(first_rows);
    auto& l = s.layout;
    for (auto* v : {&l.address, &l.size, &l.requested, &l.stream, &l.time}) v->reserve(first_rows);
    l.aux.reserve(first_rows);
    l.op.reserve(first_rows);
  }

  bool wants(uint32_t device) const { return wanted < 0 || int64_t(device) == wanted; }

  device_result* state(uint32_t device) {
    if (int32_t(device) == last_device) return &out.devices[std::size_t(last_state)];
    if (!wants(device)) return nullptr;
    if (device >= device_state.size()) device_state.resize(device + 1, -1);
    if (device_state[device] < 0) {
      device_state[device] = int32_t(out.devices.size());
      out.devices.emplace_back();
      device_result& s = out.devices.back();
      s.device = device;
      s.requested_by_id.reserve(256);
      s.rounded_by_id.reserve(256);
      reserve(s);
    }
    last_device = int32_t(device);
    last_state = device_state[device];
    return &out.devices[std::size_t(last_state)];
  }

  uint32_t stream(double value) {
    if (value == last_stream_value) return last_stream;
    uint64_t key;
    double v = value == 0 ? 0.0 : value;  // Map keys: -0 is 0
    std::memcpy(&key, &v, 8);
    auto it = stream_index.find(key);
    uint32_t i;
    if (it == stream_index.end()) {
      i = uint32_t(out.streams.size());
      out.streams.push_back(value);
      stream_index.emplace(key, i);
    } else i = it->second;
    last_stream_value = value;
    last_stream = i;
    return i;
  }

  int32_t tag(int32_t string_id) {
    if (string_id < 0 || out.strings[2 * std::size_t(string_id) + 1] == 0) return -1;
    if (std::size_t(string_id) >= tag_of_string.size()) tag_of_string.resize(std::size_t(string_id) + 1, 0);
    int32_t& t = tag_of_string[std::size_t(string_id)];
    if (t == 0) {
      out.tags.push_back(string_id);
      t = int32_t(out.tags.size());
    }
    return t - 1;
  }

  uint32_t new_id(device_result& s, double requested, double rounded) {
    uint32_t id = s.next_id++;
    s.requested_by_id.push_back(requested);
    s.rounded_by_id.push_back(rounded);
    return id;
  }

  void flush_held(device_result& s) {
    s.layout.push(l_free_pending, s.held_address, s.rounded_by_id[std::size_t(s.held)], s.held_size, s.held_stream, s.held_time);
    s.pending.set(s.held_address, double(s.held));
    s.held = -1;
  }

  uint32_t orphan_alloc(device_result& s, double addr, double size, double stream_value) {
    uint32_t id = new_id(s, size, rounded_size(size));
    s.synth_events.push(k_alloc, id, size, stream(stream_value), NaN);
    s.synth_layout.push(l_alloc, addr, s.rounded_by_id[id], size, stream_value, NaN);
    s.orphan_events++;
    s.synthesized_allocs++;
    s.synthesized_blocks++;
    return id;
  }

  /** decodedEvent and apply: `stack` the mapper's stack id for alloc and oom; metadata a string id or -1. */
  void event(uint32_t device, int32_t action, code action_code, double addr, double size, double stream_value, double time, int32_t stack, int32_t metadata) {
    if (device >= out.event_counts.size()) out.event_counts.resize(device + 1, 0);
    out.event_counts[device]++;
    device_result* sp = state(device);
    if (sp == nullptr) return;
    device_result& s = *sp;
    double t = time;
    if (t != t) {
      out.missing_times++;
      t = s.next_index;
    }
    s.next_index++;
    if (t < out.earliest) out.earliest = t;

    if (s.held >= 0) {
      if (action_code == c_free_completed && addr == s.held_address) {
        s.layout.push(l_free, addr, s.rounded_by_id[std::size_t(s.held)], s.held_size, s.held_stream, s.held_time);
        s.held = -1;
        return;
      }
      flush_held(s);
    }
    switch (action_code) {
      case c_alloc: {
        double previous = s.live.get(addr);
        if (previous >= 0) {
          uint32_t p = uint32_t(previous);
          s.events.push(k_free, p, 0, stream(stream_value), t);
          s.layout.push(l_free, addr, s.rounded_by_id[p], s.requested_by_id[p], stream_value, t);
          out.reallocations++;
        }
        uint32_t id = new_id(s, size, rounded_size(size));
        s.live.set(addr, id);
        uint32_t st = stream(stream_value);
        s.events.push(k_alloc, id, size, st, t, stack, tag(metadata));
        s.layout.push(l_alloc, addr, s.rounded_by_id[id], size, stream_value, t);
        return;
      }
      case c_free_requested:
      case c_free: {
        double found = s.live.get(addr);
        uint32_t id = found < 0 ? orphan_alloc(s, addr, size, stream_value) : uint32_t(found);
        s.live.erase(addr);
        s.events.push(k_free, id, s.requested_by_id[id], stream(stream_value), t);
        if (action_code == c_free) {
          s.layout.push(l_free, addr, s.rounded_by_id[id], s.requested_by_id[id], stream_value, t);
        } else {
          s.held = id;
          s.held_address = addr;
          s.held_size = s.requested_by_id[id];
          s.held_stream = stream_value;
          s.held_time = t;
        }
        return;
      }
      case c_free_completed: {
        double found = s.pending.get(addr);
        if (found < 0) {
          s.synth_layout.push(l_alloc, addr, rounded_size(size), size, stream_value, NaN);
          s.synth_layout.push(l_free_pending, addr, rounded_size(size), size, stream_value, NaN);
          s.layout.push(l_free_completed, addr, rounded_size(size), size, stream_value, t);
          s.orphan_events++;
          s.synthesized_blocks++;
          return;
        }
        uint32_t id = uint32_t(found);
        s.pending.erase(addr);
        s.layout.push(l_free_completed, addr, s.rounded_by_id[id], s.requested_by_id[id], stream_value, t);
        return;
      }
      case c_segment_alloc:
        s.segments.set(addr, size);
        s.reserve_row.set(addr, double(s.layout.rows()));
        s.layout.push(l_region_reserve, addr, size, size, stream_value, t);
        return;
      case c_segment_free:
        if (!s.segments.has(addr)) {
          s.synth_layout.push(l_region_reserve, addr, size, size, stream_value, NaN);
          s.orphan_events++;
          s.synthesized_segments++;
        }
        s.segments.erase(addr);
        s.layout.push(l_region_release, addr, size, size, stream_value, t);
        return;
      case c_segment_map:
        s.mapped.push_back(addr);
        s.layout.push(l_map, addr, size, size, stream_value, t);
        return;
      case c_segment_unmap:
        s.layout.push(l_unmap, addr, size, size, stream_value, t);
        return;
      case c_oom: {
        uint32_t st = stream(stream_value);
        s.events.push(k_oom, 0, size, st, t, stack, tag(metadata));
        s.layout.push(l_failure, 0, size, size, stream_value, t);
        return;
      }
      case c_snapshot:
        out.markers++;
        s.events.push(k_marker, out.markers - 1, 0, stream(stream_value), t);
        return;
      default: {
        if (std::size_t(action) >= unknown_of_string.size()) unknown_of_string.resize(std::size_t(action) + 1, 0);
        int32_t& u = unknown_of_string[std::size_t(action)];
        if (u == 0) {
          out.unknown_actions.emplace_back(action, 0);
          u = int32_t(out.unknown_actions.size());
        }
        out.unknown_actions[std::size_t(u - 1)].second++;
      }
    }
  }

  /** frameId: frames keyed by name, file and line as text (no NUL in either: the decoder checks). */
  uint32_t frame_id(int32_t name, int32_t file, double line) {
    double l = line == 0 ? 0.0 : line;
    frame_key key{name, file, 0};
    std::memcpy(&key.line, &l, 8);
    auto it = frame_index.find(key);
    if (it != frame_index.end()) return it->second;
    uint32_t id = uint32_t(out.frame_name.size());
    out.frame_name.push_back(name);
    out.frame_file.push_back(file);
    out.frame_line.push_back(line);
    frame_index.emplace(key, id);
    return id;
  }

  uint32_t intern_stack(const uint32_t* ids, std::size_t n) {
    uint64_t h = n;
    for (std::size_t i = 0; i < n; i++) h = mix(h ^ ids[i]) + i;
    auto& candidates = stacks_by_hash[h];
    for (uint32_t c : candidates) {
      std::size_t from = out.stack_start[c], len = out.stack_start[c + 1] - from;
      if (len == n && std::equal(ids, ids + n, out.stack_frames.begin() + std::ptrdiff_t(from))) return c;
    }
    uint32_t id = uint32_t(out.stack_start.size() - 1);
    out.stack_frames.insert(out.stack_frames.end(), ids, ids + n);
    out.stack_start.push_back(uint32_t(out.stack_frames.size()));
    candidates.push_back(id);
    return id;
  }
};

// ---- the decoder (FastDecoder) ----

class decoder {
 public:
  decoder(const uint8_t* bytes, std::size_t length, const options& opts, decoded& out)
      : b_(bytes), end_(int64_t(length)), out_(out), map_(out, opts.device, length), finish_(opts.finish) {
    depth_limit_ = std::min(opts.max_depth, 1 << 12) - 4;
    std::size_t memo = std::max<std::size_t>(1024, std::min<std::size_t>(length / 20 + 1, 1u << 20));
    memo_kind_.reserve(memo);
    memo_id_.reserve(memo);
    memo_key_.reserve(memo);
    out.earliest = INFINITY;
  }

  bool run() {
    if (end_ < 3 || b_[0] != PROTO || b_[1] < 2 || b_[1] > 5) return false;
    out_.protocol = b_[1];
    int64_t p = 2;
    for (;;) {
      p = generic_part(p);
      if (p < 0) return false;
      if (root_ >= 0 && stopped_) break;
      p = device_traces(p);
      if (p < 0) return false;
      push(generic_[std::size_t(num_id_)].value, SEALED, depth_, -1);
    }
    if (!saw_device_traces_) return false;
    std::vector<int32_t>().swap(memo_id_);
    if (finish_ && finish()) {
      const gval* settings = dict_get(containers_[std::size_t(root_)], c_allocator_settings);
      emit(settings != nullptr ? *settings : gval{g_none});
    } else emit(gval{g_dict, root_, 0, 0, 0});
    return true;
  }

 private:
  const uint8_t* b_;
  int64_t end_;
  decoded& out_;
  mapper map_;
  bool finish_;
  int depth_limit_;

  std::vector<uint8_t> memo_kind_;
  std::vector<int32_t> memo_id_;
  std::vector<uint8_t> memo_key_;  // 1 + code of a string entry, else 0
  uint32_t memo_next_ = 0;
  std::vector<double> numbers_;
  std::vector<generic_entry> generic_;
  std::vector<container> containers_;

  // strings: out_.strings holds (offset, length); codes; slots by bytes
  std::vector<uint8_t> codes_;
  id_slots string_slots_;

  // frames (local): string ids, line; the mapper's id once used
  std::vector<int32_t> frame_name_, frame_file_, frame_global_;
  std::vector<double> frame_line_;
  id_slots frame_slots_;

  // local stacks
  std::vector<int32_t> stack_frames_, stack_start_, stack_length_, stack_global_;
  id_slots stack_slots_;
  std::vector<int32_t> scratch_;
  std::vector<uint32_t> global_scratch_;

  int kind_ = 0;
  double num_ = 0;
  int32_t num_id_ = 0;  // num_ as an id (string, generic)
  int key_code_ = 0;
  int32_t depth_ = 0;

  std::vector<gval> stack_;
  std::vector<uint8_t> state_;
  std::vector<int32_t> depths_, open_memo_;
  std::vector<std::size_t> marks_;
  int32_t root_ = -1;
  bool saw_device_traces_ = false, stopped_ = false;
  uint32_t batch_items_ = 0;
  int32_t batch_deepest_ = 0;

  int byte(int64_t p) const { return p >= 0 && p < end_ ? b_[p] : PAST_END; }
  bool has(int64_t p, int64_t n) const { return p >= 0 && n <= end_ - p; }

  void push(const gval& v, uint8_t state, int32_t depth, int32_t open) {
    stack_.push_back(v);
    state_.push_back(state);
    depths_.push_back(depth);
    open_memo_.push_back(open);
  }
  void truncate(std::size_t n) {
    stack_.resize(n);
    state_.resize(n);
    depths_.resize(n);
    open_memo_.resize(n);
  }

  int32_t add_generic(const gval& v, int32_t depth) {
    generic_.push_back(generic_entry{v, depth});
    return int32_t(generic_.size() - 1);
  }
  int32_t new_container(uint8_t tag) {
    containers_.push_back(container{tag, {}});
    return int32_t(containers_.size() - 1);
  }

  // ---- the generic part ----

  int64_t generic_part(int64_t p) {
    for (;;) {
      p = skip_frames(p);
      if (p < 0 || p >= end_) return -1;
      int o = b_[p++];
      gval pushed;
      uint8_t pushed_state = 0;
      int32_t pushed_depth = 0;
      bool key_candidate = false;
      switch (o) {
        case STOP:
          // The root dict itself must be what is left (not, say, a tuple holding it).
          if (!marks_.empty() || stack_.size() != 1 || root_ < 0 || p != end_ || stack_[0].tag != g_dict || stack_[0].i != root_) return -1;
          stopped_ = true;
          return p;
        case EMPTY_DICT:
          pushed = gval{g_dict, new_container(g_dict)};
          pushed_state = OPEN_DICT;
          pushed_depth = 1;
          if (stack_.empty()) {
            if (root_ >= 0) return -1;
            root_ = pushed.i;
          }
          break;
        case EMPTY_LIST:
          pushed = gval{g_list, new_container(g_list)};
          pushed_state = OPEN_LIST;
          pushed_depth = 1;
          break;
        case EMPTY_TUPLE:
          pushed = gval{g_tuple, new_container(g_tuple)};
          pushed_state = SEALED;
          pushed_depth = 1;
          break;
        case MARK:
          if (int64_t(marks_.size()) >= depth_limit_) return -1;
          marks_.push_back(stack_.size());
          continue;
        case SETITEMS:
        case APPENDS:
        case SETITEM:
        case APPEND: {
          bool dict = o == SETITEMS || o == SETITEM;
          int64_t from;
          if (o == SETITEMS || o == APPENDS) {
            if (marks_.empty()) return -1;
            from = int64_t(marks_.back());
            marks_.pop_back();
          } else {
            from = int64_t(stack_.size()) - (o == SETITEM ? 2 : 1);
            if (!marks_.empty() && int64_t(marks_.back()) > from) return -1;
          }
          int64_t target = from - 1;
          if (target < 0 || state_[std::size_t(target)] != (dict ? OPEN_DICT : OPEN_LIST)) return -1;
          if (dict && ((int64_t(stack_.size()) - from) & 1)) return -1;
          int32_t deepest = 0;
          for (std::size_t i = std::size_t(from); i < stack_.size(); i++) {
            if (state_[i] != 0) {
              if (dict && ((i - std::size_t(from)) & 1) == 0) return -1;
              if (depths_[i] > deepest) deepest = depths_[i];
              finished(open_memo_[i], depths_[i]);
            }
          }
          if (deepest + 1 >= depth_limit_) return -1;
          auto& items = containers_[std::size_t(stack_[std::size_t(target)].i)].items;
          items.insert(items.end(), stack_.begin() + from, stack_.end());
          if (deepest + 1 > depths_[std::size_t(target)]) depths_[std::size_t(target)] = deepest + 1;
          truncate(std::size_t(from));
          continue;
        }
        case TUPLE1:
        case TUPLE2:
        case TUPLE3:
        case TUPLE: {
          int64_t from;
          if (o == TUPLE) {
            if (marks_.empty()) return -1;
            from = int64_t(marks_.back());
            marks_.pop_back();
          } else {
            from = int64_t(stack_.size()) - (o - TUPLE1 + 1);
            if (from < 0 || (!marks_.empty() && int64_t(marks_.back()) > from)) return -1;
          }
          int32_t deepest = 0;
          for (std::size_t i = std::size_t(from); i < stack_.size(); i++) {
            if (state_[i] != 0) {
              if (depths_[i] > deepest) deepest = depths_[i];
              finished(open_memo_[i], depths_[i]);
            }
          }
          if (deepest + 1 >= depth_limit_) return -1;
          int32_t c = new_container(g_tuple);
          containers_[std::size_t(c)].items.assign(stack_.begin() + from, stack_.end());
          pushed = gval{g_tuple, c};
          pushed_state = SEALED;
          pushed_depth = deepest + 1;
          truncate(std::size_t(from));
          break;
        }
        case MEMOIZE:
        case BINPUT:
        case LONG_BINPUT: {
          int64_t index = put_index(o, p - 1);
          if (index < 0 || stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) return -1;
          p += o == MEMOIZE ? 0 : o == BINPUT ? 1 : 4;
          std::size_t top = stack_.size() - 1;
          const gval value = stack_[top];
          if (value.tag == g_string) set_memo(uint32_t(index), m_string, value.i);
          else if (value.tag == g_number) set_memo_number(uint32_t(index), value.number);
          else {
            bool open = state_[top] == OPEN_LIST || state_[top] == OPEN_DICT;
            int32_t g = add_generic(value, open ? -1 : depths_[top]);
            set_memo(uint32_t(index), m_generic, g);
            if (open) {
              if (open_memo_[top] >= 0) return -1;
              open_memo_[top] = g;
              generic_[std::size_t(g)].slot = int32_t(top);
            }
          }
          continue;
        }
        case BINGET:
        case LONG_BINGET: {
          int64_t width = o == BINGET ? 1 : 4;
          if (!has(p, width)) return -1;
          uint32_t index = o == BINGET ? b_[p] : read_u32(b_, std::size_t(p));
          p += width;
          if (index >= memo_next_) return -1;
          if (memo_kind_[index] == m_lazy) resolve_lazy(index);
          uint8_t k = memo_kind_[index];
          int32_t n = memo_id_[index];
          if (k == m_string) {
            pushed = gval{g_string, n};
            key_candidate = true;
          } else if (k == m_number) {
            pushed = gval{g_number, 0, numbers_[std::size_t(n)]};
          } else if (k == m_generic) {
            generic_entry& e = generic_[std::size_t(n)];
            pushed = e.value;
            if (pushed.container()) {
              pushed_depth = e.depth;
              if (pushed_depth < 0) {
                // Still on the stack: sealed here, as the general path does (adding to it later gives up).
                int32_t slot = e.slot;
                if (slot < 0 || std::size_t(slot) >= stack_.size() || !stack_[std::size_t(slot)].container() ||
                    stack_[std::size_t(slot)].i != pushed.i || open_memo_[std::size_t(slot)] != n)
                  return -1;
                state_[std::size_t(slot)] = SEALED;
                open_memo_[std::size_t(slot)] = -1;
                pushed_depth = e.depth = depths_[std::size_t(slot)];
              }
              pushed_state = SEALED;
            }
          } else return -1;
          break;
        }
        case LONG1: {
          if (!has(p, 1) || !has(p + 1, b_[p])) return -1;
          std::size_t n = b_[p];
          double v = n <= 8 ? small_long(b_, std::size_t(p + 1), n) : wide_long(b_, std::size_t(p + 1), n);
          if (v == v) pushed = gval{g_number, 0, v};
          else pushed = gval{g_long, 0, 0, uint32_t(p + 1), uint32_t(n)};
          p += 1 + int64_t(n);
          break;
        }
        default: {
          int64_t q = scalar(p - 1);
          if (q < 0) return -1;
          p = q;
          if (kind_ == s_string) {
            pushed = gval{g_string, num_id_};
            key_candidate = true;
          } else if (kind_ == s_int || kind_ == s_float) pushed = gval{g_number, 0, num_};
          else if (kind_ == s_nil) pushed = gval{g_none};
          else pushed = gval{g_bool, num_ == 1 ? 1 : 0};
        }
      }
      if (stack_.size() >= GENERIC_STACK) return -1;
      push(pushed, pushed_state, pushed_depth, -1);
      if (key_candidate && root_ >= 0 && stack_[0].tag == g_dict && stack_[0].i == root_ && state_[0] == OPEN_DICT &&
          (stack_.size() & 1) == 0 &&
          (marks_.size() == 1 ? marks_[0] == 1 : marks_.empty() && stack_.size() == 2) &&
          codes_[std::size_t(pushed.i)] == c_device_traces) {
        if (saw_device_traces_) return -1;
        saw_device_traces_ = true;
        int64_t put = reserve_at(p);
        if (put == -2) return -1;
        if (put >= 0) {
          set_memo(uint32_t(put), m_string, pushed.i);
          p += put_length(b_[p]);
        }
        return p;
      }
    }
  }

  void finished(int32_t g, int32_t depth) {
    if (g >= 0) generic_[std::size_t(g)].depth = depth;
  }

  // ---- device_traces ----

  int64_t device_traces(int64_t p) {
    p = skip_frames(p);
    if (p < 0 || byte(p) != EMPTY_LIST) return -1;
    int32_t outer = new_container(g_list);
    int32_t g = add_generic(gval{g_list, outer}, -1);
    p = put_container(p + 1, m_generic, g);
    if (p < 0) return -1;
    int32_t deepest = 0;
    for (;;) {
      p = skip_frames(p);
      if (p < 0) return -1;
      int o = byte(p);
      if (o == MARK) {
        p++;
        for (;;) {
          p = skip_frames(p);
          if (p < 0) return -1;
          if (byte(p) == APPENDS) {
            p++;
            break;
          }
          if (byte(p) != EMPTY_LIST || containers_[std::size_t(outer)].items.size() >= BATCH_ITEMS) return -1;
          p = device_list(p, outer);
          if (p < 0) return -1;
          if (depth_ > deepest) deepest = depth_;
        }
      } else if (o == EMPTY_LIST) {
        p = device_list(p, outer);
        if (p < 0) return -1;
        if (depth_ > deepest) deepest = depth_;
        p = after_append(p);
        if (p < 0) return -1;
      } else break;
    }
    generic_[std::size_t(g)].depth = depth_ = deepest + 1;
    num_id_ = g;
    return p;
  }

  int64_t device_list(int64_t p, int32_t outer) {
    uint32_t device = uint32_t(containers_[std::size_t(outer)].items.size());
    int32_t list = new_container(g_list);
    containers_[std::size_t(outer)].items.push_back(gval{g_list, list});
    int32_t g = add_generic(gval{g_list, list}, -1);
    p = put_container(p + 1, m_generic, g);
    if (p < 0) return -1;
    bool wanted = map_.wants(device);
    int32_t deepest = 0;
    for (;;) {
      p = skip_frames(p);
      if (p < 0) return -1;
      int o = byte(p);
      if (o == MARK) {
        batch_items_ = 0;
        batch_deepest_ = deepest;
        p = batch(p + 1, device, wanted);
        if (p < 0) return -1;
        deepest = batch_deepest_;
      } else if (o == EMPTY_DICT) {
        if (device > MAX_DEVICE) return -1;
        p = event(p, device, wanted);
        if (p < 0) return -1;
        if (depth_ > deepest) deepest = depth_;
        p = after_append(p);
        if (p < 0) return -1;
      } else break;
    }
    generic_[std::size_t(g)].depth = depth_ = deepest + 1;
    return p;
  }

  int64_t batch(int64_t p, uint32_t device, bool wanted) {
    for (;;) {
      if (byte(p) == FRAME) {
        p = skip_frames(p);
        if (p < 0) return -1;
      }
      int o = byte(p);
      if (o == APPENDS) return p + 1;
      if (o != EMPTY_DICT || ++batch_items_ > BATCH_ITEMS || device > MAX_DEVICE) return -1;
      p = event(p, device, wanted);
      if (p < 0) return -1;
      if (depth_ > batch_deepest_) batch_deepest_ = depth_;
    }
  }

  int64_t event(int64_t p, uint32_t device, bool wanted) {
    p = put_container(p + 1, m_event, 0);
    if (p < 0) return -1;
    if (byte(p) == FRAME) p = skip_frames(p);
    if (p < 0 || byte(p) != MARK) return -1;
    p++;
    int32_t action = -1;
    bool has_addr = false;
    double addr = 0, size = 0, stream = 0, time = NaN;
    int32_t stack = -2;
    int32_t metadata = -1;
    int32_t depth = 1;
    for (;;) {
      int o = byte(p);
      if (o == FRAME) {
        p = skip_frames(p);
        if (p < 0) return -1;
        o = byte(p);
      }
      if (o == SETITEMS) {
        p++;
        break;
      }
      // A key read back from the memo (torch's every key but an event's first), inline.
      int code;
      if (o == BINGET && p + 1 < end_ && b_[p + 1] < memo_next_ && memo_key_[b_[p + 1]] != 0) {
        code = memo_key_[b_[p + 1]] - 1;
        p += 2;
      } else {
        p = dict_key(p);
        if (p < 0) return -1;
        code = key_code_;
      }
      if (code == c_frames) {
        if (byte(p) == FRAME) p = skip_frames(p);
        if (p < 0) return -1;
        o = byte(p);
        if (o == EMPTY_LIST) {
          p = frames_list(p + 1);
          if (p < 0) return -1;
          stack = num_id_;
          if (depth_ + 1 > depth) depth = depth_ + 1;
          continue;
        }
        if (o == BINGET || o == LONG_BINGET) {
          int64_t width = o == BINGET ? 1 : 4;
          if (!has(p + 1, width)) return -1;
          uint32_t index = o == BINGET ? b_[p + 1] : read_u32(b_, std::size_t(p + 1));
          p += 1 + width;
          if (index >= memo_next_) return -1;
          uint8_t k = memo_kind_[index];
          int32_t d;
          if (k == m_frames) {
            stack = memo_id_[index];
            d = stack < 0 ? 1 : 2;
          } else if (k == m_generic) {
            int32_t g = memo_id_[index];
            int32_t known = generic_[std::size_t(g)].as_stack;
            if (known > 0) stack = known - 2;
            else {
              stack = generic_stack(generic_[std::size_t(g)].value);
              if (stack == -2) return -1;
              generic_[std::size_t(g)].as_stack = stack + 2;
            }
            d = generic_[std::size_t(g)].depth;
            if (d < 0) return -1;
          } else return -1;
          if (d + 1 > depth) depth = d + 1;
          continue;
        }
        if (o == NONE) {
          kind_ = s_nil;
          p = put_scalar(p + 1);
          if (p < 0) return -1;
          stack = -2;
          continue;
        }
        return -1;
      }
      int kind;
      double value;
      int32_t id = 0;
      o = byte(p);
      switch (o) {
        case BINGET:
        case LONG_BINGET: {
          int64_t width = o == BINGET ? 1 : 4;
          if (!has(p + 1, width)) return -1;
          uint32_t index = o == BINGET ? b_[p + 1] : read_u32(b_, std::size_t(p + 1));
          p += 1 + width;
          if (index >= memo_next_) return -1;
          uint8_t k = memo_kind_[index];
          if (k == m_string) {
            kind = s_string;
            id = memo_id_[index];
            value = id;
          } else if (k == m_number) {
            value = numbers_[std::size_t(memo_id_[index])];
            kind = is_safe_integer(value) ? s_int : s_float;
          } else if (k == m_lazy) {
            kind = s_string;
            id = resolve_lazy(index);
            if (id < 0) return -1;
            value = id;
          } else return -1;
          break;
        }
        case BININT1:
          if (!has(p, 2)) return -1;
          kind = s_int;
          value = b_[p + 1];
          p += 2;
          break;
        case BININT2:
          if (!has(p, 3)) return -1;
          kind = s_int;
          value = b_[p + 1] | (b_[p + 2] << 8);
          p += 3;
          break;
        case BININT:
          if (!has(p, 5)) return -1;
          kind = s_int;
          value = int32_t(read_u32(b_, std::size_t(p + 1)));
          p += 5;
          break;
        case LONG1: {
          if (!has(p, 2)) return -1;
          std::size_t n = b_[p + 1];
          if (n > 8 || !has(p, 2 + int64_t(n))) return -1;
          if ((n == 6 || n == 7) && has(p + 2, 8)) {
            // Addresses and times: 6 or 7 bytes, read as one word (below 2^53 when non-negative).
            uint64_t w;
            std::memcpy(&w, b_ + p + 2, 8);
            w &= n == 6 ? 0xffffffffffffULL : 0xffffffffffffffULL;
            if (w >> (8 * n - 1)) value = small_long(b_, std::size_t(p + 2), n);
            else value = w <= uint64_t(MAX_SAFE) ? double(w) : NaN;
          } else value = small_long(b_, std::size_t(p + 2), n);
          if (value != value) return -1;
          kind = s_int;
          p += 2 + int64_t(n);
          break;
        }
        case SHORT_BINUNICODE: {
          if (!has(p, 2)) return -1;
          int64_t n = b_[p + 1];
          if (!has(p, 2 + n)) return -1;
          if ((code == c_other || code > c_user_metadata) && byte(p + 2 + n) == MEMOIZE) {
            // A string the event does not use: stored unread.
            uint32_t index = memo_next_++;
            grow_memo(index);
            memo_kind_[index] = m_lazy;
            memo_id_[index] = int32_t(p);
            memo_key_[index] = 0;
            p += 3 + n;
            continue;
          }
          id = intern_bytes(p + 2, n);
          if (id < 0) return -1;
          kind = s_string;
          value = id;
          p += 2 + n;
          break;
        }
        default:
          p = scalar(p);
          if (p < 0) return -1;
          kind = kind_;
          value = num_;
          id = num_id_;
      }
      o = byte(p);
      if (o == MEMOIZE || o == BINPUT || o == LONG_BINPUT) {
        kind_ = kind;
        num_ = value;
        num_id_ = id;
        p = put_scalar(p);
        if (p < 0) return -1;
      }
      switch (code) {
        case c_action:
          if (kind != s_string) return -1;
          action = id;
          break;
        case c_addr:
          if (kind != s_int || value < 0) return -1;
          addr = value;
          has_addr = true;
          break;
        case c_size:
          if (kind != s_int || value < 0) return -1;
          size = value;
          break;
        case c_stream:
          if (kind == s_int) stream = value;
          else if (kind == s_nil) stream = 0;
          else return -1;
          break;
        case c_time_us:
          if (kind == s_int || (kind == s_float && std::isfinite(value))) time = value;
          else return -1;
          break;
        case c_user_metadata:
          metadata = kind == s_string ? id : -1;
          break;
        default:
          break;
      }
    }
    if (action < 0 || !has_addr) return -1;
    depth_ = depth;
    code action_code = code(codes_[std::size_t(action)]);
    int32_t global_stack = -1;
    if (wanted && (action_code == c_alloc || action_code == c_oom) && stack >= 0) {
      global_stack = global_stack_of(stack);
      if (global_stack < 0) return -1;
    }
    map_.event(device, action, action_code, addr, size, stream, time, global_stack, metadata);
    return p;
  }

  int64_t frames_list(int64_t p) {
    int64_t memo_index = reserve_at(p);
    if (memo_index == -2) return -1;
    if (memo_index >= 0) p += put_length(b_[p]);
    std::size_t n = 0;
    int32_t deepest = 0;
    for (;;) {
      p = skip_frames(p);
      if (p < 0) return -1;
      int o = byte(p);
      bool single = false;
      if (o == MARK) p++;
      else if (o == EMPTY_DICT) single = true;
      else if ((o == BINGET || o == LONG_BINGET) && byte(p + (o == BINGET ? 2 : 5)) == APPEND) single = true;
      else break;
      for (;;) {
        p = skip_frames(p);
        if (p < 0) return -1;
        int item = byte(p);
        if (!single && item == APPENDS) {
          p++;
          break;
        }
        int32_t frame;
        if (item == EMPTY_DICT) {
          p = frame_dict(p + 1);
          if (p < 0) return -1;
          frame = num_id_;
          if (depth_ > deepest) deepest = depth_;
        } else if (item == BINGET || item == LONG_BINGET) {
          int64_t width = item == BINGET ? 1 : 4;
          if (!has(p + 1, width)) return -1;
          uint32_t index = item == BINGET ? b_[p + 1] : read_u32(b_, std::size_t(p + 1));
          p += 1 + width;
          if (index >= memo_next_) return -1;
          uint8_t k = memo_kind_[index];
          if (k == m_frame) frame = memo_id_[index];
          else if (k == m_generic) {
            generic_entry& e = generic_[std::size_t(memo_id_[index])];
            if (e.as_frame > 0) frame = e.as_frame - 2;
            else {
              frame = generic_frame(e.value);
              if (frame < 0) return -1;
              e.as_frame = frame + 2;
            }
            if (e.depth > deepest) deepest = e.depth;
          } else return -1;
          if (deepest < 1) deepest = 1;
        } else return -1;
        if (n >= BATCH_ITEMS) return -1;
        if (n == scratch_.size()) scratch_.resize(std::max<std::size_t>(256, n * 2));
        scratch_[n++] = frame;
        if (single) {
          p = after_append(p);
          if (p < 0) return -1;
          break;
        }
      }
    }
    int32_t local = n == 0 ? -1 : intern_local_stack(n);
    if (memo_index >= 0) set_memo(uint32_t(memo_index), m_frames, local);
    num_id_ = local;
    depth_ = deepest + 1;
    return p;
  }

  int64_t dict_key(int64_t p) {
    int o = byte(p);
    if (o == BINGET || o == LONG_BINGET) {
      int64_t width = o == BINGET ? 1 : 4;
      if (!has(p + 1, width)) return -1;
      uint32_t index = o == BINGET ? b_[p + 1] : read_u32(b_, std::size_t(p + 1));
      if (index >= memo_next_) return -1;
      int known = memo_key_[index];
      if (known == 0) {
        if (memo_kind_[index] != m_lazy) return -1;
        if (resolve_lazy(index) < 0) return -1;
        known = memo_key_[index];
      }
      key_code_ = known - 1;
      return p + 1 + width;
    }
    p = scalar(p);
    if (p < 0 || kind_ != s_string) return -1;
    key_code_ = codes_[std::size_t(num_id_)];
    return put_scalar(p);
  }

  int64_t frame_dict(int64_t p) {
    int64_t memo_index = reserve_at(p);
    if (memo_index == -2) return -1;
    if (memo_index >= 0) p += put_length(b_[p]);
    p = skip_frames(p);
    if (p < 0 || byte(p) != MARK) return -1;
    p++;
    int32_t name = -1, file = -1;
    double line = NaN;
    for (;;) {
      p = skip_frames(p);
      if (p < 0) return -1;
      if (byte(p) == SETITEMS) {
        p++;
        break;
      }
      p = dict_key(p);
      if (p < 0) return -1;
      int code = key_code_;
      p = scalar(p);
      if (p < 0) return -1;
      int kind = kind_;
      double value = num_;
      int32_t id = num_id_;
      p = put_scalar(p);
      if (p < 0) return -1;
      if (code == c_name) name = kind == s_string ? id : -1;
      else if (code == c_filename) file = kind == s_string ? id : -1;
      else if (code == c_line) line = kind == s_int || kind == s_float ? value : NaN;
    }
    if (name < 0 || file < 0 || line != line) return -1;
    int32_t frame = intern_frame(name, file, line);
    if (memo_index >= 0) set_memo(uint32_t(memo_index), m_frame, frame);
    num_id_ = frame;
    depth_ = 1;
    return p;
  }

  /** PickleDict.get of a string key: the value of its last occurrence. */
  const gval* dict_get(const container& c, code key) const {
    for (std::size_t i = c.items.size(); i >= 2; i -= 2) {
      const gval& k = c.items[i - 2];
      if (k.tag == g_string && codes_[std::size_t(k.i)] == key) return &c.items[i - 1];
    }
    return nullptr;
  }

  int32_t generic_frame(const gval& value) {
    if (value.tag != g_dict) return -1;
    container& c = containers_[std::size_t(value.i)];
    if (c.as_frame >= 0) return c.as_frame;
    const gval* name = dict_get(c, c_name);
    const gval* file = dict_get(c, c_filename);
    const gval* line = dict_get(c, c_line);
    if (!name || !file || !line || name->tag != g_string || file->tag != g_string || line->tag != g_number || line->number != line->number) return -1;
    int32_t frame = intern_frame(name->i, file->i, line->number);
    containers_[std::size_t(value.i)].as_frame = frame;
    return frame;
  }

  int32_t generic_stack(const gval& value) {
    if (value.tag != g_list && value.tag != g_tuple) return -2;
    if (containers_[std::size_t(value.i)].items.empty()) return -1;
    if (containers_[std::size_t(value.i)].as_stack != -3) return containers_[std::size_t(value.i)].as_stack;
    std::size_t n = containers_[std::size_t(value.i)].items.size();
    if (n >= (1u << 24)) return -2;
    if (scratch_.size() < n) scratch_.resize(n);
    for (std::size_t i = 0; i < n; i++) {
      int32_t frame = generic_frame(containers_[std::size_t(value.i)].items[i]);
      if (frame < 0) return -2;
      scratch_[i] = frame;
    }
    int32_t local = intern_local_stack(n);
    containers_[std::size_t(value.i)].as_stack = local;
    return local;
  }

  /** The mapper's stack id of a local stack (its frames given the mapper's ids first), -1 to give up. */
  int32_t global_stack_of(int32_t local) {
    if (stack_global_[std::size_t(local)] >= 0) return stack_global_[std::size_t(local)];
    std::size_t start = std::size_t(stack_start_[std::size_t(local)]);
    std::size_t n = std::size_t(stack_length_[std::size_t(local)]);
    if (global_scratch_.size() < n) global_scratch_.resize(n);
    for (std::size_t i = 0; i < n; i++) {
      std::size_t f = std::size_t(stack_frames_[start + i]);
      if (frame_global_[f] < 0) {
        // The mapper keys frames by their text joined with NUL: a NUL inside would make it ambiguous.
        if (has_nul(frame_name_[f]) || has_nul(frame_file_[f])) return -1;
        frame_global_[f] = int32_t(map_.frame_id(frame_name_[f], frame_file_[f], frame_line_[f]));
      }
      global_scratch_[i] = uint32_t(frame_global_[f]);
    }
    int32_t id = int32_t(map_.intern_stack(global_scratch_.data(), n));
    stack_global_[std::size_t(local)] = id;
    return id;
  }

  bool has_nul(int32_t string_id) const {
    uint32_t off = out_.strings[2 * std::size_t(string_id)], len = out_.strings[2 * std::size_t(string_id) + 1];
    return std::memchr(b_ + off, 0, len) != nullptr;
  }

  // ---- scalars and the memo ----

  int64_t scalar(int64_t p) {
    if (p >= end_) return -1;
    int o = b_[p];
    switch (o) {
      case BINGET:
      case LONG_BINGET: {
        int64_t width = o == BINGET ? 1 : 4;
        if (!has(p + 1, width)) return -1;
        uint32_t index = o == BINGET ? b_[p + 1] : read_u32(b_, std::size_t(p + 1));
        if (index >= memo_next_) return -1;
        uint8_t k = memo_kind_[index];
        if (k == m_string || k == m_lazy) {
          kind_ = s_string;
          num_id_ = k == m_string ? memo_id_[index] : resolve_lazy(index);
          if (num_id_ < 0) return -1;
          num_ = num_id_;
        } else if (k == m_number) {
          double v = numbers_[std::size_t(memo_id_[index])];
          kind_ = is_safe_integer(v) ? s_int : s_float;
          num_ = v;
        } else return -1;
        return p + 1 + width;
      }
      case SHORT_BINUNICODE: {
        if (!has(p, 2)) return -1;
        int64_t n = b_[p + 1];
        if (!has(p, 2 + n)) return -1;
        kind_ = s_string;
        num_id_ = intern_bytes(p + 2, n);
        if (num_id_ < 0) return -1;
        num_ = num_id_;
        return p + 2 + n;
      }
      case BINUNICODE:
      case BINUNICODE8: {
        int64_t width = o == BINUNICODE ? 4 : 8;
        if (!has(p, 1 + width)) return -1;
        uint64_t n = width == 4 ? read_u32(b_, std::size_t(p + 1))
                                : (uint64_t(read_u32(b_, std::size_t(p + 5))) << 32) | read_u32(b_, std::size_t(p + 1));
        if (n > uint64_t(end_ - p - 1 - width)) return -1;
        kind_ = s_string;
        num_id_ = intern_bytes(p + 1 + width, int64_t(n));
        if (num_id_ < 0) return -1;
        num_ = num_id_;
        return p + 1 + width + int64_t(n);
      }
      case BININT1:
        if (!has(p, 2)) return -1;
        kind_ = s_int;
        num_ = b_[p + 1];
        return p + 2;
      case BININT2:
        if (!has(p, 3)) return -1;
        kind_ = s_int;
        num_ = b_[p + 1] | (b_[p + 2] << 8);
        return p + 3;
      case BININT:
        if (!has(p, 5)) return -1;
        kind_ = s_int;
        num_ = int32_t(read_u32(b_, std::size_t(p + 1)));
        return p + 5;
      case LONG1: {
        if (!has(p, 2)) return -1;
        std::size_t n = b_[p + 1];
        if (n > 8 || !has(p, 2 + int64_t(n))) return -1;
        double v = small_long(b_, std::size_t(p + 2), n);
        if (v != v) return -1;
        kind_ = s_int;
        num_ = v;
        return p + 2 + int64_t(n);
      }
      case BINFLOAT: {
        if (!has(p, 9)) return -1;
        uint64_t x = 0;
        for (int i = 0; i < 8; i++) x = (x << 8) | b_[p + 1 + i];
        double d;
        std::memcpy(&d, &x, 8);
        kind_ = s_float;
        num_ = d;
        return p + 9;
      }
      case NONE:
        kind_ = s_nil;
        return p + 1;
      case NEWTRUE:
      case NEWFALSE:
        kind_ = s_bool;
        num_ = o == NEWTRUE ? 1 : 0;
        return p + 1;
      case FRAME: {
        int64_t q = skip_frames(p);
        return q < 0 || byte(q) == FRAME ? -1 : scalar(q);
      }
      default:
        return -1;
    }
  }

  int64_t put_scalar(int64_t p) {
    int o = byte(p);
    if (o == MEMOIZE) {
      if (kind_ == s_string) {
        uint32_t index = memo_next_++;
        grow_memo(index);
        memo_kind_[index] = m_string;
        memo_id_[index] = num_id_;
        memo_key_[index] = uint8_t(codes_[std::size_t(num_id_)] + 1);
        return p + 1;
      }
      if (kind_ == s_int || kind_ == s_float) {
        uint32_t index = memo_next_++;
        grow_memo(index);
        memo_kind_[index] = m_number;
        memo_id_[index] = add_number(num_);
        memo_key_[index] = 0;
        return p + 1;
      }
    } else if (o != BINPUT && o != LONG_BINPUT) return p;
    int64_t index = reserve_at(p);
    if (index == -1) return p;
    if (index == -2) return -1;
    if (kind_ == s_string) set_memo(uint32_t(index), m_string, num_id_);
    else if (kind_ == s_int || kind_ == s_float) set_memo_number(uint32_t(index), num_);
    else set_memo(uint32_t(index), m_generic, add_generic(kind_ == s_nil ? gval{g_none} : gval{g_bool, num_ == 1 ? 1 : 0}, 0));
    return p + put_length(b_[p]);
  }

  int64_t put_container(int64_t p, memo_kind kind, int32_t num) {
    if (byte(p) == MEMOIZE) {
      uint32_t index = memo_next_++;
      grow_memo(index);
      memo_kind_[index] = kind;
      memo_id_[index] = num;
      memo_key_[index] = 0;
      return p + 1;
    }
    int64_t index = reserve_at(p);
    if (index == -1) return p;
    if (index == -2) return -1;
    set_memo(uint32_t(index), kind, num);
    return p + put_length(b_[p]);
  }

  /** The memo index the store at p writes, reserved; -1 if none is at p, -2 where it gives up. */
  int64_t reserve_at(int64_t p) {
    int o = byte(p);
    if (o != MEMOIZE && o != BINPUT && o != LONG_BINPUT) return -1;
    int64_t index = put_index(o, p);
    if (index < 0) return -2;
    set_memo(uint32_t(index), m_event, 0);
    return index;
  }

  int64_t put_index(int o, int64_t start) {
    int64_t index;
    if (o == MEMOIZE) index = memo_next_;
    else {
      int64_t width = o == BINPUT ? 1 : 4;
      if (!has(start, 1 + width)) return -1;
      index = width == 1 ? b_[start + 1] : int64_t(read_u32(b_, std::size_t(start + 1)));
      if (index > start || index > int64_t(memo_next_) + MEMO_JUMP) return -1;
    }
    grow_memo(uint32_t(index));
    if (memo_kind_[std::size_t(index)] != m_unset && index < int64_t(memo_next_)) return -1;
    return index;
  }

  void grow_memo(uint32_t index) {
    if (index < memo_kind_.size()) return;
    std::size_t size = std::max<std::size_t>(std::size_t(index) + 1, 2 * memo_kind_.size());
    memo_kind_.resize(size, m_unset);
    memo_id_.resize(size, 0);
    memo_key_.resize(size, 0);
  }

  /** A lazy entry's string interned (the entry then holds it); its id, -1 to give up. */
  int32_t resolve_lazy(uint32_t index) {
    int64_t at = memo_id_[index];
    int32_t id = intern_bytes(at + 2, b_[at + 1]);
    if (id < 0) return -1;
    memo_kind_[index] = m_string;
    memo_id_[index] = id;
    memo_key_[index] = uint8_t(codes_[std::size_t(id)] + 1);
    return id;
  }

  void set_memo(uint32_t index, memo_kind kind, int32_t num) {
    grow_memo(index);
    memo_kind_[index] = kind;
    memo_key_[index] = kind == m_string ? uint8_t(codes_[std::size_t(num)] + 1) : 0;
    memo_id_[index] = num;
    if (index >= memo_next_) memo_next_ = index + 1;
  }
  void set_memo_number(uint32_t index, double value) {
    set_memo(index, m_number, add_number(value));
  }
  int32_t add_number(double v) {
    numbers_.push_back(v);
    return int32_t(numbers_.size() - 1);
  }

  // Past the APPEND that ends a one-item list append (frames before it skipped); -1 if not there.
  int64_t after_append(int64_t p) {
    p = skip_frames(p);
    return p < 0 || byte(p) != APPEND ? -1 : p + 1;
  }

  int64_t skip_frames(int64_t p) {
    while (byte(p) == FRAME) {
      if (!has(p, 9)) return -1;
      uint64_t n = (uint64_t(read_u32(b_, std::size_t(p + 5))) << 32) | read_u32(b_, std::size_t(p + 1));
      if (n > uint64_t(end_ - p - 9)) return -1;
      p += 9;
    }
    return p;
  }

  static int64_t put_length(int o) { return o == MEMOIZE ? 1 : o == BINPUT ? 2 : 5; }

  // ---- interning ----

  /** A word at a time: most strings are file names of tens of bytes, hashed once per frame dict. */
  uint64_t bytes_hash(uint32_t at, uint32_t n) const {
    const uint8_t* s = b_ + at;
    uint64_t h = uint64_t(n) * 0x9e3779b97f4a7c15ULL;
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    for (uint32_t k = 0; i + k < n; k++) tail |= uint64_t(s[i + k]) << (8 * k);
    return mix(h ^ tail);
  }

  /** The id of the string of bytes [at, at + n), -1 where it is not well-formed UTF-8 (give up). */
  int32_t intern_bytes(int64_t at, int64_t n) {
    if (n > int64_t(UINT32_MAX)) return -1;
    uint32_t a = uint32_t(at), len = uint32_t(n);
    std::size_t mask = string_slots_.slots.size() - 1;
    for (std::size_t s = bytes_hash(a, len) & mask;; s = (s + 1) & mask) {
      int32_t e = string_slots_.slots[s];
      if (e < 0) {
        if (!well_formed_utf8(b_ + a, len)) return -1;
        int32_t id = int32_t(codes_.size());
        out_.strings.push_back(a);
        out_.strings.push_back(len);
        codes_.push_back(classify(b_ + a, len));
        string_slots_.slots[s] = id;
        string_slots_.count++;
        string_slots_.grow_if_needed([this](int32_t k) {
          return bytes_hash(out_.strings[2 * std::size_t(k)], out_.strings[2 * std::size_t(k) + 1]);
        });
        return id;
      }
      uint32_t eo = out_.strings[2 * std::size_t(e)], el = out_.strings[2 * std::size_t(e) + 1];
      if (el == len && std::memcmp(b_ + eo, b_ + a, len) == 0) return e;
    }
  }

  uint64_t frame_hash(int32_t name, int32_t file, double line) const {
    uint64_t bits;
    std::memcpy(&bits, &line, 8);
    return mix(uint64_t(uint32_t(name)) * 0x9e3779b97f4a7c15ULL ^ uint64_t(uint32_t(file)) * 0xc2b2ae3d27d4eb4fULL ^ bits);
  }

  /** Local frames: the same name and file ids and a line the same by Object.is. */
  int32_t intern_frame(int32_t name, int32_t file, double line) {
    std::size_t mask = frame_slots_.slots.size() - 1;
    uint64_t line_bits;
    std::memcpy(&line_bits, &line, 8);
    std::size_t s = frame_hash(name, file, line) & mask;
    for (;; s = (s + 1) & mask) {
      int32_t f = frame_slots_.slots[s];
      if (f < 0) break;
      uint64_t other;
      std::memcpy(&other, &frame_line_[std::size_t(f)], 8);
      if (frame_name_[std::size_t(f)] == name && frame_file_[std::size_t(f)] == file && other == line_bits) return f;
    }
    int32_t f = int32_t(frame_name_.size());
    frame_name_.push_back(name);
    frame_file_.push_back(file);
    frame_line_.push_back(line);
    frame_global_.push_back(-1);
    frame_slots_.slots[s] = f;
    frame_slots_.count++;
    frame_slots_.grow_if_needed([this](int32_t k) {
      return frame_hash(frame_name_[std::size_t(k)], frame_file_[std::size_t(k)], frame_line_[std::size_t(k)]);
    });
    return f;
  }

  uint64_t ids_hash(const int32_t* ids, std::size_t n) const {
    uint64_t h = n;
    for (std::size_t i = 0; i < n; i++) h = (h ^ uint32_t(ids[i])) * 0x9e3779b97f4a7c15ULL;
    return mix(h);
  }

  /** The local stack id of the frames scratch_[0, n). */
  int32_t intern_local_stack(std::size_t n) {
    std::size_t mask = stack_slots_.slots.size() - 1;
    std::size_t s = ids_hash(scratch_.data(), n) & mask;
    for (;; s = (s + 1) & mask) {
      int32_t k = stack_slots_.slots[s];
      if (k < 0) break;
      if (std::size_t(stack_length_[std::size_t(k)]) == n &&
          std::equal(scratch_.begin(), scratch_.begin() + std::ptrdiff_t(n), stack_frames_.begin() + stack_start_[std::size_t(k)]))
        return k;
    }
    int32_t k = int32_t(stack_start_.size());
    stack_start_.push_back(int32_t(stack_frames_.size()));
    stack_length_.push_back(int32_t(n));
    stack_global_.push_back(-1);
    stack_frames_.insert(stack_frames_.end(), scratch_.begin(), scratch_.begin() + std::ptrdiff_t(n));
    stack_slots_.slots[s] = k;
    stack_slots_.count++;
    stack_slots_.grow_if_needed([this](int32_t j) {
      return ids_hash(stack_frames_.data() + stack_start_[std::size_t(j)], std::size_t(stack_length_[std::size_t(j)]));
    });
    return k;
  }

  // ---- the finish (SnapshotMapper.finishSteps, but its strings) ----

  static bool is_amount(const gval* v) { return v != nullptr && v->tag == g_number && is_safe_integer(v->number) && v->number >= 0; }
  static bool is_list(const gval* v) { return v != nullptr && (v->tag == g_list || v->tag == g_tuple); }
  bool is_code(const gval* v, code c) const { return v != nullptr && v->tag == g_string && codes_[std::size_t(v->i)] == c; }
  const container& items_of(const gval& v) const { return containers_[std::size_t(v.i)]; }

  /** field(seg, 'device') === device || (no 'device' and device 0). */
  bool segment_of(const container& seg, double device) const {
    const gval* d = dict_get(seg, c_device);
    return d == nullptr ? device == 0 : d->tag == g_number && d->number == device;
  }

  /** The mapper's stack for a block's frames (SnapshotMapper.stack): -1 none, -2 where the JS finish must say why. */
  int32_t block_stack(const gval* frames, bool intern) {
    if (frames == nullptr || frames->tag == g_none) return -1;
    if (!is_list(frames)) return -2;
    int32_t local = generic_stack(*frames);
    if (local < -1) return -2;
    if (local == -1) return -1;
    // Checked before anything is added to the tables: the NUL that global_stack_of refuses.
    std::size_t start = std::size_t(stack_start_[std::size_t(local)]), n = std::size_t(stack_length_[std::size_t(local)]);
    for (std::size_t i = 0; i < n; i++) {
      std::size_t f = std::size_t(stack_frames_[start + i]);
      if (frame_global_[f] < 0 && (has_nul(frame_name_[f]) || has_nul(frame_file_[f]))) return -2;
    }
    return intern ? global_stack_of(local) : local;
  }

  /**
   * The checks that would make the JavaScript finish throw (or that this one leaves to it), made
   * before anything changes: false leaves the whole finish to JavaScript, with nothing changed.
   */
  bool finishable(const std::vector<const container*>& segments, const std::vector<double>& selected) {
    for (double device : selected)
      if (device > MAX_DEVICE) return false;
    for (const container* seg : segments) {
      bool mine = false;
      for (double device : selected) mine = mine || segment_of(*seg, device);
      if (!mine) continue;
      if (!is_amount(dict_get(*seg, c_address)) || !is_amount(dict_get(*seg, c_total_size))) return false;
      const gval* stream = dict_get(*seg, c_stream);
      if (stream != nullptr && stream->tag == g_long) return false;  // a bigint stream: a table of numbers here
      const gval* blocks = dict_get(*seg, c_blocks);
      if (!is_list(blocks)) continue;
      double at = dict_get(*seg, c_address)->number;
      for (const gval& block : items_of(*blocks).items) {
        if (block.tag != g_dict) continue;
        const container& b = items_of(block);
        const gval* size = dict_get(b, c_size);
        if (!is_amount(size)) break;
        const gval* listed = dict_get(b, c_address);
        double address = is_amount(listed) ? listed->number : at;
        if (!(address <= MAX_SAFE)) return false;
        at = address + size->number;
        if (is_code(dict_get(b, c_state), c_active_allocated) && block_stack(dict_get(b, c_frames), false) == -2) return false;
      }
    }
    return true;
  }

  /** addLiveAtSnapshot: blocks and segments live at the snapshot that the trace never saw created. */
  void add_live_at_snapshot(device_result& s, const std::vector<const container*>& segments) {
    for (const container* seg : segments) {
      if (!segment_of(*seg, s.device)) continue;
      double address = dict_get(*seg, c_address)->number, total = dict_get(*seg, c_total_size)->number;
      const gval* given = dict_get(*seg, c_stream);
      double stream_value = given != nullptr && given->tag == g_number && std::isfinite(given->number) && std::trunc(given->number) == given->number ? given->number : 0;
      const gval* type = dict_get(*seg, c_segment_type);
      uint32_t pool = is_code(type, c_small) ? 1 : is_code(type, c_large) ? 2 : 0;
      const gval* expandable = dict_get(*seg, c_is_expandable);
      if (expandable != nullptr && expandable->tag == g_bool && expandable->i == 1) {
        bool mapped = false;
        for (double a : s.mapped) mapped = mapped || (a >= address && a < address + total);
        if (!mapped) {
          s.synth_layout.push(l_map, address, total, total, stream_value, NaN, pool);
          s.synthesized_segments++;
        }
      } else if (!s.segments.has(address)) {
        s.synth_layout.push(l_region_reserve, address, total, total, stream_value, NaN, pool);
        s.segments.set(address, total);
        s.synthesized_segments++;
      } else {
        double row = s.reserve_row.get(address);
        if (row >= 0) s.layout.aux[std::size_t(row)] = pool;
      }
      const gval* blocks = dict_get(*seg, c_blocks);
      if (!is_list(blocks)) continue;
      double at = address;
      for (const gval& block : items_of(*blocks).items) {
        if (block.tag != g_dict) continue;
        const container& b = items_of(block);
        const gval* size_value = dict_get(b, c_size);
        if (!is_amount(size_value)) break;
        double size = size_value->number;
        const gval* listed = dict_get(b, c_address);
        double block_address = is_amount(listed) ? listed->number : at;
        at = block_address + size;
        const gval* state = dict_get(b, c_state);
        const gval* requested_value = dict_get(b, c_requested_size);
        double requested = is_amount(requested_value) ? requested_value->number : size;
        if (is_code(state, c_active_allocated) && s.live.get(block_address) < 0) {
          uint32_t id = map_.new_id(s, requested, size);
          s.live.set(block_address, id);
          uint32_t st = map_.stream(stream_value);
          s.synth_events.push(k_alloc, id, requested, st, NaN, block_stack(dict_get(b, c_frames), true));
          s.synth_layout.push(l_alloc, block_address, size, requested, stream_value, NaN);
          s.synthesized_allocs++;
          s.synthesized_blocks++;
        } else if (is_code(state, c_active_pending_free) && s.pending.get(block_address) < 0 && s.live.get(block_address) < 0) {
          s.synth_layout.push(l_alloc, block_address, size, requested, stream_value, NaN);
          s.synth_layout.push(l_free_pending, block_address, size, requested, stream_value, NaN);
          s.synthesized_blocks++;
        }
      }
    }
  }

  /** The import's finish where it can be done here (finished_import); false leaves it to JavaScript, nothing changed. */
  bool finish() {
    const container& root = containers_[std::size_t(root_)];
    std::vector<const container*> segments;
    if (const gval* value = dict_get(root, c_segments)) {
      if (!is_list(value)) return false;
      for (const gval& seg : items_of(*value).items) {
        if (seg.tag != g_dict) return false;
        segments.push_back(&items_of(seg));
      }
    }
    std::vector<double> present;
    for (std::size_t d = 0; d < out_.event_counts.size(); d++)
      if (out_.event_counts[d] > 0) present.push_back(double(d));
    for (const container* seg : segments) {
      const gval* d = dict_get(*seg, c_device);
      if (d != nullptr && d->tag == g_number && std::isfinite(d->number) && std::trunc(d->number) == d->number && d->number >= 0) {
        double device = d->number == 0 ? 0.0 : d->number;  // -0: a Set keeps 0
        if (std::find(present.begin(), present.end(), device) == present.end()) present.push_back(device);
      }
    }
    std::sort(present.begin(), present.end());
    std::vector<double> selected;
    if (map_.wanted == -1) selected = present;
    else if (map_.wanted == -2) selected = {present.empty() || std::find(present.begin(), present.end(), 0.0) != present.end() ? 0.0 : present[0]};
    else {
      if (!present.empty() && std::find(present.begin(), present.end(), double(map_.wanted)) == present.end()) return false;
      selected = {double(map_.wanted)};
    }
    if (!finishable(segments, selected)) return false;

    // The selected devices' states, in the JavaScript mapper's order: by first event, then those
    // selected with none, in order (a new state may move the others: pointers taken after).
    for (double device : selected) {
      bool found = false;
      for (const device_result& s : out_.devices) found = found || s.device == device;
      if (!found) {
        map_.last_device = -1;
        map_.state(uint32_t(device));
      }
    }
    std::vector<device_result*> in_order;
    for (device_result& s : out_.devices)
      if (std::find(selected.begin(), selected.end(), double(s.device)) != selected.end()) in_order.push_back(&s);
    for (device_result* s : in_order) {
      if (s->held >= 0) map_.flush_held(*s);
      add_live_at_snapshot(*s, segments);
    }

    finished_import& f = out_.finished;
    std::vector<double> marker_times;
    std::vector<uint32_t> marker_ids;
    std::vector<uint16_t> marker_devices;
    if (const gval* annotations = dict_get(root, c_external_annotations); is_list(annotations)) {
      for (const gval& a : items_of(*annotations).items) {
        if (a.tag != g_dict) continue;
        const container& c = items_of(a);
        const gval* device = dict_get(c, c_device);
        const gval* time = dict_get(c, c_time_us);
        const gval* name = dict_get(c, c_name);
        if (time == nullptr || time->tag != g_number || !std::isfinite(time->number) || name == nullptr || name->tag != g_string) continue;
        double d = device != nullptr && device->tag == g_number ? device->number : 0;
        if (std::find(selected.begin(), selected.end(), d) == selected.end()) continue;
        const gval* stage = dict_get(c, c_stage);
        f.annotation_markers.push_back(name->i);
        f.annotation_markers.push_back(stage != nullptr && stage->tag == g_string ? stage->i : -1);
        marker_times.push_back(time->number);
        marker_ids.push_back(out_.markers + uint32_t(marker_times.size() - 1));
        marker_devices.push_back(uint16_t(d));
        if (time->number < out_.earliest) out_.earliest = time->number;
      }
    }
    double t0 = std::isfinite(out_.earliest) ? out_.earliest : 0;
    std::sort(in_order.begin(), in_order.end(), [](const device_result* a, const device_result* b) { return a->device < b->device; });
    merge(in_order, t0, marker_times, marker_ids, marker_devices);
    for (device_result* s : in_order) {
      layout_columns l;
      for (const layout_columns* part : {&s->synth_layout, &s->layout}) {
        l.op.insert(l.op.end(), part->op.begin(), part->op.end());
        l.address.insert(l.address.end(), part->address.begin(), part->address.end());
        l.size.insert(l.size.end(), part->size.begin(), part->size.end());
        l.requested.insert(l.requested.end(), part->requested.begin(), part->requested.end());
        l.stream.insert(l.stream.end(), part->stream.begin(), part->stream.end());
        l.aux.insert(l.aux.end(), part->aux.begin(), part->aux.end());
        for (double t : part->time) l.time.push_back(t != t ? 0 : (t - t0) * 1000);
      }
      f.layouts.push_back(std::move(l));
      f.overflow.insert(f.overflow.end(), {s->orphan_events, s->synthesized_allocs, s->synthesized_blocks, s->synthesized_segments});
    }
    f.present = std::move(present);
    f.selected = std::move(selected);
    f.done = true;
    out_.devices.clear();
    return true;
  }

  /**
   * mergeEvents and mergeRuns: stand-ins first, then each device's events and the markers in time
   * order, ids following on from the devices before; runs capped as there (they decide ties).
   */
  void merge(const std::vector<device_result*>& states, double t0, const std::vector<double>& marker_times,
             const std::vector<uint32_t>& marker_ids, const std::vector<uint16_t>& marker_devices) {
    constexpr std::size_t RUN_CAP = std::size_t(128) << 12;  // YIELD_CHUNKS * CHUNK_ROWS in pytorch.ts
    uint32_t base = 0;
    for (device_result* s : states) {
      if (base > 0)
        for (event_columns* part : {&s->synth_events, &s->events})
          for (std::size_t i = 0; i < part->rows(); i++)
            if (part->kind[i] == k_alloc || part->kind[i] == k_free) part->id[i] += base;
      base += s->next_id;
    }
    finished_import& f = out_.finished;
    event_columns& out = f.events;
    std::size_t total = marker_times.size();
    for (device_result* s : states) total += s->synth_events.rows() + s->events.rows();
    for (auto* v : {&out.size, &out.time}) v->reserve(total);
    for (auto* v : {&out.id, &out.stream}) v->reserve(total);
    for (auto* v : {&out.stack, &out.tag}) v->reserve(total);
    out.kind.reserve(total);
    f.event_device.reserve(total);
    auto copy = [&](const event_columns& from, std::size_t a, std::size_t b, uint32_t device) {
      out.kind.insert(out.kind.end(), from.kind.begin() + std::ptrdiff_t(a), from.kind.begin() + std::ptrdiff_t(b));
      out.id.insert(out.id.end(), from.id.begin() + std::ptrdiff_t(a), from.id.begin() + std::ptrdiff_t(b));
      out.size.insert(out.size.end(), from.size.begin() + std::ptrdiff_t(a), from.size.begin() + std::ptrdiff_t(b));
      out.stream.insert(out.stream.end(), from.stream.begin() + std::ptrdiff_t(a), from.stream.begin() + std::ptrdiff_t(b));
      out.time.insert(out.time.end(), from.time.begin() + std::ptrdiff_t(a), from.time.begin() + std::ptrdiff_t(b));
      out.stack.insert(out.stack.end(), from.stack.begin() + std::ptrdiff_t(a), from.stack.begin() + std::ptrdiff_t(b));
      out.tag.insert(out.tag.end(), from.tag.begin() + std::ptrdiff_t(a), from.tag.begin() + std::ptrdiff_t(b));
      f.event_device.insert(f.event_device.end(), b - a, uint16_t(device));
    };
    for (device_result* s : states) copy(s->synth_events, 0, s->synth_events.rows(), s->device);
    std::vector<std::size_t> order(marker_times.size());
    for (std::size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return marker_times[a] < marker_times[b]; });
    uint32_t marker_stream = order.empty() ? 0 : map_.stream(0);
    std::vector<std::size_t> cursors(states.size(), 0);
    std::size_t next = 0;
    for (;;) {
      int best = -1;
      double best_time = INFINITY;
      for (std::size_t d = 0; d < states.size(); d++) {
        std::size_t c = cursors[d];
        if (c < states[d]->events.rows() && states[d]->events.time[c] < best_time) {
          best = int(d);
          best_time = states[d]->events.time[c];
        }
      }
      if (next < order.size() && (marker_times[order[next]] < best_time || best < 0)) {
        std::size_t m = order[next++];
        out.push(k_marker, marker_ids[m], 0, marker_stream, marker_times[m]);
        f.event_device.push_back(marker_devices[m]);
        continue;
      }
      if (best < 0) break;
      double limit = next < order.size() ? marker_times[order[next]] : INFINITY;
      for (std::size_t d = 0; d < states.size(); d++)
        if (int(d) != best && cursors[d] < states[d]->events.rows()) limit = std::min(limit, states[d]->events.time[cursors[d]]);
      const event_columns& part = states[std::size_t(best)]->events;
      std::size_t from = cursors[std::size_t(best)];
      std::size_t stop = std::min(part.rows(), from + RUN_CAP);
      std::size_t end = from + 1;
      while (end < stop && part.time[end] <= limit) end++;
      copy(part, from, end, states[std::size_t(best)]->device);
      cursors[std::size_t(best)] = end;
    }
    for (double& t : out.time) t = t != t ? 0 : (t - t0) * 1000;
  }

  // ---- the tape ----

  int32_t containers_emitted_ = 0;

  void emit(const gval& v) {
    std::vector<int32_t>& t = out_.tape;
    switch (v.tag) {
      case g_none: t.push_back(tape_none); return;
      case g_bool: t.push_back(v.i ? tape_true : tape_false); return;
      case g_number: t.push_back(tape_number); out_.tape_numbers.push_back(v.number); return;
      case g_string: t.push_back(tape_string); t.push_back(v.i); return;
      case g_long: t.push_back(tape_long); t.push_back(int32_t(v.off)); t.push_back(int32_t(v.len)); return;
      default: break;
    }
    container& c = containers_[std::size_t(v.i)];
    if (c.emitted >= 0) {
      t.push_back(tape_ref);
      t.push_back(c.emitted);
      return;
    }
    c.emitted = containers_emitted_++;
    t.push_back(v.tag == g_dict ? tape_dict : v.tag == g_list ? tape_list : tape_tuple);
    t.push_back(int32_t(c.items.size()));
    // Nesting is bounded by depth_limit_ (at most 4092), so is this recursion.
    for (std::size_t i = 0; i < containers_[std::size_t(v.i)].items.size(); i++) emit(containers_[std::size_t(v.i)].items[i]);
  }
};

}  // namespace

// ---- address_map ----

address_map::address_map() : keys_(64), values_(64), used_(64), mask_(63) {}

std::size_t address_map::slot(double address) const {
  return std::size_t(mix(uint64_t(address))) & mask_;  // -0 and 0 alike: addresses are integers
}

double address_map::get(double address, double missing) const {
  for (std::size_t i = slot(address);; i = (i + 1) & mask_) {
    if (!used_[i]) return missing;
    if (keys_[i] == address) return values_[i];
  }
}

bool address_map::has(double address) const {
  for (std::size_t i = slot(address);; i = (i + 1) & mask_) {
    if (!used_[i]) return false;
    if (keys_[i] == address) return true;
  }
}

void address_map::set(double address, double value) {
  if (2 * (count_ + 1) > keys_.size()) grow();
  std::size_t i = slot(address);
  while (used_[i] && keys_[i] != address) i = (i + 1) & mask_;
  if (!used_[i]) count_++;
  used_[i] = 1;
  keys_[i] = address;
  values_[i] = value;
}

void address_map::erase(double address) {
  std::size_t i = slot(address);
  while (used_[i] && keys_[i] != address) i = (i + 1) & mask_;
  if (!used_[i]) return;
  count_--;
  for (std::size_t j = (i + 1) & mask_; used_[j]; j = (j + 1) & mask_) {
    std::size_t home = slot(keys_[j]);
    if (((j - home) & mask_) >= ((j - i) & mask_)) {
      keys_[i] = keys_[j];
      values_[i] = values_[j];
      i = j;
    }
  }
  used_[i] = 0;
}

std::vector<std::pair<double, double>> address_map::entries() const {
  std::vector<std::pair<double, double>> all;
  all.reserve(count_);
  for (std::size_t i = 0; i < keys_.size(); i++) if (used_[i]) all.emplace_back(keys_[i], values_[i]);
  return all;
}

void address_map::grow() {
  std::vector<double> keys = std::move(keys_), values = std::move(values_);
  std::vector<uint8_t> used = std::move(used_);
  keys_.assign(keys.size() * 2, 0);
  values_.assign(keys.size() * 2, 0);
  used_.assign(keys.size() * 2, 0);
  mask_ = keys_.size() - 1;
  count_ = 0;
  for (std::size_t i = 0; i < keys.size(); i++) if (used[i]) set(keys[i], values[i]);
}

decode_result decode(const uint8_t* bytes, std::size_t length, const options& opts, decoded& out) noexcept {
  try {
    out = decoded{};
    if (!(opts.max_depth >= DEPTH_NEEDED) || length >= (std::size_t(1) << 31)) return decode_result::gave_up;
    decoder d(bytes, length, opts, out);
    if (d.run()) return decode_result::decoded;
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  out = decoded{};
  return decode_result::gave_up;
}

}  // namespace vramscope::snapshot_pickle
