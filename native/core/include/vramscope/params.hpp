// Strategy parameters: a flat map from name to text ("2MiB", "512", "true", "pow2"), parsed by the
// strategy that owns them. Every key must be known to that strategy: a misspelt parameter is an
// error that names it, never silently ignored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vramscope {

class params {
 public:
  params() = default;
  params(std::initializer_list<std::pair<const std::string, std::string>> values)
      : values_(values) {}

  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::map<std::string, std::string>& values() const { return values_; }

  // Which keys a strategy accepts is checked once, against its param_info list, by
  // make_allocator; the getters parse values and name the key in their errors.
  std::uint64_t get_size(const std::string& key, std::uint64_t fallback) const;
  std::uint64_t get_uint(const std::string& key, std::uint64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // A comma-separated list of sizes: "256,1KiB,4KiB".
  std::vector<std::uint64_t> get_size_list(const std::string& key,
                                           const std::vector<std::uint64_t>& fallback) const;

 private:
  std::map<std::string, std::string> values_;
};

// "2MiB", "2 MiB", "1.5GiB", "512", "4k" -> bytes. Throws invalid_argument naming `what`.
std::uint64_t parse_size(const std::string& text, const std::string& what);

}  // namespace vramscope
