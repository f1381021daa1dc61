// The registry of strategies: each strategy file registers its name, parameters and factory.
#include <algorithm>

#include "vramscope/allocator.hpp"

namespace vramscope {

namespace {
struct entry {
  strategy_info info;
  strategy_factory factory;
};
std::vector<entry>& entries() {
  static std::vector<entry> e;
  return e;
}
std::vector<strategy_info>& infos() {
  static std::vector<strategy_info> i;
  return i;
}
// A fixed order, so the CLI, the UI and replay output list strategies the same way every time.
// Names not (yet) registered are skipped.
const std::vector<std::string> display_order = {
    "cuda_malloc", "async_pool",   "block_pool", "slab",       "buddy",
    "arena",       "vmm_growable", "caching",    "stitching",  "rmm_pool",
    "rmm_arena",   "rmm_binning",  "planned",    "device_bump"};
std::size_t rank(const std::string& name) {
  auto it = std::find(display_order.begin(), display_order.end(), name);
  return static_cast<std::size_t>(it - display_order.begin());
}
}  // namespace

strategy_registration::strategy_registration(strategy_info info, strategy_factory factory) {
  auto& e = entries();
  e.push_back({std::move(info), factory});
  std::stable_sort(e.begin(), e.end(), [](const entry& a, const entry& b) {
    return rank(a.info.name) < rank(b.info.name);
  });
  infos().clear();
  for (auto& x : e) infos().push_back(x.info);
}

const std::vector<strategy_info>& strategies() { return infos(); }

const strategy_info& find_strategy(const std::string& name) {
  for (auto& e : entries())
    if (e.info.name == name) return e.info;
  std::string known;
  for (auto& e : entries()) known += (known.empty() ? "" : ", ") + e.info.name;
  throw invalid_argument("unknown strategy '" + name + "' (known: " + known + ")");
}

std::unique_ptr<allocator> make_allocator(const std::string& name, backing& b, const params& p) {
  const strategy_info& info = find_strategy(name);
  for (auto& entry : p.values()) {
    // Not a structured binding: a lambda may capture one only from C++20 (clang 14 refuses it).
    const std::string& key = entry.first;
    bool known = std::any_of(info.params.begin(), info.params.end(),
                             [&](const param_info& pi) { return pi.name == key; });
    if (!known) {
      std::string list;
      for (auto& pi : info.params) list += (list.empty() ? "" : ", ") + pi.name;
      throw invalid_argument(
          "strategy '" + name + "' has no parameter '" + key + "'" +
          (list.empty() ? std::string(" (it takes none)") : " (it takes: " + list + ")"));
    }
  }
  if (info.needs_vmm && !b.has_vmm())
    throw unsupported("strategy '" + name + "' needs virtual memory (VMM), which backing '" +
                      b.name() + "' lacks (use simulated or cuda_vmm)");
  if (info.needs_async && !b.has_async())
    throw unsupported("strategy '" + name + "' needs a stream-ordered pool, which backing '" +
                      b.name() + "' lacks (use simulated or cuda_async)");
  for (auto& e : entries())
    if (e.info.name == name) return e.factory(b, p);
  throw invalid_argument("unknown strategy '" + name + "'");
}

}  // namespace vramscope
