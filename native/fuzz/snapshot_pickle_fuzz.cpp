// libFuzzer target: any bytes through the native snapshot decoder (core/snapshot_pickle.cpp) with
// a maxDepth and a device (one, all, or the default) taken from the input's last bytes. It must
// return (never crash, hang or read out of bounds: ASan and UBSan watch) and, where it decodes,
// hand back a result the JavaScript side can read without checking: a tape that parses to one
// value, string ranges inside the input, ids inside their tables, columns of one length, and where
// it finished the import, merged events and layouts the binding can convert (addresses integers
// of at most 53 bits). Anything else aborts. Seeded from small snapshots written by Python's
// pickler, protocols 2 to 5 (native/fuzz/corpus).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "vramscope/snapshot_pickle.hpp"

using namespace vramscope::snapshot_pickle;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "snapshot_pickle_fuzz: %s\n", what);
  std::abort();
}

void require(bool ok, const char* what) {
  if (!ok) fail(what);
}

/** Walks one value of the tape from `at`; returns the position after it. */
std::size_t walk(const decoded& d, std::size_t at, std::size_t& numbers, std::size_t& containers, std::size_t input, int depth) {
  require(depth < 5000, "tape nested deeper than the decoder's limit");
  require(at < d.tape.size(), "tape ends inside a value");
  int32_t op = d.tape[at++];
  switch (op) {
    case tape_none:
    case tape_true:
    case tape_false:
      return at;
    case tape_number:
      require(numbers++ < d.tape_numbers.size(), "tape reads past its numbers");
      return at;
    case tape_string:
      require(at < d.tape.size() && d.tape[at] >= 0 && std::size_t(d.tape[at]) < d.strings.size() / 2, "string id out of range");
      return at + 1;
    case tape_long:
      require(at + 1 < d.tape.size() && d.tape[at] >= 0 && d.tape[at + 1] > 8 - 8 &&
                  std::size_t(d.tape[at]) + std::size_t(d.tape[at + 1]) <= input, "LONG1 bytes out of range");
      return at + 2;
    case tape_list:
    case tape_tuple:
    case tape_dict: {
      require(at < d.tape.size() && d.tape[at] >= 0, "container without a count");
      int32_t n = d.tape[at++];
      require(op != tape_dict || n % 2 == 0, "a dict of an odd number of keys and values");
      containers++;
      for (int32_t i = 0; i < n; i++) at = walk(d, at, numbers, containers, input, depth + 1);
      return at;
    }
    case tape_ref:
      require(at < d.tape.size() && d.tape[at] >= 0 && std::size_t(d.tape[at]) < containers, "ref to a container not built yet");
      return at + 1;
    default:
      fail("unknown tape opcode");
  }
}

template <class Columns>
std::size_t rows_of(const Columns& c);
template <>
std::size_t rows_of(const event_columns& e) {
  std::size_t n = e.kind.size();
  require(e.id.size() == n && e.size.size() == n && e.stream.size() == n && e.time.size() == n && e.stack.size() == n && e.tag.size() == n,
          "event columns of different lengths");
  return n;
}
template <>
std::size_t rows_of(const layout_columns& l) {
  std::size_t n = l.op.size();
  require(l.address.size() == n && l.size.size() == n && l.requested.size() == n && l.stream.size() == n && l.aux.size() == n && l.time.size() == n,
          "layout columns of different lengths");
  return n;
}

