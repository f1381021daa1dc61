// The benchmark's report (bench_report.cpp): the figures bench.cpp measured, printed one by one as
// they come, then tabulated in markdown, checked against the targets (docs/benchmarks.md) and
// written as JSON.
// Nothing here measures; nothing in bench.cpp formats. scripts/bench/all.ts and
// native/scripts/bench.sh read the JSON, so its fields and their order are an interface.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench.hpp"
#include "vramscope/types.hpp"

namespace vramscope::bench {

// Held blocks are as large as the request up to this; beyond it 1000 held blocks of the request's
// size (64 GiB at 64 MiB) would measure the device's capacity rather than the allocator.
constexpr std::size_t max_live_block_size = 1 * MiB;

// How the run was made, as the report states it.
struct run_description {
  std::string date;          // UTC, ISO 8601
  std::string command_line;  // argv joined by spaces
  timing_options timing;
  std::vector<std::size_t> sizes;  // request sizes, one table column each
  std::size_t live_blocks = 0;     // the second scenario's held blocks; 0: no such scenario
};

// The machine the figures were measured on (filled by bench.cpp; load_at_end just before the
// report).
struct machine {
  std::string cpu;
  unsigned cores = 0;
  std::string compiler;
  bool optimized = false;
  std::string load_at_start;
  std::string load_at_end;
  int pinned_cpu = -1;  // the CPU the measuring thread was kept on; -1: not pinned
  bool gpu = false;
  std::string gpu_reason;  // why there is none
#ifdef VRAMSCOPE_WITH_CUDA
  gpu_description gpu_info;
#endif
};

// A performance target against the worst measured cell of the rows it names.
struct target_check {
  std::string target;
  std::string measured;
  std::string met;  // "yes", "no" or "—"
};

// One line on stdout for a figure as soon as it is measured.
void print_figure(const figure& f);

// The targets, checked on each strategy's real backing where there is a GPU, else on the simulated
// one.
std::vector<target_check> check_targets(const std::vector<figure>& figures, bool gpu);

// The tables for docs/benchmarks.md: the warm pair per cell, in-kernel allocation, the targets.
std::string markdown_tables(const std::vector<figure>& figures, const run_description& run,
                            const machine& m, const std::vector<target_check>& checks);

// Every figure, the machine and the targets as JSON. Throws std::runtime_error when `path` cannot
// be written.
void write_json(const std::string& path, const std::vector<figure>& figures,
                const run_description& run, const machine& m,
                const std::vector<target_check>& checks);

// The strategy rows (subject @ backing, comma-separated) that have not a single measured figure:
// a broken strategy or benchmark configuration rather than a cell that may go unmeasured. Empty
// when every row has one.
std::string rows_without_figures(const std::vector<figure>& figures);

}  // namespace vramscope::bench
