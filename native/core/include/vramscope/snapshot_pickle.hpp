// A native decoder for PyTorch memory snapshot pickles held whole in memory, with the importer's
// per-event mapping (src-main/services/import/pytorch.ts, SnapshotMapper) done here too. It takes
// only what the JavaScript fast path (pytorch-fast.ts) takes, and less where that is simpler, and
// gives up (decode_result::gave_up) on anything else: the caller then runs the JavaScript paths,
// which give the import or the error. Nothing throws out of decode(); no input crashes or hangs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace vramscope::snapshot_pickle {

/** Request events of one device as SnapshotMapper's EventChunks hold them (times in µs, raw). */
struct event_columns {
  std::vector<uint8_t> kind;
  std::vector<uint32_t> id;
  std::vector<double> size;
  std::vector<uint32_t> stream;
  std::vector<double> time;
  std::vector<int32_t> stack;
  std::vector<int32_t> tag;
  std::size_t rows() const { return kind.size(); }
  void push(uint8_t k, uint32_t i, double s, uint32_t st, double t, int32_t stk = -1, int32_t tg = -1) {
    kind.push_back(k), id.push_back(i), size.push_back(s), stream.push_back(st), time.push_back(t);
    stack.push_back(stk), tag.push_back(tg);
  }
};

/** Layout events of one device as LayoutChunks hold them. */
struct layout_columns {
  std::vector<uint8_t> op;
  std::vector<double> address, size, requested, stream;
  std::vector<uint32_t> aux;
  std::vector<double> time;
  std::size_t rows() const { return op.size(); }
  void push(uint8_t o, double a, double s, double r, double st, double t, uint32_t x = 0) {
    op.push_back(o), address.push_back(a), size.push_back(s), requested.push_back(r);
    stream.push_back(st), aux.push_back(x), time.push_back(t);
  }
};

/**
 * Device address (a non-negative integer below 2^53, held as a double) -> value: open addressing
 * with backward-shift deletion, as the mapper's AddressTable.
 */
class address_map {
 public:
  address_map();
  /** The value at `address`, or `missing`. */
  double get(double address, double missing = -1) const;
  bool has(double address) const;
  void set(double address, double value);
  void erase(double address);
  /** Every entry, as (address, value) pairs in slot order. */
  std::vector<std::pair<double, double>> entries() const;
  std::size_t size() const { return count_; }

 private:
  std::size_t slot(double address) const;
  void grow();
  std::vector<double> keys_, values_;
  std::vector<uint8_t> used_;
  std::size_t mask_;
  std::size_t count_ = 0;
};

/** What one device's events left: SnapshotMapper's DeviceState, field for field. */
struct device_result {
  uint32_t device = 0;
  event_columns events, synth_events;
  layout_columns layout, synth_layout;
  std::vector<double> requested_by_id, rounded_by_id;
  uint32_t next_id = 0;
  address_map live, pending, segments, reserve_row;
  std::vector<double> mapped;
  int64_t held = -1;
  double held_address = 0, held_size = 0, held_stream = 0, held_time = 0;
  double orphan_events = 0, synthesized_allocs = 0, synthesized_blocks = 0, synthesized_segments = 0;
  double next_index = 0;
};

/**
 * The import finished here (SnapshotMapper.finishSteps but its strings, warnings and properties):
 * the devices selected, what the snapshot's segments left live (addLiveAtSnapshot), annotations as
 * markers, the devices' events merged in time order and each selected device's layout, times in
 * ns from the earliest. Left out (finished false) wherever the JavaScript finish would throw or
 * the snapshot's segments or annotations hold what is simpler to leave to it.
 */
struct finished_import {
  bool done = false;
  /** Devices with events or segments, ascending; those imported, ascending. */
  std::vector<double> present, selected;
  /** The request trace's events; device per row. */
  event_columns events;
  std::vector<uint16_t> event_device;
  /** Per selected device (ascending): its layout (addresses below 2^53), overflow counts. */
  std::vector<layout_columns> layouts;
  std::vector<double> overflow;  // orphanEvents, synthesizedAllocs, synthesizedBlocks, synthesizedSegments per device
  /** Markers from external_annotations, after the 'snapshot' ones: name string id, stage string id or -1. */
  std::vector<int32_t> annotation_markers;
};

/**
 * The generic part of the root (everything but device_traces' events) as a preorder tape (see
 * tape_op), and the mapper's tables. Strings are (offset, length) pairs of UTF-8 in the input.
 * Where the import finished here, the tape holds allocator_settings' value alone (None if absent)
 * and devices is left empty.
 */
struct decoded {
  int protocol = 0;
  std::vector<int32_t> tape;
  std::vector<double> tape_numbers;
  /** Per string id: offset and length in the input. */
  std::vector<uint32_t> strings;
  /** The mapper's frames table: name and file string ids, line. */
  std::vector<int32_t> frame_name, frame_file;
  std::vector<double> frame_line;
  /** The mapper's stacks table: frame ids of stack k are stack_frames[stack_start[k], stack_start[k + 1]). */
  std::vector<uint32_t> stack_frames, stack_start{0};
  /** Stream values in the order of their first use (the mapper's streams table). */
  std::vector<double> streams;
  /** Tag string ids in the order of their first use. */
  std::vector<int32_t> tags;
  /** Unknown actions (string id, count), in the order first met. */
  std::vector<std::pair<int32_t, double>> unknown_actions;
  /** Events per device index (0: none), imported or not. */
  std::vector<double> event_counts;
  /** 'snapshot' markers added. */
  uint32_t markers = 0;
  double reallocations = 0, earliest = 0, missing_times = 0;
  /** Devices in the order the mapper created them (their first event). */
  std::vector<device_result> devices;
  finished_import finished;
};

/** The tape: an opcode, its arguments, values nested in preorder. */
enum tape_op : int32_t {
  tape_none = 0,
  tape_true = 1,
  tape_false = 2,
  tape_number = 3,  // the next of tape_numbers
  tape_string = 4,  // string id
  tape_long = 5,    // offset, length: LONG1 bytes beyond 2^53 (decodeLong reads them)
  tape_list = 6,    // item count, items
  tape_tuple = 7,   // item count, items
  tape_dict = 8,    // 2 x pair count, key, value...
  tape_ref = 9,     // k: the k-th container the tape built (in preorder), again
};

struct options {
  /** The unpickler's nesting limit (maxDepth); below 16 this decoder gives up. */
  int max_depth = 200;
  /** The device imported, or -1 where every device is (the mapper's 'all'), -2 the default (every device's events read, one imported). */
  int64_t device = -1;
  /** Whether to finish the import here where it can (finished_import). */
  bool finish = true;
};

enum class decode_result { decoded, gave_up };

decode_result decode(const uint8_t* bytes, std::size_t length, const options& opts, decoded& out) noexcept;

}  // namespace vramscope::snapshot_pickle