void check(const decoded& d, std::size_t input) {
  std::size_t numbers = 0, containers = 0;
  require(walk(d, 0, numbers, containers, input, 0) == d.tape.size(), "tape holds more than one value");
  require(d.strings.size() % 2 == 0, "string table of odd length");
  for (std::size_t i = 0; i < d.strings.size(); i += 2) require(std::size_t(d.strings[i]) + d.strings[i + 1] <= input, "string outside the input");
  std::size_t string_count = d.strings.size() / 2;
  require(d.frame_file.size() == d.frame_name.size() && d.frame_line.size() == d.frame_name.size(), "frame columns of different lengths");
  for (std::size_t i = 0; i < d.frame_name.size(); i++)
    require(std::size_t(d.frame_name[i]) < string_count && std::size_t(d.frame_file[i]) < string_count, "frame string out of range");
  require(!d.stack_start.empty() && d.stack_start.back() == d.stack_frames.size(), "stack starts do not end at the frames");
  for (uint32_t f : d.stack_frames) require(f < d.frame_name.size(), "stack frame out of range");
  for (int32_t t : d.tags) require(t >= 0 && std::size_t(t) < string_count, "tag out of range");
  for (auto& [id, count] : d.unknown_actions) require(id >= 0 && std::size_t(id) < string_count && count > 0, "unknown action out of range");
  std::size_t stacks = d.stack_start.size() - 1;
  for (const device_result& s : d.devices) {
    require(s.device < 65536, "device past 65535");
    require(s.requested_by_id.size() == s.next_id && s.rounded_by_id.size() == s.next_id, "ids and their sizes disagree");
    for (const event_columns* e : {&s.events, &s.synth_events}) {
      std::size_t n = rows_of(*e);
      for (std::size_t i = 0; i < n; i++) {
        require(e->kind[i] <= 3, "event kind out of range");
        require(e->stream[i] < d.streams.size(), "event stream out of range");
        require(e->stack[i] == -1 || (e->stack[i] >= 0 && std::size_t(e->stack[i]) < stacks), "event stack out of range");
        require(e->tag[i] == -1 || (e->tag[i] >= 0 && std::size_t(e->tag[i]) < d.tags.size()), "event tag out of range");
        if (e->kind[i] <= 1) require(e->id[i] < s.next_id, "event id out of range");
      }
    }
    rows_of(s.layout);
    rows_of(s.synth_layout);
    require(s.held < int64_t(s.next_id), "held id out of range");
    for (auto& [address, row] : s.reserve_row.entries()) require(row >= 0 && row < double(s.layout.rows()), "reserve row out of range");
    for (auto& [address, id] : s.live.entries()) require(id >= 0 && id < double(s.next_id), "live id out of range");
  }
  const finished_import& f = d.finished;
  if (!f.done) return;
  require(d.devices.empty(), "a finished import still holds its devices");
  std::size_t n = rows_of(f.events);
  require(f.event_device.size() == n, "event devices of another length");
  for (std::size_t i = 0; i < n; i++) {
    require(f.events.kind[i] <= 3, "finished event kind out of range");
    require(f.events.stream[i] < d.streams.size(), "finished event stream out of range");
    require(f.events.stack[i] == -1 || (f.events.stack[i] >= 0 && std::size_t(f.events.stack[i]) < stacks), "finished event stack out of range");
    require(f.events.tag[i] == -1 || (f.events.tag[i] >= 0 && std::size_t(f.events.tag[i]) < d.tags.size()), "finished event tag out of range");
    require(f.events.time[i] == f.events.time[i], "finished event time NaN");
  }
  require(f.layouts.size() == f.selected.size() && f.overflow.size() == 4 * f.selected.size(), "a layout and overflow counts per selected device");
  for (double device : f.selected) require(device >= 0 && device < 65536, "selected device out of range");
  for (const layout_columns& l : f.layouts) {
    std::size_t rows = rows_of(l);
    // The binding converts addresses to 64-bit words: they must be integers in [0, 2^53].
    for (std::size_t i = 0; i < rows; i++)
      require(l.address[i] >= 0 && l.address[i] <= 9007199254740992.0 && l.address[i] == double(uint64_t(l.address[i])), "finished layout address not a 53-bit integer");
  }
  require(f.annotation_markers.size() % 2 == 0, "annotation markers of odd length");
  for (std::size_t i = 0; i < f.annotation_markers.size(); i++) {
    int32_t id = f.annotation_markers[i];
    require((i % 2 == 1 && id == -1) || (id >= 0 && std::size_t(id) < string_count), "annotation marker string out of range");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  options opts;
  if (size >= 2) {
    // The last two bytes pick the options (maxDepth around the limit of 16, a device or all).
    opts.max_depth = 12 + data[size - 1] % 200;
    opts.device = data[size - 2] < 96 ? -1 : data[size - 2] < 128 ? -2 : data[size - 2] % 4;
  }
  decoded d;
  if (decode(data, size, opts, d) == decode_result::decoded) check(d, size);
  return 0;
}
