// The one interface every strategy implements. Public non-virtual allocate/deallocate/stats (as
// RMM's device_memory_resource) keep the common bookkeeping in one place: the table of live blocks
// (so invalid and double frees are caught the same way everywhere), the requested/rounded/reserved
// counters and their peaks, stream-ordered deferred frees, and the tracing hook. Strategies
// implement the private do_* functions and may trust what reaches them: a do_deallocate only ever
// sees a live block of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "vramscope/address_map.hpp"
#include "vramscope/backing.hpp"
#include "vramscope/errors.hpp"
#include "vramscope/params.hpp"
#include "vramscope/spin_lock.hpp"
#include "vramscope/tracer.hpp"
#include "vramscope/types.hpp"

namespace vramscope {

// Every figure as docs/architecture.md#metrics defines it (the one definition the replay, the
// TypeScript services and the renderer share).
struct allocator_stats {
  // Invariant: reserved_live == rounded_live + pending_bytes + free_bytes + unusable_bytes.
  std::uint64_t requested_live = 0;  // bytes the callers asked for, live now
  std::uint64_t requested_peak = 0;
  std::uint64_t rounded_live = 0;  // bytes of the blocks handed out (after rounding, splits)
  std::uint64_t rounded_peak = 0;
  std::uint64_t reserved_live = 0;  // physical memory obtained from the device (regions + mapped)
  std::uint64_t reserved_peak = 0;
  std::uint64_t address_space = 0;   // virtual address space reserved (VMM), mapped or not
  std::uint64_t pending_bytes = 0;   // freed on another stream, waiting for its event
  std::uint64_t free_bytes = 0;      // inside reserved memory and available to a request
  std::uint64_t unusable_bytes = 0;  // inside reserved, neither live nor available (arena's freed)
  std::uint64_t largest_free_block = 0;
  double external_fragmentation = 0;  // 1 - largest_free_block / free_bytes (0 when none free)
  std::uint64_t internal_waste() const { return rounded_live - requested_live; }

  std::uint64_t live_blocks = 0;
  std::uint64_t pending_blocks = 0;
  std::uint64_t allocations = 0;
  std::uint64_t deallocations = 0;
  std::uint64_t failures = 0;  // out-of-memory errors raised
  device_call_counts device_calls;
};

// A strategy's structure, for the invariant checker, the visualiser and tests.
enum class block_state : std::uint8_t {
  live = 0,     // handed out
  free = 1,     // available to a request
  pending = 2,  // freed on another stream, waiting for its event
  unusable = 3  // reserved but not reusable until a reset (arena)
};

struct region_info {
  address_t address;
  std::uint64_t size;
  bool mapped;         // false: reserved address space with no physical memory behind it
  std::uint32_t kind;  // strategy-specific: slab size class, segment pool, buddy root, chunk...
};

struct block_info {
  address_t address;
  std::uint64_t size;
  block_state state;
  std::uint32_t aux;  // strategy-specific: size class, buddy order...
};

class layout_visitor {
 public:
  virtual ~layout_visitor() = default;
  virtual void region(const region_info& region) = 0;
  virtual void block(const block_info& block) = 0;
};

struct allocation {
  address_t address;
  std::uint64_t rounded;  // the bytes this block really occupies
};

// A strategy's state when a recording's window opened (it began late, or its ring buffer dropped
// its oldest events; docs/architecture.md, "Replay from the recorded state"): segments as the
// real allocator held them, each with the blocks then live inside it; every byte of a segment
// (of a mapped run, for an expandable one) that no block covers was free. Addresses are the
// recorded ones: a strategy keeps each block's offset inside its segment wherever it places it.
struct seed_segment {
  address_t address;
  std::uint64_t size;
  stream_t stream;
  std::uint32_t pool;  // memory pool (0 the default pools, k a private pool: use_pool)
  bool small_pool;     // PyTorch's small pool (2 MiB segments, requests up to 1 MiB)
  bool expandable;     // a mapped run of an expandable segment, not a segment of its own
};
struct seed_block {
  address_t address;  // recorded, inside one segment
  std::uint64_t size;
  std::uint64_t requested;
  stream_t stream;
};
struct seed_state {
  std::vector<seed_segment> segments;  // in the order the strategy obtains them
  std::vector<seed_block> blocks;      // live blocks
};

// One block of a whole trace, as a strategy that plans ahead (strategy_traits::needs_plan) is told
// of it before the first allocation: its requested bytes and the events it is live over, [start,
// end) (end: the event that frees it, or the event count for a block live at the end). Two blocks
// are alive at once when each starts before the other ends.
struct block_lifetime {
  std::uint64_t bytes;
  std::uint32_t start;
  std::uint32_t end;
};

class allocator {
 public:
  virtual ~allocator();
  allocator(const allocator&) = delete;
  allocator& operator=(const allocator&) = delete;

