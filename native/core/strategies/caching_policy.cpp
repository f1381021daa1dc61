// Reading the caching strategy's preset and parameters, with PyTorch's own limits on its settings
// (PYTORCH_CUDA_ALLOC_CONF, parsed in c10/core/AllocatorConfig.cpp).
#include "caching_policy.hpp"

#include <cctype>
#include <cstdlib>

#include "vramscope/errors.hpp"

namespace vramscope::caching_detail {

namespace {

const char* const pow2_only[] = {"segment_size"};
const char* const pytorch_only[] = {"max_split_size", "max_non_split_rounding_size",
                                    "roundup_power2_divisions", "garbage_collection_threshold",
                                    "expandable_segments"};

std::uint64_t parse_whole(const std::string& text, const std::string& what) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0')
    throw invalid_argument("parameter 'roundup_power2_divisions': '" + text + "' is not a whole " +
                           what);
  return v;
}

void check_division(std::uint64_t d, const std::string& text) {
  if (d != 0 && !is_power_of_two(d))
    throw invalid_argument(
        "parameter 'roundup_power2_divisions': divisions must be a power of two or 0, got '" +
        text + "'");
}

// "4" applies 4 divisions to every size. "256:1,512:2,>:8" (brackets optional) sets intervals
// named by their lower bound in MiB, as PyTorch's list form: the first entry also covers every
// smaller size, '>' every interval above the last one named.
std::array<std::uint64_t, roundup_intervals> parse_divisions(std::string text) {
  std::array<std::uint64_t, roundup_intervals> out{};
  std::string cleaned;
  for (char c : text)
    if (c != ' ' && c != '[' && c != ']') cleaned += c;
  if (cleaned.empty()) throw invalid_argument("parameter 'roundup_power2_divisions': empty value");
  if (cleaned.find(':') == std::string::npos) {
    std::uint64_t d = parse_whole(cleaned, "number of divisions");
    check_division(d, cleaned);
    out.fill(d);
    return out;
  }
  bool first = true;
  std::size_t last_index = 0;
  std::size_t start = 0;
  while (start <= cleaned.size()) {
    std::size_t comma = cleaned.find(',', start);
    std::string item =
        cleaned.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? cleaned.size() + 1 : comma + 1;
    if (item.empty()) continue;
    std::size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw invalid_argument("parameter 'roundup_power2_divisions': '" + item +
                             "' is not interval:divisions (e.g. 256:4 or >:8)");
    std::string interval = item.substr(0, colon);
    std::uint64_t d = parse_whole(item.substr(colon + 1), "number of divisions");
    check_division(d, item);
    if (interval == ">") {
      // PyTorch's own test (AllocatorConfig_test) expects '>' to leave the last named interval
      // alone, so it fills from the interval after it.
      for (std::size_t i = first ? 0 : last_index + 1; i < roundup_intervals; ++i) out[i] = d;
      continue;
    }
    std::uint64_t mib = parse_whole(interval, "interval in MiB");
    if (!is_power_of_two(mib))
      throw invalid_argument("parameter 'roundup_power2_divisions': interval '" + interval +
                             "' must be a power of two (MiB)");
    std::size_t index = log2_floor(mib);
    if (index > roundup_intervals - 1) index = roundup_intervals - 1;
    if (first)
      for (std::size_t i = 0; i < index; ++i) out[i] = d;
    first = false;
    out[index] = d;
    last_index = index;
  }
  return out;
}

}  // namespace

policy parse_policy(const params& p) {
  policy pol;
  const std::string name = p.get_string("preset", "pow2");
  // `seed` is pow2's former name, still accepted (the TypeScript side warns that it is deprecated).
  if (name == "pow2" || name == "seed") {
    pol.kind = preset::pow2;
  } else if (name == "pytorch") {
    pol.kind = preset::pytorch;
  } else {
    throw invalid_argument("caching: parameter 'preset' must be pow2 or pytorch, got '" + name +
                           "'");
  }

  if (pol.kind == preset::pow2) {
    for (const char* key : pytorch_only)
      if (p.has(key))
        throw invalid_argument(std::string("caching: parameter '") + key +
                               "' belongs to the pytorch preset, not pow2");
    pol.segment_size = p.get_size("segment_size", 2 * MiB);
    if (pol.segment_size < pow2_min_class || pol.segment_size % pow2_min_class != 0)
      throw invalid_argument("caching: parameter 'segment_size' must be a multiple of 512 B, got " +
                             format_bytes(pol.segment_size));
    return pol;
  }

  for (const char* key : pow2_only)
    if (p.has(key))
      throw invalid_argument(
          std::string("caching: parameter '") + key +
          "' belongs to the pow2 preset; pytorch segments are 2 MiB (small pool) "
          "and 20 MiB or the rounded request (large pool)");
  // PyTorch refuses max_split_size_mb and max_non_split_rounding_mb below kLargeBuffer (20 MiB).
  const std::string split = p.get_string("max_split_size", "unlimited");
  if (split != "unlimited") {
    pol.max_split_size = parse_size(split, "parameter 'max_split_size'");
    if (pol.max_split_size < large_buffer)
      throw invalid_argument(
          "parameter 'max_split_size': must be at least 20 MiB (as PyTorch's "
          "max_split_size_mb), got " +
          format_bytes(pol.max_split_size));
  }
  pol.max_non_split_rounding_size = p.get_size("max_non_split_rounding_size", large_buffer);
  if (pol.max_non_split_rounding_size < large_buffer)
    throw invalid_argument(
        "parameter 'max_non_split_rounding_size': must be at least 20 MiB (as "
        "PyTorch's max_non_split_rounding_mb), got " +
        format_bytes(pol.max_non_split_rounding_size));
  pol.roundup_divisions = parse_divisions(p.get_string("roundup_power2_divisions", "0"));
  for (std::uint64_t d : pol.roundup_divisions) pol.rounds_to_divisions |= d > 1;
  pol.garbage_collection_threshold = p.get_double("garbage_collection_threshold", 0);
  if (pol.garbage_collection_threshold != 0 &&
      !(pol.garbage_collection_threshold > 0 && pol.garbage_collection_threshold < 1))
    throw invalid_argument(
        "parameter 'garbage_collection_threshold': must be in (0, 1) or 0 for off");
  pol.expandable_segments = p.get_bool("expandable_segments", false);
  return pol;
}

}  // namespace vramscope::caching_detail
