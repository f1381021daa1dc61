// Layout and trace columns. Sizes are Float64Array (exact below 2^53 bytes), addresses
// BigUint64Array (device addresses can use all 64 bits).
#include "columns.hpp"

#include <algorithm>

namespace vramscope::binding {

namespace {

struct layout_collector final : layout_visitor {
  std::vector<std::uint64_t> region_address;
  std::vector<double> region_size;
  std::vector<std::uint8_t> region_mapped;
  std::vector<std::uint32_t> region_kind;
  std::vector<std::uint64_t> block_address;
  std::vector<double> block_size;
  std::vector<std::uint8_t> block_state_;
  std::vector<std::uint32_t> block_aux;

  void region(const region_info& r) override {
    region_address.push_back(r.address);
    region_size.push_back(static_cast<double>(r.size));
    region_mapped.push_back(r.mapped ? 1 : 0);
    region_kind.push_back(r.kind);
  }
  void block(const block_info& b) override {
    block_address.push_back(b.address);
    block_size.push_back(static_cast<double>(b.size));
    block_state_.push_back(static_cast<std::uint8_t>(b.state));
    block_aux.push_back(b.aux);
  }
};

}  // namespace

Napi::Object layout_columns(Napi::Env env, const allocator& alloc) {
  layout_collector c;
  alloc.walk(c);
  Napi::Object regions = Napi::Object::New(env);
  regions.Set("address", typed_array(env, c.region_address));
  regions.Set("size", typed_array(env, c.region_size));
  regions.Set("mapped", typed_array(env, c.region_mapped));
  regions.Set("kind", typed_array(env, c.region_kind));
  Napi::Object blocks = Napi::Object::New(env);
  blocks.Set("address", typed_array(env, c.block_address));
  blocks.Set("size", typed_array(env, c.block_size));
  blocks.Set("state", typed_array(env, c.block_state_));
  blocks.Set("aux", typed_array(env, c.block_aux));
  Napi::Object layout = Napi::Object::New(env);
  layout.Set("regions", regions);
  layout.Set("blocks", blocks);
  return layout;
}

Napi::Object trace_columns(Napi::Env env, const std::vector<trace_event>& events) {
  const std::size_t n = events.size();
  auto op = Napi::Uint8Array::New(env, n);
  auto address = Napi::BigUint64Array::New(env, n);
  auto size = Napi::Float64Array::New(env, n);
  auto requested = Napi::Float64Array::New(env, n);
  auto stream = Napi::Float64Array::New(env, n);
  auto aux = Napi::Uint32Array::New(env, n);
  for (std::size_t i = 0; i < n; ++i) {
    const trace_event& e = events[i];
    op[i] = static_cast<std::uint8_t>(e.op);
    address[i] = e.address;
    size[i] = static_cast<double>(e.size);
    requested[i] = static_cast<double>(e.requested);
    stream[i] = static_cast<double>(e.stream);
    aux[i] = e.aux;
  }
  Napi::Object columns = Napi::Object::New(env);
  columns.Set("op", op);
  columns.Set("address", address);
  columns.Set("size", size);
  columns.Set("requested", requested);
  columns.Set("stream", stream);
  columns.Set("aux", aux);
  return columns;
}

}  // namespace vramscope::binding