  // Returns nullptr for 0 bytes (as cudaMalloc does). Throws out_of_memory, leaving every live
  // block and counter as they were.
  void* allocate(std::size_t bytes, stream_t stream = 0) {
    // One test of thread_safe_, not a guard that tests it again on the way out: the guard's
    // pointer would be kept across the strategy's call and tested after it.
    if (!thread_safe_) return allocate_unlocked(bytes, stream);
    std::lock_guard<spin_lock> guard(mutex_);
    return allocate_unlocked(bytes, stream);
  }

  // As allocate, but a request that does not fit returns nullptr (counted in failures and traced
  // as one) instead of throwing: for loops that expect many failures, as a replay under a limit
  // does, where an exception per failed request would cost more than the replay itself. Any other
  // error still throws. nullptr for 0 bytes as well.
  void* try_allocate(std::size_t bytes, stream_t stream = 0) {
    if (!thread_safe_) return try_allocate_unlocked(bytes, stream);
    std::lock_guard<spin_lock> guard(mutex_);
    return try_allocate_unlocked(bytes, stream);
  }

  // Freeing on the stream the block was allocated on makes it reusable at once on that stream;
  // another stream's next allocation first waits for the freeing stream's queued work. Freeing on
  // another stream records an event there: the block stays pending until that event completes.
  // nullptr is a no-op. Throws invalid_free / double_free with the state unchanged.
  void deallocate(void* ptr, stream_t stream = 0) {
    if (!thread_safe_) return deallocate_unlocked(reinterpret_cast<address_t>(ptr), stream);
    std::lock_guard<spin_lock> guard(mutex_);
    deallocate_unlocked(reinterpret_cast<address_t>(ptr), stream);
  }

  // Marks a block as used on another stream (as PyTorch's record_stream): its free then waits for
  // that stream's work queued so far as well.
  void record_stream(void* ptr, stream_t stream);

  // Completes pending frees whose events have completed; returns how many.
  std::size_t process_deferred();
  // Waits for every pending free's event, then completes them all.
  void synchronize_deferred();

  allocator_stats stats() const;
  void walk(layout_visitor& visitor) const;

  // The part of stats() kept as running counters: no walk, so cheap enough to read after every
  // operation (replay's per-event metrics). Equal to the same fields of stats().
  struct counters {
    std::uint64_t requested_live;
    std::uint64_t rounded_live;
    std::uint64_t reserved_live;
    std::uint64_t reserved_peak;  // high-water mark, transient growth inside one call included
    std::uint64_t live_blocks;
    device_call_counts device_calls;
  };
  counters live_counters() const {
    maybe_lock guard(mutex_, thread_safe_);
    return {requested_live_, rounded_live_, reserved_live_,
            reserved_peak_,  live_.size(),  own_calls_};
  }

