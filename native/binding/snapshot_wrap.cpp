// decodeSnapshot: arguments in, snapshot_pickle::decode, its columns out as typed arrays. Each
// device's columns go in one ArrayBuffer (an ArrayBuffer costs about a microsecond to create),
// laid out as the importer's eventChunk and layoutChunk lay out theirs, so the JavaScript side
// only takes views of it; `header` says where each part starts.
#include "snapshot_wrap.hpp"

#include <cstring>
#include <type_traits>

#include "columns.hpp"
#include "vramscope/snapshot_pickle.hpp"

namespace vramscope::binding {

namespace {

namespace sp = vramscope::snapshot_pickle;

/** Bytes up to the next multiple of 8 (Float64Array views must be aligned). */
std::size_t aligned(std::size_t n) { return (n + 7) & ~std::size_t(7); }

template <class T>
void put(uint8_t* base, std::size_t at, const std::vector<T>& values) {
  if (!values.empty()) std::memcpy(base + at, values.data(), values.size() * sizeof(T));
}

// Event columns of n rows from `at`: size f64, time f64, id u32, stream u32, stack i32, tag i32,
// device u16, kind u8 (35 bytes a row), as eventChunk in pytorch.ts.
std::size_t event_bytes(std::size_t n) { return aligned(35 * n); }
void put_events(uint8_t* base, std::size_t at, const sp::event_columns& e, uint32_t device) {
  std::size_t n = e.rows();
  put(base, at, e.size);
  put(base, at + 8 * n, e.time);
  put(base, at + 16 * n, e.id);
  put(base, at + 20 * n, e.stream);
  put(base, at + 24 * n, e.stack);
  put(base, at + 28 * n, e.tag);
  auto* devices = reinterpret_cast<uint16_t*>(base + at + 32 * n);
  for (std::size_t i = 0; i < n; i++) devices[i] = uint16_t(device);
  put(base, at + 34 * n, e.kind);
}

// Layout columns of n rows from `at`: address, size, requested, stream, time (f64), aux u32, op u8
// (45 bytes a row), as layoutChunk in pytorch.ts.
std::size_t layout_bytes(std::size_t n) { return aligned(45 * n); }
void put_layout(uint8_t* base, std::size_t at, const sp::layout_columns& l) {
  std::size_t n = l.rows();
  put(base, at, l.address);
  put(base, at + 8 * n, l.size);
  put(base, at + 16 * n, l.requested);
  put(base, at + 24 * n, l.stream);
  put(base, at + 32 * n, l.time);
  put(base, at + 40 * n, l.aux);
  put(base, at + 44 * n, l.op);
}

std::vector<double> flat(const sp::address_map& map) {
  std::vector<double> out;
  for (auto& [k, v] : map.entries()) out.push_back(k), out.push_back(v);
  return out;
}

// header: device, nextId, held, heldAddress, heldSize, heldStream, heldTime, orphanEvents,
// synthesizedAllocs, synthesizedBlocks, synthesizedSegments, nextIndex, then (byte offset, count)
// of: events, synthEvents, layout, synthLayout, requestedById, roundedById, live (pairs),
// pending (pairs), segments (pairs), reserveRow (pairs), mapped. native/index.d.ts names them.
Napi::Object device_object(Napi::Env env, const sp::device_result& s) {
  std::vector<double> live = flat(s.live), pending = flat(s.pending), segments = flat(s.segments), rows = flat(s.reserve_row);
  std::vector<double> header = {double(s.device), double(s.next_id), double(s.held), s.held_address, s.held_size,
                                s.held_stream, s.held_time, s.orphan_events, s.synthesized_allocs,
                                s.synthesized_blocks, s.synthesized_segments, s.next_index};
  std::size_t at = 0;
  auto section = [&](std::size_t bytes, std::size_t count) {
    header.push_back(double(at));
    header.push_back(double(count));
    std::size_t start = at;
    at += aligned(bytes);
    return start;
  };
  std::size_t events = section(event_bytes(s.events.rows()), s.events.rows());
  std::size_t synth_events = section(event_bytes(s.synth_events.rows()), s.synth_events.rows());
  std::size_t layout = section(layout_bytes(s.layout.rows()), s.layout.rows());
  std::size_t synth_layout = section(layout_bytes(s.synth_layout.rows()), s.synth_layout.rows());
  // Room for the mapper's growth by doubling: never an array of length 0.
  std::size_t ids = std::max<std::size_t>(s.requested_by_id.size(), 1);
  std::size_t requested = section(8 * ids, ids);
  std::size_t rounded = section(8 * ids, ids);
  std::size_t live_at = section(8 * live.size(), live.size() / 2);
  std::size_t pending_at = section(8 * pending.size(), pending.size() / 2);
  std::size_t segments_at = section(8 * segments.size(), segments.size() / 2);
  std::size_t rows_at = section(8 * rows.size(), rows.size() / 2);
  std::size_t mapped = section(8 * s.mapped.size(), s.mapped.size());
  auto buffer = Napi::ArrayBuffer::New(env, std::max<std::size_t>(at, 8));
  auto* base = static_cast<uint8_t*>(buffer.Data());
  put_events(base, events, s.events, s.device);
  put_events(base, synth_events, s.synth_events, s.device);
  put_layout(base, layout, s.layout);
  put_layout(base, synth_layout, s.synth_layout);
  put(base, requested, s.requested_by_id);
  put(base, rounded, s.rounded_by_id);
  put(base, live_at, live);
  put(base, pending_at, pending);
  put(base, segments_at, segments);
  put(base, rows_at, rows);
  put(base, mapped, s.mapped);
  Napi::Object o = Napi::Object::New(env);
  o.Set("header", typed_array(env, header));
  o.Set("buffer", buffer);
  return o;
}

// The finished import (snapshot_pickle::finished_import) in one ArrayBuffer: the request events as
// allocateEvents' columns (laid out as put_events), then each selected device's layout as
// LayoutTrace's (address u64, size, requested, stream, time f64, aux u32, op u8: 45 bytes a row).
// header: events' byte offset and rows, counts of present devices, selected devices and annotation
// marker ids, those values, then per selected device its layout's byte offset and rows and its
// overflow counts (orphanEvents, synthesizedAllocs, synthesizedBlocks, synthesizedSegments).
Napi::Object finished_object(Napi::Env env, const sp::finished_import& f) {
  std::size_t rows = f.events.rows();
  std::vector<double> header = {0, double(rows), double(f.present.size()), double(f.selected.size()), double(f.annotation_markers.size())};
  header.insert(header.end(), f.present.begin(), f.present.end());
  header.insert(header.end(), f.selected.begin(), f.selected.end());
  header.insert(header.end(), f.annotation_markers.begin(), f.annotation_markers.end());
  std::size_t at = event_bytes(rows);
  std::vector<std::size_t> layout_at;
  for (std::size_t k = 0; k < f.layouts.size(); k++) {
    std::size_t n = f.layouts[k].rows();
    layout_at.push_back(at);
    header.insert(header.end(), {double(at), double(n)});
    header.insert(header.end(), f.overflow.begin() + std::ptrdiff_t(4 * k), f.overflow.begin() + std::ptrdiff_t(4 * k + 4));
    at += layout_bytes(n);
  }
  auto buffer = Napi::ArrayBuffer::New(env, std::max<std::size_t>(at, 8));
  auto* base = static_cast<uint8_t*>(buffer.Data());
  const sp::event_columns& e = f.events;
  put(base, 0, e.size);
  put(base, 8 * rows, e.time);
  put(base, 16 * rows, e.id);
  put(base, 20 * rows, e.stream);
  put(base, 24 * rows, e.stack);
  put(base, 28 * rows, e.tag);
  put(base, 32 * rows, f.event_device);
  put(base, 34 * rows, e.kind);
  for (std::size_t k = 0; k < f.layouts.size(); k++) {
    const sp::layout_columns& l = f.layouts[k];
    std::size_t n = l.rows(), from = layout_at[k];
    // Addresses are integers below 2^53 (the decoder checks): exact as 64-bit words.
    auto* words = reinterpret_cast<uint64_t*>(base + from);
    for (std::size_t i = 0; i < n; i++) words[i] = uint64_t(l.address[i]);
    put(base, from + 8 * n, l.size);
    put(base, from + 16 * n, l.requested);
    put(base, from + 24 * n, l.stream);
    put(base, from + 32 * n, l.time);
    put(base, from + 40 * n, l.aux);
    put(base, from + 44 * n, l.op);
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("header", typed_array(env, header));
  o.Set("buffer", buffer);
  return o;
}

}  // namespace

Napi::Value decode_snapshot_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  // Checked in TypeScript (src-main/services/import/pytorch.ts); these only keep C++ safe.
  if (info.Length() < 3 || !info[0].IsTypedArray() || !info[1].IsNumber() || !info[2].IsNumber())
    throw Napi::TypeError::New(env, "decodeSnapshot(bytes: Uint8Array, maxDepth: number, device: number)");
  auto bytes = info[0].As<Napi::Uint8Array>();
  sp::options opts;
  double depth = info[1].As<Napi::Number>().DoubleValue();
  opts.max_depth = depth >= 1 << 20 ? 1 << 20 : depth >= 0 ? int(depth) : 0;
  double device = info[2].As<Napi::Number>().DoubleValue();
  opts.device = device >= 0 && device < 65536 ? int64_t(device) : device == -2 ? -2 : -1;
  opts.finish = !(info.Length() > 3 && info[3].IsBoolean() && !info[3].As<Napi::Boolean>().Value());
  sp::decoded out;
  if (sp::decode(bytes.Data(), bytes.ByteLength(), opts, out) != sp::decode_result::decoded) return env.Null();

