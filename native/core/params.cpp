// Parsing of strategy parameters, with errors that name the parameter and the bad text.
#include "vramscope/params.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "vramscope/errors.hpp"

namespace vramscope {

namespace {
std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::uint64_t parse_size(const std::string& text, const std::string& what) {
  std::string t = trim(text);
  if (t.empty()) throw invalid_argument(what + ": empty size");
  char* end = nullptr;
  double value = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || !std::isfinite(value) || value < 0)
    throw invalid_argument(what + ": '" + text + "' is not a size (try 512, 64KiB, 2MiB, 1.5GiB)");
  std::string unit = lower(trim(std::string(end)));
  double mult = 1;
  if (unit.empty() || unit == "b") mult = 1;
  // KiB and K are binary; kB, MB, GB and TB are decimal (a GPU sold as 80 GB has 80e9 bytes).
  else if (unit == "k" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") mult = 1e3;
  else if (unit == "mb") mult = 1e6;
  else if (unit == "gb") mult = 1e9;
  else if (unit == "tb") mult = 1e12;
  else
    throw invalid_argument(what + ": unknown unit '" + unit + "' in '" + text +
                           "' (B, KiB, MiB, GiB, TiB binary; kB, MB, GB, TB decimal)");
  double bytes = value * mult;
  if (bytes > 9.0e18) throw invalid_argument(what + ": '" + text + "' is too large");
  if (bytes != std::floor(bytes))
    throw invalid_argument(what + ": '" + text + "' is not a whole number of bytes");
  return static_cast<std::uint64_t>(bytes);
}

std::uint64_t params::get_size(const std::string& key, std::uint64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  return parse_size(it->second, "parameter '" + key + "'");
}

std::uint64_t params::get_uint(const std::string& key, std::uint64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::string t = trim(it->second);
  char* end = nullptr;
  unsigned long long v = std::strtoull(t.c_str(), &end, 10);
  if (t.empty() || t[0] == '-' || *end != '\0')
    throw invalid_argument("parameter '" + key + "': '" + it->second + "' is not a whole number");
  return v;
}

double params::get_double(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::string t = trim(it->second);
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !std::isfinite(v))
    throw invalid_argument("parameter '" + key + "': '" + it->second + "' is not a number");
  return v;
}

bool params::get_bool(const std::string& key, bool fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::string t = lower(trim(it->second));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  throw invalid_argument("parameter '" + key + "': '" + it->second + "' is not true or false");
}

std::string params::get_string(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  return trim(it->second);
}

std::vector<std::uint64_t> params::get_size_list(const std::string& key,
                                                 const std::vector<std::uint64_t>& fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::vector<std::uint64_t> out;
  std::string item;
  for (char c : it->second + ",") {
    if (c == ',') {
      if (!trim(item).empty()) out.push_back(parse_size(item, "parameter '" + key + "'"));
      item.clear();
    } else {
      item += c;
    }
  }
  if (out.empty()) throw invalid_argument("parameter '" + key + "': empty list");
  return out;
}

}  // namespace vramscope