  // Directs the allocations that follow to private memory pool `pool` (0: the default pools), as
  // a CUDA graph's capture does (PyTorch's beginAllocateToPool / endAllocateToPool): its blocks
  // come from segments of their own, kept while the graph lives. A free always returns a block to
  // the pool it came from, whichever pool is current. Strategies without private pools ignore it.
  void use_pool(std::uint32_t pool) {
    maybe_lock guard(mutex_, thread_safe_);
    do_use_pool(pool);
  }

  // Starts a fresh allocator (nothing allocated yet) from `state`: its segments obtained, its
  // blocks live and counted as if allocated. Returns each block's address, in the order of
  // state.blocks. Throws unsupported where the strategy cannot be seeded, invalid_argument for a
  // state it cannot hold (naming the segment or block), out_of_memory where the device is too small.
  std::vector<address_t> seed(const seed_state& state);

  // For a strategy that plans ahead (strategy_traits::needs_plan): every block it will be asked for,
  // in the order of the allocate calls that will come, before the first of them. The k-th
  // allocation then is blocks[k]. Throws unsupported for a strategy that does not plan,
  // invalid_argument once an allocation has been made.
  void plan(const std::vector<block_lifetime>& blocks);

  // Releases cached memory the strategy holds but no block uses (where it caches at all).
  void trim();
  // Frees every block at once and returns to the state after construction (where supported:
  // arena, bump; elsewhere it throws unsupported). Live pointers become invalid.
  void reset();
  bool supports_reset() const noexcept { return do_supports_reset(); }

  // Attaching a tracer traces first the address space reserved and the regions obtained while
  // none was attached (a strategy's reservation made at construction: arena, vmm_growable; an
  // initial pool: rmm_pool, rmm_arena, rmm_binning), so a layout trace holds every reservation its
  // maps and unmaps fall in and every region its blocks lie in.
  void set_tracer(tracer* t);
  tracer* get_tracer() const noexcept { return tracer_; }

  const std::string& name() const noexcept { return name_; }
  backing& get_backing() const noexcept { return backing_; }
  bool thread_safe() const noexcept { return thread_safe_; }

  // The requested size of a live block; 0 when `ptr` is not live.
  std::size_t requested_size(const void* ptr) const;

 protected:
  allocator(std::string name, backing& backing, bool thread_safe = false);

  // What a strategy's do_seed gives for each seeded block.
  struct seeded_block {
    address_t address;
    std::uint64_t rounded;
    std::uint32_t cookie;
  };

  // --- services for strategies: obtain and return memory through the backing, counted and traced.
  address_t obtain_region(std::size_t bytes, std::uint32_t kind = 0);
  void return_region(address_t address, std::size_t bytes, std::uint32_t kind = 0);
  address_t reserve_address_space(std::size_t bytes, std::size_t alignment);
  void release_address_space(address_t address, std::size_t bytes);
  void map_range(address_t address, std::size_t bytes);
  void unmap_range(address_t address, std::size_t bytes);
  // Moves mapped memory to another reserved range (backing::remap): traced as an unmap at `from`
  // and a map at `to`, counted as one of each; reserved memory is unchanged.
  void remap_range(address_t from, address_t to, std::size_t bytes);
  // For strategies that allocate stream-ordered from the backing (async_pool): count as reserved.
  void note_reserved(std::int64_t delta_bytes) noexcept;

  void trace(trace_op op, address_t address, std::uint64_t size, std::uint64_t requested = 0,
             stream_t stream = 0, std::uint32_t aux = 0) const {
    if (VRAMSCOPE_UNLIKELY(tracer_ != nullptr))
      tracer_->append(op, aux, stream, address, size, requested);
  }
  bool tracing() const noexcept { return tracer_ != nullptr; }

  // Throws out_of_memory for `requested` bytes, with what the strategy could still offer.
  [[noreturn]] void fail(std::size_t requested, std::size_t available, const char* why) const;

