// The native snapshot decoder (core/snapshot_pickle.cpp) on its own: it takes torch's recordings
// with the mapper's counts and finishes their imports, and gives up, never crashes, on what it must
// leave to the JavaScript paths: other pickles, hostile ones, every truncation of a snapshot, a
// small maxDepth, strings that are not UTF-8, frames whose names hold NUL. The import itself is
// compared with the JavaScript paths' in test/unit/pytorch-fast-path.test.ts; here the ASan/UBSan
// runs see it too.
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "check.hpp"
#include "vramscope/snapshot_pickle.hpp"

using namespace vramscope::snapshot_pickle;

namespace {

const std::string fixtures = VRAMSCOPE_FIXTURES_DIR "/";

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

decode_result run(const std::vector<uint8_t>& bytes, decoded& out, options opts = {}) {
  return decode(bytes.data(), bytes.size(), opts, out);
}

/** A snapshot of `n` allocs written opcode by opcode; `name` is the first frame's name. */
std::vector<uint8_t> tiny_snapshot(const std::string& name) {
  std::vector<uint8_t> out = {0x80, 4, 0x7d, 0x28};
  auto text = [&](const std::string& s) {
    out.push_back(0x8c);
    out.push_back(uint8_t(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  };
  text("device_traces");
  out.insert(out.end(), {0x5d, 0x5d, 0x28, 0x7d, 0x28});
  text("action");
  text("alloc");
  text("addr");
  out.insert(out.end(), {0x4a, 0, 2, 0, 0});
  text("size");
  out.insert(out.end(), {0x4b, 100});
  text("frames");
  out.insert(out.end(), {0x5d, 0x28, 0x7d, 0x28});
  text("name");
  text(name);
  text("filename");
  text("a.py");
  text("line");
  out.insert(out.end(), {0x4b, 7, 0x75, 0x65, 0x75, 0x65, 0x61, 0x75, 0x2e});
  return out;
}

}  // namespace

/** The decoder's columns left for the JavaScript mapper to finish. */
options unfinished() {
  options o;
  o.finish = false;
  return o;
}

TEST("takes torch's recordings: one device, its events and layout, frames and stacks") {
  for (const char* name : {"convnet_varimg", "inference_mixed", "mlp_varbatch", "transformer_varseq"}) {
    auto bytes = slurp(fixtures + "pytorch/" + name + ".pickle");
    decoded out;
    CHECK(run(bytes, out, unfinished()) == decode_result::decoded);
    CHECK(!out.finished.done);
    CHECK_EQ(out.devices.size(), std::size_t(1));
    if (out.devices.empty()) continue;
    const device_result& d = out.devices[0];
    CHECK(d.events.rows() > 1000);
    CHECK(d.layout.rows() > 1000);
    CHECK(out.frame_name.size() > 0);
    CHECK_EQ(out.stack_start.size() - 1 > 0, true);
    CHECK_EQ(out.streams.size(), std::size_t(1));
    // Every alloc has a free or is live at the end: ids are dense from 0.
    CHECK_EQ(d.requested_by_id.size(), std::size_t(d.next_id));
    CHECK(out.tape.size() > 2 && out.tape[0] == tape_dict);
  }
}

TEST("finishes torch's recordings: the device's events (stand-ins, events, annotation markers) merged, times in ns") {
  for (const char* name : {"convnet_varimg", "inference_mixed", "mlp_varbatch", "transformer_varseq", "mlp_varbatch_overflowed"}) {
    auto bytes = slurp(fixtures + "pytorch/" + name + ".pickle");
    decoded columns, out;
    CHECK(run(bytes, columns, unfinished()) == decode_result::decoded);
    options by_default;
    by_default.device = -2;
    CHECK(run(bytes, out, by_default) == decode_result::decoded);
    const finished_import& f = out.finished;
    CHECK(f.done);
    if (!f.done || columns.devices.empty()) continue;
    CHECK(out.devices.empty());
    CHECK_EQ(f.selected.size(), std::size_t(1));
    CHECK_EQ(f.present.size(), std::size_t(1));
    CHECK_EQ(f.layouts.size(), std::size_t(1));
    CHECK_EQ(f.overflow.size(), std::size_t(4));
    const device_result& d = columns.devices[0];
    // Every event the decoder mapped is there once, and one marker per annotation; stand-ins only
    // grow (blocks live at the snapshot that the trace never saw allocated).
    std::size_t markers = f.annotation_markers.size() / 2;
    CHECK(f.events.rows() >= d.events.rows() + d.synth_events.rows() + markers);
    CHECK_EQ(f.event_device.size(), f.events.rows());
    std::size_t marker_rows = 0, alloc_rows = 0;
    for (std::size_t i = 0; i < f.events.rows(); i++) {
      marker_rows += f.events.kind[i] == 2;
      alloc_rows += f.events.kind[i] == 0;
      CHECK(f.events.time[i] >= 0);
    }
    CHECK_EQ(marker_rows, markers);
    CHECK(alloc_rows > 100);
    // The earliest time, of a request or a layout event (segments come first), is the trace's start.
    double earliest = INFINITY;
    for (double t : f.events.time) earliest = std::min(earliest, t);
    for (double t : f.layouts[0].time) earliest = std::min(earliest, t);
    CHECK_EQ(earliest, 0.0);
    CHECK(f.layouts[0].rows() >= d.layout.rows() + d.synth_layout.rows());
    // Finished, the tape holds allocator_settings' value alone: torch writes a dict.
    CHECK(!out.tape.empty() && out.tape[0] == tape_dict);
  }
}

TEST("gives up on every pickle that is not a snapshot and on every hostile one") {
  for (const char* dir : {"pickle", "hostile"}) {
    for (const std::string& name : files_in(fixtures + dir)) {
      if (name.find(".json") != std::string::npos) continue;
      auto bytes = slurp(fixtures + dir + "/" + name);
      decoded out;
      CHECK(run(bytes, out) == decode_result::gave_up);
      CHECK(out.devices.empty());
    }
  }
}

TEST("gives up on every truncation of a snapshot, and on a maxDepth below 16") {
  auto bytes = slurp(fixtures + "pytorch/synthetic.pickle");
  decoded out;
  CHECK(run(bytes, out) == decode_result::decoded);
  for (std::size_t n = 0; n < bytes.size(); n++) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(n));
    CHECK(run(cut, out) == decode_result::gave_up);
  }
  options shallow;
  shallow.max_depth = 15;
  CHECK(run(bytes, out, shallow) == decode_result::gave_up);
  shallow.max_depth = 16;
  CHECK(run(bytes, out, shallow) == decode_result::decoded);
}

TEST("a frame's strings: UTF-8 taken, bytes that are not UTF-8 or a NUL given up on") {
  decoded out;
  CHECK(run(tiny_snapshot("f\xc3\xa9"), out, unfinished()) == decode_result::decoded);
  CHECK_EQ(out.frame_name.size(), std::size_t(1));
  CHECK_EQ(out.devices.size(), std::size_t(1));
  if (!out.devices.empty()) CHECK_EQ(out.devices[0].events.stack[0], 0);
  for (const std::string& bad : {std::string("f\xc3"), std::string("\xed\xa0\x80"), std::string("\xef\xbb\xbf" "f"), std::string("f\0g", 3)})
    CHECK(run(tiny_snapshot(bad), out) == decode_result::gave_up);
}

TEST("device option: events of another device are counted, not imported") {
  auto bytes = tiny_snapshot("f");
  decoded out;
  options other;
  other.device = 3;
  CHECK(run(bytes, out, other) == decode_result::decoded);
  CHECK(out.devices.empty());
  CHECK_EQ(out.event_counts.size(), std::size_t(1));
  if (!out.event_counts.empty()) CHECK_EQ(out.event_counts[0], 1.0);
  CHECK(out.frame_name.empty());
}
CHECK_MAIN
