// Copies JavaScript arguments into plain C++ values (the TypeScript layer has validated them with
// messages for people; these checks only keep a raw call from doing harm, and say which argument),
// and the few C++ values more than one call returns into JavaScript ones.
#pragma once

#include <napi.h>

#include <cstdint>
#include <string>

#include "vramscope/backing.hpp"
#include "vramscope/params.hpp"
#include "vramscope/types.hpp"

namespace vramscope::binding {

// A non-negative integer given as a number (up to 2^53) or a bigint (up to 2^64 - 1).
std::uint64_t to_uint64(const Napi::Value& value, const char* name);
// undefined -> fallback.
std::uint64_t to_uint64_or(const Napi::Value& value, const char* name, std::uint64_t fallback);
std::string to_string(const Napi::Value& value, const char* name);
bool to_bool(const Napi::Value& value, const char* name);

// { key: string | number | boolean } -> params (numbers written as integers where they are).
params to_params(const Napi::Value& value);

struct backing_choice {
  backing_kind kind = backing_kind::simulated;
  simulated_options simulated;
  cuda_options cuda;
};
// (kind name, { capacity, granularity, completionDelayNs, releaseThreshold, device }).
backing_choice to_backing_choice(const Napi::Value& kind, const Napi::Value& options);

// Bytes and counts cross as numbers: exact below 2^53 (8 PiB).
inline Napi::Number to_number(Napi::Env env, std::uint64_t value) {
  return Napi::Number::New(env, static_cast<double>(value));
}

// { regionAlloc, regionFree, vaReserve, vaRelease, map, unmap, asyncAlloc, asyncFree, eventRecord,
//   synchronize, total }: an allocator's stats and a replay's summary report them alike.
Napi::Object device_calls_object(Napi::Env env, const device_call_counts& c);

}  // namespace vramscope::binding