  // A do_allocate that cannot serve a request returns refuse(...): under allocate it throws as
  // fail does (`why()`, a callable giving the message, is called only then); under try_allocate
  // it returns the empty allocation (address 0) that says "refused", with nothing built or thrown.
  // A strategy that throws instead is still right, only slower under try_allocate.
  template <class Why>
  allocation refuse(std::size_t requested, std::size_t available, Why&& why) const {
    if (VRAMSCOPE_UNLIKELY(!refusing_quietly_)) fail(requested, available, to_c_str(why()));
    return {0, 0};
  }
  static constexpr address_t refused = 0;  // the address of refuse's allocation

  // Bytes available inside reserved memory and the largest contiguous run of them.
  struct free_summary {
    std::uint64_t free_bytes = 0;
    std::uint64_t largest_free_block = 0;
    std::uint64_t unusable_bytes = 0;
  };

  // What the allocator could offer a request now (for out_of_memory messages).
  std::size_t backing_available() const noexcept { return backing_.available(); }

  // For strategies that never hand a block freed on one stream to another before that stream's
  // work is done (per-stream pools; the driver's own ordering: cudaFree, cudaFreeAsync): the base
  // then skips its fence at stream switches (switch_reuse_stream).
  void reuse_is_stream_ordered() noexcept { fence_stream_switches_ = false; }

  // For a strategy whose reuse follows the trace's own order of events rather than the streams'
  // work (a plan made ahead, which is a bound, not a device's allocator): a free on another stream
  // than the block's completes at once instead of waiting for that stream's event.
  void frees_complete_at_once() noexcept { frees_complete_at_once_ = true; }

 private:
  // --- what each strategy implements. do_allocate gets bytes > 0 and returns a block aligned to
  // at least 256 B, or throws out_of_memory with its state unchanged. It may set `cookie` (0 when
  // it does not), its own note on the block (a node, a slab, an order): the base keeps it in the
  // live-block entry and hands it back to do_deallocate, so that a free needs no lookup of its own.
  // (An out-parameter rather than a third field of allocation: 24 bytes would be returned through
  // memory, putting a store and a reload on the path from the strategy's address to the table.)
  virtual allocation do_allocate(std::size_t bytes, stream_t stream, std::uint32_t& cookie) = 0;
  // `rounded` and `cookie` are what do_allocate gave for this block, `stream` the stream it was
  // allocated on.
  virtual void do_deallocate(address_t address, std::uint64_t rounded, std::uint32_t cookie,
                             stream_t stream) = 0;
  // Walks regions and blocks (live blocks included; pending ones the base relabels).
  virtual void do_walk(layout_visitor& visitor) const = 0;
  virtual free_summary do_free_summary() const;  // default: from do_walk
  // For an address that is not live: is it a freed block of ours (double free)?
  virtual bool do_was_freed(address_t address) const;
  // Builds the seeded state; `out` gets, per block of state.blocks, its address, its rounded size
  // (a strategy may give a block the slack its policy would have left with it) and its cookie.
  virtual void do_seed(const seed_state& state, std::vector<seeded_block>& out);
  virtual void do_plan(const std::vector<block_lifetime>& blocks);  // default: unsupported
  virtual void do_trim() {}
  virtual void do_use_pool(std::uint32_t) {}
  virtual bool do_supports_reset() const noexcept { return false; }
  virtual void do_reset();

  // 32 bytes at a 32-byte boundary in the live table: never across two cache lines.
  struct alignas(32) live_block {
    std::uint64_t requested;
    std::uint64_t rounded;
    stream_t stream;
    std::uint32_t other_streams;  // index+1 into extra_streams_ when used on other streams
    std::uint32_t cookie;         // what do_allocate set
  };
  struct pending_free {
    address_t address;
    live_block block;
    std::vector<event_t> events;
  };

