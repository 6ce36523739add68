// The CPU emulation's scheduler (cuda_emulation.h): fibers (Boost.Context, which switches without
// the signal-mask syscalls of ucontext) for a CTA's threads, run in a shuffled round until each
// blocks at a barrier or exits.
#include "kernels/emulation/cuda_emulation.h"

#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

namespace pagoda::emulation {

namespace {

namespace context = boost::context;

constexpr std::size_t kStackBytes = 256 << 10;

// Fiber stacks, kept for the process (per OS thread) and never cleared: a launch of 1024 threads
// would otherwise allocate and zero 256 MB. Each stack's top is moved by a different number of
// cache lines, so that the stacks' hot tops do not all fall into the same cache sets.
constexpr std::size_t kStackColors = 61;
unsigned char* fiber_stack(std::size_t i) {
  thread_local std::vector<std::unique_ptr<unsigned char[]>> stacks;
  while (stacks.size() <= i) stacks.emplace_back(new unsigned char[kStackBytes]);
  return stacks[i].get() + kStackBytes - 64 * (i % kStackColors);
}
constexpr std::size_t kUsableStackBytes = kStackBytes - 64 * kStackColors;

// The stack a fiber runs on is fiber_stack's: nothing to allocate or free.
struct BorrowedStack {
  context::stack_context allocate() { std::abort(); }
  void deallocate(context::stack_context&) noexcept {}
};

struct Copy {
  unsigned char* dst;
  const unsigned char* src;
  int bytes;
  bool valid;
};

enum class Wait { kNone, kCta, kWarp };

struct Fiber {
  uint3 index{};
  int lane = 0;
  int warp = 0;
  unsigned exchanges = 0;    // warp exchanges so far (which of the two buffers is next)
  context::fiber suspended;  // the thread where it blocked, while the scheduler runs
  unsigned char* stack_top = nullptr;
  bool done = false;
  Wait waiting = Wait::kNone;
  std::vector<Copy> open;                 // cp.async copies not yet committed
  std::deque<std::vector<Copy>> pending;  // committed groups, oldest first
};

struct Cta {
  dim3 grid, block;
  uint3 block_index{};
  std::vector<unsigned char> shared;  // dynamic shared memory, from a 16-byte aligned offset
  unsigned char* shared_base = nullptr;
  std::size_t shared_bytes = 0;
  std::vector<Fiber> fibers;
  int current = -1;
  context::fiber scheduler;  // the scheduler where it switched to the running thread
  const std::function<void()>* body = nullptr;
  // Per warp, two buffers of the lanes' deposits, used by turns: a lane can deposit into one only
  // after every lane of its warp has met at the exchange before, so after all have read this one.
  std::vector<std::vector<unsigned char>> exchange[2];
  // Drives the two choices a GPU leaves open, so that a kernel relying on one of them fails:
  // the order the threads run in between barriers, and when a cp.async lands (at its issue or
  // as late as its wait).
  std::minstd_rand chance{20261128};
};

thread_local Cta* g_cta = nullptr;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "cuda emulation: %s\n", what);
  std::abort();
}

Fiber& me() {
  if (g_cta == nullptr || g_cta->current < 0) fail("device code called outside a launch");
  return g_cta->fibers[static_cast<std::size_t>(g_cta->current)];
}

void block_on(Wait w) {
  me().waiting = w;
  g_cta->scheduler = std::move(g_cta->scheduler).resume();
}

context::fiber fiber_main(context::fiber&& scheduler) {
  g_cta->scheduler = std::move(scheduler);
  (*g_cta->body)();
  me().done = true;
  // The copies a thread never waited for are dropped with it: nothing can read them.
  return std::move(g_cta->scheduler);
}

// Releases the barrier `w` of fibers [begin, end) (the CTA, or one warp) when every live one waits
// at it. True when it did.
bool release(Cta& cta, std::size_t begin, std::size_t end, Wait w) {
  bool any = false;
  for (std::size_t i = begin; i < end; ++i) {
    const Fiber& f = cta.fibers[i];
    if (f.done) continue;
    if (f.waiting != w) return false;
    any = true;
  }
  if (!any) return false;
  for (std::size_t i = begin; i < end; ++i) {
    if (cta.fibers[i].waiting == w) cta.fibers[i].waiting = Wait::kNone;
  }
  return true;
}

// Releases the CTA barrier and each warp's. True when something was released.
bool release_barriers(Cta& cta) {
  const std::size_t threads = cta.fibers.size();
  bool released = release(cta, 0, threads, Wait::kCta);
  for (std::size_t w = 0; w < threads; w += 32) {
    released |= release(cta, w, std::min(threads, w + 32), Wait::kWarp);
  }
  return released;
}

void run_cta(Cta& cta) {
  for (std::size_t i = 0; i < cta.fibers.size(); ++i) {
    Fiber& f = cta.fibers[i];
    f.done = false;
    f.waiting = Wait::kNone;
    f.open.clear();
    f.pending.clear();
    f.exchanges = 0;
    context::stack_context stack;
    stack.size = kUsableStackBytes;
    stack.sp = f.stack_top;
    f.suspended =
        context::fiber(std::allocator_arg, context::preallocated(stack.sp, stack.size, stack),
                       BorrowedStack{}, fiber_main);
  }
  std::vector<std::size_t> order(cta.fibers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (;;) {
    bool ran = false, live = false;
    std::shuffle(order.begin(), order.end(), cta.chance);
    for (const std::size_t i : order) {
      Fiber& f = cta.fibers[i];
      if (f.done) continue;
      live = true;
      if (f.waiting != Wait::kNone) continue;
      cta.current = static_cast<int>(i);
      f.suspended = std::move(f.suspended).resume();
      cta.current = -1;
      ran = true;
    }
    if (!live) return;
    if (!release_barriers(cta) && !ran) fail("deadlock: every live thread waits at a barrier");
  }
}

}  // namespace

