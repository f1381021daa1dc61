// The benchmark's report (bench_report.hpp): a line per figure as it is measured, then the markdown
// tables with the targets checked, and the JSON. Only formatting and arithmetic on the
// figures bench.cpp measured.
#include "bench_report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "vramscope/errors.hpp"  // format_bytes
#include "vramscope/types.hpp"

namespace vramscope::bench {
namespace {

std::string format_ns(double ns) {
  char buf[48];
  if (ns < 100) std::snprintf(buf, sizeof buf, "%.1f ns", ns);
  else if (ns < 1e4) std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (ns < 1e7) std::snprintf(buf, sizeof buf, "%.1f µs", ns / 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
  return buf;
}

std::string format_ratio(double r) {
  char buf[32];
  if (r < 10) std::snprintf(buf, sizeof buf, "%.2f×", r);
  else std::snprintf(buf, sizeof buf, "%.0f×", r);
  return buf;
}

std::string scenario_name(const figure& f) {
  std::string s = format_bytes(f.size);
  if (f.live_blocks) s += " + " + std::to_string(f.live_blocks) + " live";
  return s;
}

}  // namespace

void print_figure(const figure& f) {
  if (f.kind == "device") {
    if (f.measured)
      std::printf("  %-38s %10s per allocation  p10 %s  p90 %s  (%s)\n", f.subject.c_str(),
                  format_ns(f.result.median_ns).c_str(), format_ns(f.result.p10_ns).c_str(),
                  format_ns(f.result.p90_ns).c_str(), f.note.c_str());
    else std::printf("  %-38s %s\n", f.subject.c_str(), f.note.c_str());
    std::fflush(stdout);
    return;
  }
  if (f.measured) {
    std::printf("  %-16s %-12s %-22s tracing %-3s %10s   p10 %s  p90 %s  %d reps x %llu\n",
                f.subject.c_str(), f.backing.c_str(), scenario_name(f).c_str(),
                f.tracing ? "on" : "off", format_ns(f.result.median_ns).c_str(),
                format_ns(f.result.p10_ns).c_str(), format_ns(f.result.p90_ns).c_str(),
                f.result.reps, static_cast<unsigned long long>(f.result.ops_per_rep));
  } else {
    std::printf("  %-16s %-12s %-22s tracing %-3s %s\n", f.subject.c_str(), f.backing.c_str(),
                scenario_name(f).c_str(), f.tracing ? "on" : "off", f.note.c_str());
  }
  std::fflush(stdout);
}

namespace {

struct cell_key {
  std::size_t size;
  std::size_t live;
  bool operator<(const cell_key& o) const { return size != o.size ? size < o.size : live < o.live; }
};

struct table_row {
  std::string subject, backing, kind;
  std::map<cell_key, const figure*> off, on;
};

std::vector<table_row> tabulate(const std::vector<figure>& figures) {
  std::vector<table_row> rows;
  for (const figure& f : figures) {
    if (f.kind == "device") continue;
    auto it = std::find_if(rows.begin(), rows.end(), [&](const table_row& r) {
      return r.subject == f.subject && r.backing == f.backing;
    });
    if (it == rows.end()) {
      rows.push_back({f.subject, f.backing, f.kind, {}, {}});
      it = rows.end() - 1;
    }
    (f.tracing ? it->on : it->off)[{f.size, f.live_blocks}] = &f;
  }
  // Peers first: the rows every strategy is read against.
  std::stable_partition(rows.begin(), rows.end(),
                        [](const table_row& r) { return r.kind == "peer"; });
  return rows;
}

const figure* lookup(const std::map<cell_key, const figure*>& m, const cell_key& k) {
  auto it = m.find(k);
  return it == m.end() || !it->second->measured ? nullptr : it->second;
}

// The targets (docs/benchmarks.md), each checked against every measured cell of the rows it names (the
// worst cell decides), on the real backing where there is a GPU.
std::vector<target_check> check_rows(const std::vector<table_row>& rows,
                                     const std::string& backing_of_record, bool gpu) {
  std::vector<target_check> checks;
  auto is_record = [&](const table_row& r) {
    return r.kind == "strategy" && r.backing == backing_of_record;
  };
  auto starts_with = [](const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; };

  struct latency_target {
    std::string prefix;
    double max_ns;
  };
  for (const latency_target& t :
       {latency_target{"caching", 60}, latency_target{"slab", 25}, latency_target{"block_pool", 25},
        latency_target{"arena", 15}, latency_target{"buddy", 120}}) {
    for (const table_row& r : rows) {
      if (!is_record(r) || !(r.subject == t.prefix || starts_with(r.subject, t.prefix + ".")))
        continue;
      const figure* worst = nullptr;
      for (auto& [k, f] : r.off)
        if (f->measured && (!worst || f->result.median_ns > worst->result.median_ns)) worst = f;
      char target[96];
      std::snprintf(target, sizeof target, "%s warm pair ≤ %.0f ns", r.subject.c_str(), t.max_ns);
      if (!worst) {
        checks.push_back({target, "not measured", "—"});
        continue;
      }
      checks.push_back(
          {target,
           "worst " + format_ns(worst->result.median_ns) + " (" + scenario_name(*worst) + ")",
           worst->result.median_ns <= t.max_ns ? "yes" : "no"});
    }
  }

  struct speedup_target {
    std::string peer;
    double min_ratio;
  };
  for (const speedup_target& t : {speedup_target{"cudaMallocAsync+cudaFreeAsync", 10},
                                  speedup_target{"cudaMalloc+cudaFree", 1000}}) {
    const table_row* peer = nullptr;
    for (const table_row& r : rows)
      if (r.subject == t.peer) peer = &r;
    for (const table_row& r : rows) {
      if (!is_record(r) || !starts_with(r.subject, "caching")) continue;
      char target[128];
      std::snprintf(target, sizeof target, "%s ≥ %.0f× faster than %s", r.subject.c_str(),
                    t.min_ratio, t.peer.c_str());
      if (!gpu || !peer) {
        checks.push_back(
            {target, std::string("not measured: ") + (gpu ? "peer missing" : "no GPU"), "—"});
        continue;
      }
      double worst = 0;
      const figure* at = nullptr;
      for (auto& [k, f] : r.off) {
        const figure* p = lookup(peer->off, k);
        if (!f->measured || !p) continue;
        const double ratio = p->result.median_ns / f->result.median_ns;
        if (!at || ratio < worst) worst = ratio, at = f;
      }
      if (!at) {
        checks.push_back({target, "no cell measured for both", "—"});
        continue;
      }
      checks.push_back({target, "lowest " + format_ratio(worst) + " (" + scenario_name(*at) + ")",
                        worst >= t.min_ratio ? "yes" : "no"});
    }
  }

  double worst_ratio = 0;
  std::string where;
  for (const table_row& r : rows) {
    if (!is_record(r)) continue;
    for (auto& [k, on] : r.on) {
      const figure* off = lookup(r.off, k);
      if (!on->measured || !off) continue;
      const double ratio = on->result.median_ns / off->result.median_ns;
      if (ratio > worst_ratio) worst_ratio = ratio, where = r.subject + ", " + scenario_name(*on);
    }
  }
  if (where.empty()) checks.push_back({"tracing on ≤ 1.3× tracing off", "not measured", "—"});
  else
    checks.push_back({"tracing on ≤ 1.3× tracing off (every strategy and cell)",
                      "worst " + format_ratio(worst_ratio) + " (" + where + ")",
                      worst_ratio <= 1.3 ? "yes" : "no"});
  return checks;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string q(const std::string& s) { return "\"" + json_escape(s) + "\""; }

}  // namespace

std::vector<target_check> check_targets(const std::vector<figure>& figures, bool gpu) {
  std::vector<table_row> rows = tabulate(figures);
  if (!gpu) return check_rows(rows, "simulated", false);
  // On a GPU each strategy's real backing is the one of record (the row whose backing is not
  // simulated).
  std::vector<table_row> real;
  for (auto& r : rows)
    if (r.backing != "simulated") {
      real.push_back(r);
      if (r.kind == "strategy") real.back().backing = "real";
    }
  return check_rows(real, "real", true);
}

std::string rows_without_figures(const std::vector<figure>& figures) {
  std::string broken;
  for (const table_row& r : tabulate(figures)) {
    bool any = false;
    for (auto& [k, f] : r.off) any = any || f->measured;
    if (r.kind == "strategy" && !any)
      broken += (broken.empty() ? "" : ", ") + r.subject + " @ " + r.backing;
  }
  return broken;
}

std::string markdown_tables(const std::vector<figure>& figures, const run_description& run,
                            const machine& m, const std::vector<target_check>& checks) {
  std::ostringstream md;
  const std::vector<table_row> rows = tabulate(figures);
  std::vector<cell_key> cells;
  for (std::size_t s : run.sizes) cells.push_back({s, 0});
  if (run.live_blocks)
    for (std::size_t s : run.sizes) cells.push_back({s, run.live_blocks});

  md << "Machine: " << m.cpu << ", " << m.cores << " cores (load average " << m.load_at_start
     << " at the start, " << m.load_at_end << " at the end)";
#ifdef VRAMSCOPE_WITH_CUDA
  if (m.gpu)
    md << "; GPU " << m.gpu_info.name << " (sm_" << m.gpu_info.compute_capability << ", "
       << format_bytes(m.gpu_info.total_memory) << "), driver " << m.gpu_info.driver_version
       << ", runtime " << m.gpu_info.runtime_version;
#endif
  if (!m.gpu) md << "; no GPU (" << m.gpu_reason << ")";
  md << "  \nDate: " << run.date << "  \nCommand: `" << run.command_line << "`  \n"
     << "Each figure: median of " << run.timing.reps
     << " repetitions of N warm pairs, N chosen so a "
     << "repetition lasts ≥ " << run.timing.min_rep_ms << " ms (p10/p90 in the JSON), timed in "
     << (run.timing.cpu_clock ? "this thread's CPU time (--clock cpu: the machine was shared; the "
                                "driver peers and kernels, if any, in wall time)"
                              : "wall time")
     << ". Held blocks: "
     << "the request's size up to " << format_bytes(max_live_block_size) << ", "
     << format_bytes(max_live_block_size) << " beyond. Parameters: defaults, except where a "
     << "default cannot serve the cell: pool_size / capacity raised to a power of two ≥ twice what "
     << "the cell holds, block_pool's block_size = the request with (live + 2) blocks, slab's "
     << "classes extended to the request (each cell's values are in the JSON note).\n\n";
  if (!m.optimized)
    md << "**Warning: built without NDEBUG (assertions on); not representative.**\n\n";

  md << "### Warm alloc+free pair, tracing off\n\n| allocator | backing |";
  for (auto& c : cells)
    md << " " << format_bytes(c.size) << (c.live ? " · " + std::to_string(c.live) + " live" : "")
       << " |";
  md << " tracing on ÷ off (worst) |\n|---|---|";
  for (std::size_t i = 0; i < cells.size(); ++i) md << "---:|";
  md << "---:|\n";
  for (const table_row& r : rows) {
    md << "| " << r.subject << " | " << r.backing << " |";
    for (auto& c : cells) {
      const figure* f = lookup(r.off, c);
      md << " " << (f ? format_ns(f->result.median_ns) : std::string("—")) << " |";
    }
    double worst = 0;
    for (auto& [k, on] : r.on) {
      const figure* off = lookup(r.off, k);
      if (on->measured && off)
        worst = std::max(worst, on->result.median_ns / off->result.median_ns);
    }
    md << " " << (worst > 0 ? format_ratio(worst) : std::string("—")) << " |\n";
  }
  std::vector<std::string> notes;
  for (const figure& f : figures)
    if (f.kind != "device" && !f.measured && !f.tracing)
      notes.push_back(f.subject + " @ " + f.backing + ", " + scenario_name(f) + ": " + f.note);
  if (!notes.empty()) {
    md << "\n—: ";
    for (std::size_t i = 0; i < notes.size(); ++i) md << (i ? "; " : "") << notes[i];
    md << "\n";
  }
  for (const table_row& r : rows)
    if (r.kind == "peer")
      for (auto& [k, f] : r.off) {
        md << "\n" << r.subject << ": " << f->note << "\n";
        break;
      }

  bool any_device = false;
  for (const figure& f : figures) any_device = any_device || f.kind == "device";
  if (any_device) {
    md << "\n### In-kernel allocation\n\n| allocator | workload | per allocation | allocations/s "
          "|\n"
       << "|---|---|---:|---:|\n";
    for (const figure& f : figures) {
      if (f.kind != "device") continue;
      if (!f.measured) {
        md << "| " << f.subject << " | " << f.note << " | — | — |\n";
        continue;
      }
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.3g", 1e9 / f.result.median_ns);
      md << "| " << f.subject << " | " << f.note << " | " << format_ns(f.result.median_ns) << " | "
         << rate << " |\n";
    }
  }

  md << "\n### Targets (docs/benchmarks.md#targets)\n\n";
  if (!m.gpu)
    md << "Checked on the simulated backing of a machine without a GPU: the targets are for an "
          "H100; these rows show the code paths, not the GPU figures.\n\n";
  md << "| target | measured | met |\n|---|---|---|\n";
  for (auto& c : checks) md << "| " << c.target << " | " << c.measured << " | " << c.met << " |\n";
  return md.str();
}

void write_json(const std::string& path, const std::vector<figure>& figures,
                const run_description& run, const machine& m,
                const std::vector<target_check>& checks) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out.precision(6);
  out << "{\n  \"tool\": \"vramscope_bench\",\n  \"date\": " << q(run.date)
      << ",\n  \"command\": " << q(run.command_line) << ",\n  \"reps\": " << run.timing.reps
      << ",\n  \"min_rep_ms\": " << run.timing.min_rep_ms
      << ",\n  \"clock\": " << q(run.timing.cpu_clock ? "thread_cpu" : "wall")
      << ",\n  \"quick\": " << (run.timing.quick ? "true" : "false")
      << ",\n  \"machine\": {\n    \"cpu\": " << q(m.cpu) << ",\n    \"cores\": " << m.cores
      << ",\n    \"load_average_start\": " << q(m.load_at_start)
      << ",\n    \"load_average_end\": " << q(m.load_at_end)
      << ",\n    \"compiler\": " << q(m.compiler)
      << ",\n    \"optimized\": " << (m.optimized ? "true" : "false") << ",\n    \"pinned_cpu\": "
      << (m.pinned_cpu >= 0 ? std::to_string(m.pinned_cpu) : std::string("null"))
      << ",\n    \"gpu\": ";
#ifdef VRAMSCOPE_WITH_CUDA
  if (m.gpu) {
    out << "{\"name\": " << q(m.gpu_info.name)
        << ", \"compute_capability\": " << q(m.gpu_info.compute_capability)
        << ", \"driver_version\": " << q(m.gpu_info.driver_version)
        << ", \"runtime_version\": " << q(m.gpu_info.runtime_version)
        << ", \"total_memory\": " << m.gpu_info.total_memory << "}";
  }
#endif
  if (!m.gpu) out << "null,\n    \"no_gpu_reason\": " << q(m.gpu_reason);
  out << "\n  },\n  \"figures\": [";
  for (std::size_t i = 0; i < figures.size(); ++i) {
    const figure& f = figures[i];
    out << (i ? "," : "") << "\n    {\"subject\": " << q(f.subject) << ", \"kind\": " << q(f.kind)
        << ", \"backing\": " << q(f.backing) << ", \"unit\": " << q(f.unit)
        << ", \"size\": " << f.size << ", \"live_blocks\": " << f.live_blocks
        << ", \"live_block_size\": " << f.live_block_size
        << ", \"tracing\": " << (f.tracing ? "true" : "false")
        << ", \"measured\": " << (f.measured ? "true" : "false");
    if (f.measured)
      out << ", \"median_ns\": " << f.result.median_ns << ", \"p10_ns\": " << f.result.p10_ns
          << ", \"p90_ns\": " << f.result.p90_ns << ", \"reps\": " << f.result.reps
          << ", \"ops_per_rep\": " << f.result.ops_per_rep;
    out << ", \"note\": " << q(f.note) << "}";
  }
  out << "\n  ],\n  \"targets\": [";
  for (std::size_t i = 0; i < checks.size(); ++i)
    out << (i ? "," : "") << "\n    {\"target\": " << q(checks[i].target)
        << ", \"measured\": " << q(checks[i].measured) << ", \"met\": " << q(checks[i].met) << "}";
  out << "\n  ]\n}\n";
}

}  // namespace vramscope::bench