  void* allocate_unlocked(std::size_t bytes, stream_t stream) {
    if (VRAMSCOPE_UNLIKELY(bytes == 0)) return nullptr;
    // Every pending block has a size: one load to test, where pending_.empty() takes two.
    if (VRAMSCOPE_UNLIKELY(pending_bytes_ != 0)) process_deferred_unlocked();
    if (VRAMSCOPE_UNLIKELY(stream != reuse_stream_)) switch_reuse_stream(stream);
    allocation a;
    std::uint32_t cookie = 0;
    try {
      a = do_allocate(bytes, stream, cookie);
    } catch (const out_of_memory& e) {
      a = allocate_after_failure(bytes, stream, e, cookie);
    }
    live_.insert_new(a.address, live_block{bytes, a.rounded, stream, 0, cookie});
    requested_live_ += bytes;
    rounded_live_ += a.rounded;
    if (requested_live_ > requested_peak_) requested_peak_ = requested_live_;
    if (rounded_live_ > rounded_peak_) rounded_peak_ = rounded_live_;
    ++allocations_;  // deallocations are derived from it (stats())
    trace(trace_op::alloc, a.address, a.rounded, bytes, stream);
    return reinterpret_cast<void*>(a.address);
  }

  void deallocate_unlocked(address_t address, stream_t stream) {
    if (VRAMSCOPE_UNLIKELY(address == 0)) return;
    const std::size_t slot = live_.locate_or(address, [&] { reject_free(address); });
    const live_block& block = live_.value_at(slot);
    if (VRAMSCOPE_UNLIKELY(block.stream != stream || block.other_streams != 0)) {
      if (block.other_streams != 0 || !frees_complete_at_once_) {
        defer_free(address, block, stream);
        return;
      }
    }
    // Field by field: a copy of the whole entry would reload, with wide loads, what allocate has
    // just stored, which stalls on store forwarding.
    const std::uint64_t requested = block.requested;
    const std::uint64_t rounded = block.rounded;
    const std::uint32_t cookie = block.cookie;
    if (VRAMSCOPE_UNLIKELY(stream != reuse_stream_)) note_free_off_reuse_stream(stream);
    // The table and counters are updated before the strategy's call, while the table's pointers
    // and the slot are still in registers (after the call they would be loaded again). A strategy
    // that throws (a device error) gets its block back as it was, live and counted.
    live_.erase_at(slot);
    requested_live_ -= requested;
    rounded_live_ -= rounded;
    try {
      do_deallocate(address, rounded, cookie, stream);
    } catch (...) {
      undo_free(address, requested, rounded, cookie, stream);
      throw;
    }
    trace(trace_op::free, address, rounded, requested, stream);
  }

  // allocate_unlocked's path with failures reported, not thrown (try_allocate). Inline as
  // allocate_unlocked is: the replay loop calls it for every request.
  void* try_allocate_unlocked(std::size_t bytes, stream_t stream) {
    if (VRAMSCOPE_UNLIKELY(bytes == 0)) return nullptr;
    if (VRAMSCOPE_UNLIKELY(pending_bytes_ != 0)) process_deferred_unlocked();
    if (VRAMSCOPE_UNLIKELY(stream != reuse_stream_)) switch_reuse_stream(stream);
    std::uint32_t cookie = 0;
    allocation a = try_do_allocate(bytes, stream, cookie);
    if (VRAMSCOPE_UNLIKELY(a.address == refused)) {
      a = try_after_refusal(bytes, stream, cookie);
      if (a.address == refused) return nullptr;
    }
    live_.insert_new(a.address, live_block{bytes, a.rounded, stream, 0, cookie});
    requested_live_ += bytes;
    rounded_live_ += a.rounded;
    if (requested_live_ > requested_peak_) requested_peak_ = requested_live_;
    if (rounded_live_ > rounded_peak_) rounded_peak_ = rounded_live_;
    ++allocations_;
    trace(trace_op::alloc, a.address, a.rounded, bytes, stream);
    return reinterpret_cast<void*>(a.address);
  }
  // do_allocate with refuse() quiet and a thrown out_of_memory caught: address 0 when refused.
  allocation try_do_allocate(std::size_t bytes, stream_t stream, std::uint32_t& cookie) {
    refusing_quietly_ = true;
    allocation a;
    try {
      a = do_allocate(bytes, stream, cookie);
    } catch (const out_of_memory&) {
      a = {refused, 0};
    } catch (...) {
      refusing_quietly_ = false;
      throw;
    }
    refusing_quietly_ = false;
    return a;
  }
  // After a refusal: as allocate_after_failure, pending frees completed and one more try; counted
  // and traced as a failure when that is refused too (address 0).
  VRAMSCOPE_NOINLINE allocation try_after_refusal(std::size_t bytes, stream_t stream,
                                                  std::uint32_t& cookie);
  static const char* to_c_str(const char* s) noexcept { return s; }
  static const char* to_c_str(const std::string& s) noexcept { return s.c_str(); }