  // The tables in one ArrayBuffer too, each a view of it.
  std::vector<double> unknown;
  for (auto& [id, count] : out.unknown_actions) unknown.push_back(id), unknown.push_back(count);
  std::size_t at = 0;
  auto place = [&](std::size_t bytes) {
    std::size_t start = at;
    at += aligned(bytes);
    return start;
  };
  std::size_t tape = place(4 * out.tape.size()), tape_numbers = place(8 * out.tape_numbers.size()),
              strings = place(4 * out.strings.size()), frame_name = place(4 * out.frame_name.size()),
              frame_file = place(4 * out.frame_file.size()), frame_line = place(8 * out.frame_line.size()),
              stack_frames = place(4 * out.stack_frames.size()), stack_start = place(4 * out.stack_start.size()),
              streams = place(8 * out.streams.size()), tags = place(4 * out.tags.size()),
              unknown_at = place(8 * unknown.size()), counts = place(8 * out.event_counts.size());
  auto tables = Napi::ArrayBuffer::New(env, std::max<std::size_t>(at, 8));
  auto* base = static_cast<uint8_t*>(tables.Data());
  Napi::Object r = Napi::Object::New(env);
  auto view = [&](const char* name, auto& values, std::size_t offset) {
    using T = typename std::decay_t<decltype(values)>::value_type;
    put(base, offset, values);
    r.Set(name, Napi::TypedArrayOf<T>::New(env, values.size(), tables, offset));
  };
  r.Set("protocol", double(out.protocol));
  view("tape", out.tape, tape);
  view("tapeNumbers", out.tape_numbers, tape_numbers);
  view("strings", out.strings, strings);
  view("frameName", out.frame_name, frame_name);
  view("frameFile", out.frame_file, frame_file);
  view("frameLine", out.frame_line, frame_line);
  view("stackFrames", out.stack_frames, stack_frames);
  view("stackStart", out.stack_start, stack_start);
  view("streams", out.streams, streams);
  view("tags", out.tags, tags);
  view("unknownActions", unknown, unknown_at);
  view("eventCounts", out.event_counts, counts);
  r.Set("markers", double(out.markers));
  r.Set("reallocations", out.reallocations);
  r.Set("earliest", out.earliest);
  r.Set("missingTimes", out.missing_times);
  Napi::Array devices = Napi::Array::New(env, out.devices.size());
  for (std::size_t i = 0; i < out.devices.size(); i++) devices.Set(uint32_t(i), device_object(env, out.devices[i]));
  r.Set("devices", devices);
  if (out.finished.done) r.Set("finished", finished_object(env, out.finished));
  return r;
}

}  // namespace vramscope::binding