uint3 thread_index() {
  return me().index;
}
uint3 block_index() {
  return g_cta->block_index;
}
dim3 block_dim() {
  return g_cta->block;
}
dim3 grid_dim() {
  return g_cta->grid;
}
unsigned char* dynamic_shared() {
  return g_cta->shared_base;
}

void sync_cta() {
  block_on(Wait::kCta);
}
void sync_warp() {
  block_on(Wait::kWarp);
}

int lane_id() {
  return me().lane;
}

const unsigned char* warp_exchange(const void* mine, std::size_t bytes) {
  Fiber& f = me();
  std::vector<unsigned char>& buffer =
      g_cta->exchange[f.exchanges++ % 2][static_cast<std::size_t>(f.warp)];
  if (buffer.size() < 32 * bytes) buffer.resize(32 * bytes);
  std::memcpy(buffer.data() + static_cast<std::size_t>(f.lane) * bytes, mine, bytes);
  sync_warp();
  return buffer.data();
}

namespace {
void land(const Copy& c) {
  if (c.valid) {
    std::memcpy(c.dst, c.src, static_cast<std::size_t>(c.bytes));
  } else {
    std::memset(c.dst, 0, static_cast<std::size_t>(c.bytes));
  }
}
}  // namespace

void async_copy(std::uint32_t shared_address, const void* src, int bytes, bool valid) {
  if (shared_address % static_cast<std::uint32_t>(bytes) != 0 ||
      reinterpret_cast<std::uintptr_t>(src) % static_cast<std::uintptr_t>(bytes) != 0) {
    fail("cp.async with a misaligned source or destination");
  }
  if (shared_address + static_cast<std::size_t>(bytes) > g_cta->shared_bytes) {
    fail("cp.async past the dynamic shared memory");
  }
  const Copy c{static_cast<unsigned char*>(shared_pointer(shared_address)),
               static_cast<const unsigned char*>(src), bytes, valid};
  if (g_cta->chance() % 2 == 0) {
    land(c);  // early: the destination must be free when the copy is issued
  } else {
    me().open.push_back(c);  // late: nothing may read it before the wait
  }
}
void async_commit() {
  Fiber& f = me();
  f.pending.push_back(std::move(f.open));
  f.open.clear();
}
void async_wait(int pending) {
  Fiber& f = me();
  while (static_cast<int>(f.pending.size()) > pending) {
    for (const Copy& c : f.pending.front()) land(c);
    f.pending.pop_front();
  }
}

std::uint32_t shared_address(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  if (b < g_cta->shared_base || b > g_cta->shared_base + g_cta->shared_bytes) {
    fail("shared address outside the dynamic shared memory");
  }
  return static_cast<std::uint32_t>(b - g_cta->shared_base);
}
void* shared_pointer(std::uint32_t address) {
  return g_cta->shared_base + address;
}

void run_grid(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& body) {
  Cta cta;
  cta.grid = grid;
  cta.block = block;
  cta.body = &body;
  const std::size_t threads = static_cast<std::size_t>(block.x) * block.y * block.z;
  cta.fibers.resize(threads);
  for (std::size_t i = 0; i < threads; ++i) {
    cta.fibers[i].stack_top = fiber_stack(i);
    cta.fibers[i].lane = static_cast<int>(i % 32);
    cta.fibers[i].warp = static_cast<int>(i / 32);
    cta.fibers[i].index =
        make_uint3(static_cast<unsigned>(i % block.x), static_cast<unsigned>(i / block.x % block.y),
                   static_cast<unsigned>(i / (block.x * block.y)));
  }
  for (auto& buffers : cta.exchange) buffers.resize((threads + 31) / 32);
  // 1024-byte aligned, the most any kernel asks of its dynamic shared memory.
  cta.shared.assign(shared_bytes + 1024, 0);
  const auto base = reinterpret_cast<std::uintptr_t>(cta.shared.data());
  cta.shared_base = cta.shared.data() + (1024 - base % 1024) % 1024;
  cta.shared_bytes = shared_bytes;
  Cta* outer = g_cta;
  g_cta = &cta;
  // The CTAs in an order drawn by chance: a GPU runs them in any order, and side by side, so a
  // CTA that reads what another CTA of the launch writes fails here as it may there.
  std::vector<std::size_t> ctas(static_cast<std::size_t>(grid.x) * grid.y * grid.z);
  std::iota(ctas.begin(), ctas.end(), std::size_t{0});
  std::shuffle(ctas.begin(), ctas.end(), cta.chance);
  for (const std::size_t n : ctas) {
    cta.block_index =
        make_uint3(static_cast<unsigned>(n % grid.x), static_cast<unsigned>(n / grid.x % grid.y),
                   static_cast<unsigned>(n / (std::size_t{grid.x} * grid.y)));
    // Garbage, not zeros: a kernel must not read shared memory it did not write.
    for (std::size_t i = 0; i < cta.shared.size(); ++i) {
      cta.shared[i] = static_cast<unsigned char>(0xA5 ^ (i * 131));
    }
    run_cta(cta);
  }
  g_cta = outer;
}

}  // namespace pagoda::emulation