  // Waits for every pending free's events and completes them; false when none was pending.
  VRAMSCOPE_NOINLINE bool complete_pending_frees(stream_t stream);
  VRAMSCOPE_NOINLINE allocation allocate_after_failure(std::size_t bytes, stream_t stream,
                                                       const out_of_memory& first,
                                                       std::uint32_t& cookie);
  [[noreturn]] VRAMSCOPE_NOINLINE void reject_free(address_t address) const;
  VRAMSCOPE_NOINLINE void undo_free(address_t address, std::uint64_t requested,
                                    std::uint64_t rounded, std::uint32_t cookie, stream_t stream);
  VRAMSCOPE_NOINLINE void defer_free(address_t address, const live_block& live, stream_t stream);
  // Cross-stream reuse of blocks freed on their own stream: see allocator.cpp.
  VRAMSCOPE_NOINLINE void switch_reuse_stream(stream_t stream);
  VRAMSCOPE_NOINLINE void note_free_off_reuse_stream(stream_t stream);
  void note_unfenced(stream_t stream);
  void fence(stream_t stream);
  std::size_t process_deferred_unlocked();
  void complete_pending(std::size_t index);

  struct maybe_lock {
    maybe_lock(spin_lock& m, bool on) : m_(on ? &m : nullptr) {
      if (m_) m_->lock();
    }
    ~maybe_lock() {
      if (m_) m_->unlock();
    }
    spin_lock* m_;
  };

  std::string name_;
  backing& backing_;
  bool thread_safe_;
  mutable spin_lock mutex_;
  tracer* tracer_ = nullptr;
  // Address space reserved and regions obtained while no tracer was attached, and not released
  // since (op: va_reserve or region_reserve).
  struct untraced_reservation {
    trace_op op;
    address_t address;
    std::uint64_t bytes;
    std::uint32_t kind;
  };
  std::vector<untraced_reservation> untraced_reservations_;
  // Drops the untraced reservation of that op at that address; false where there is none.
  bool forget_untraced(trace_op op, address_t address);

  address_map<live_block, /*FrontSlot=*/true> live_;  // LIFO frees skip the hash table
  std::vector<pending_free> pending_;
  address_map<std::uint32_t> pending_index_;          // address -> index+1 into pending_
  std::vector<std::vector<stream_t>> extra_streams_;  // record_stream sets
  std::vector<std::uint32_t> free_extra_slots_;

  // Blocks freed on their own stream are reusable at once, by a stream-unaware strategy on any
  // stream: an allocation on reuse_stream_ needs no wait; any other stream first waits for the
  // streams with frees not yet fenced (switch_reuse_stream).
  static constexpr stream_t no_stream = ~stream_t{0};
  stream_t reuse_stream_ = 0;
  stream_t last_reuse_stream_ = 0;          // reuse_stream_ before it was set to no_stream
  std::uint64_t frees_at_switch_ = 0;       // deallocations when last_reuse_stream_ was chosen
  std::vector<stream_t> unfenced_streams_;  // other streams freed on since their last fence
  bool fence_stream_switches_ = true;
  bool frees_complete_at_once_ = false;  // frees_complete_at_once()
  bool refusing_quietly_ = false;        // inside try_allocate: refuse() returns rather than throws

  std::uint64_t requested_live_ = 0, requested_peak_ = 0;
  std::uint64_t rounded_live_ = 0, rounded_peak_ = 0;
  std::uint64_t reserved_live_ = 0, reserved_peak_ = 0;
  std::uint64_t address_space_ = 0;
  std::uint64_t pending_bytes_ = 0;
  std::uint64_t allocations_ = 0;
  // Blocks that reset() dropped without a deallocate: deallocations = allocations - live - these.
  std::uint64_t dropped_by_reset_ = 0;
  mutable std::uint64_t failures_ = 0;
  device_call_counts own_calls_;  // calls this allocator made (the backing may be shared)
};

// --- the registry: strategies by name, with their parameters, for replay, the CLI and the UI.
struct param_info {
  std::string name;
  std::string kind;  // "size", "uint", "double", "bool", "string", "size_list"
  std::string default_value;
  std::string description;
};

// What a strategy needs from its backing and offers, named where it registers:
//   strategy_traits().needs_vmm().supports_reset().runs_on(backing_kind::cuda_vmm)
// Unnamed needs are absent; a strategy runs on cuda_malloc unless it names another backing.
class strategy_traits {
 public:
  strategy_traits& needs_vmm() {
    vmm_ = true;
    return *this;
  }
  strategy_traits& needs_async() {
    async_ = true;
    return *this;
  }
  strategy_traits& supports_reset() {
    reset_ = true;
    return *this;
  }
  strategy_traits& runs_on(backing_kind kind) {
    cuda_backing_ = kind;
    return *this;
  }
  // Places blocks by a plan of the whole trace (allocator::plan): it serves a replay, which knows
  // the trace ahead, and no online caller.
  strategy_traits& needs_plan() {
    plan_ = true;
    return *this;
  }

 private:
  friend struct strategy_info;
  bool vmm_ = false;
  bool async_ = false;
  bool reset_ = false;
  bool plan_ = false;
  backing_kind cuda_backing_ = backing_kind::cuda_malloc;
};

struct strategy_info {
  strategy_info(std::string name, std::string description, std::vector<param_info> params,
                const strategy_traits& traits)
      : name(std::move(name)),
        description(std::move(description)),
        params(std::move(params)),
        needs_vmm(traits.vmm_),
        needs_async(traits.async_),
        supports_reset(traits.reset_),
        needs_plan(traits.plan_),
        cuda_backing(traits.cuda_backing_) {}

  std::string name;
  std::string description;
  std::vector<param_info> params;
  // What the strategy needs from its backing.
  bool needs_vmm = false;
  bool needs_async = false;
  bool supports_reset = false;
  // Serves a replay only: told every block's lifetime before the first allocation (allocator::plan).
  bool needs_plan = false;
  // On a GPU, which real backing it runs on by default.
  backing_kind cuda_backing = backing_kind::cuda_malloc;
};

using strategy_factory = std::unique_ptr<allocator> (*)(backing& b, const params& p);

const std::vector<strategy_info>& strategies();
const strategy_info& find_strategy(const std::string& name);  // throws invalid_argument
// Builds a strategy on a backing; rejects unknown parameters and a backing that lacks what the
// strategy needs (unsupported), naming both.
std::unique_ptr<allocator> make_allocator(const std::string& name, backing& b,
                                          const params& p = {});

// Each strategy file registers itself with one of these at namespace scope.
struct strategy_registration {
  strategy_registration(strategy_info info, strategy_factory factory);
};

}  // namespace vramscope
