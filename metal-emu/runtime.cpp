// The emulator's scheduler: the threads of a threadgroup as ucontext fibers on one OS thread,
// released together at threadgroup barriers, simd-group barriers and simd-group functions.
#include "msl_emu_rt.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace msl_emu {

namespace {

enum fiber_state { RUNNABLE, WAIT_MEM, WAIT_SIMD, WAIT_SG_BARRIER, WAIT_TG_BARRIER, DONE };

struct fiber {
    ucontext_t  ctx;
    char *      stack;
    thread_ids  ids;
    fiber_state st;
    const char * what;
    unsigned    gen;      // simd-group exchanges this lane has completed
};

struct simdgroup {
    alignas(64) unsigned char buf[2][SIMD_WIDTH][SLOT_BYTES];
    uint32_t      active[2];
};

struct emu_state {
    std::vector<fiber>     fibers;
    std::vector<simdgroup> sgs;
    std::vector<char>      stacks;
    size_t                 stack_bytes = 0;
    ucontext_t             sched;
    fiber *                cur = nullptr;
    body_fn                body = nullptr;
    void *                 body_ctx = nullptr;
    unsigned char *        tgmem = nullptr;
    uintptr_t              tg_lo = 0, tg_hi = 0;   // the threadgroup memory of the running threadgroup
    dispatch_stats         stats{};
};

emu_state S;

void yield_to_scheduler() {
    swapcontext(&S.cur->ctx, &S.sched);
}

void fiber_entry() {
    S.body(S.body_ctx, S.tgmem);
    S.cur->st = DONE;
    // returning resumes uc_link (the scheduler)
}

const char * state_name(fiber_state s) {
    switch (s) {
        case RUNNABLE:        return "running";
        case WAIT_MEM:        return "before a threadgroup-memory access";
        case WAIT_SIMD:       return "in a simd-group function";
        case WAIT_SG_BARRIER: return "at simdgroup_barrier";
        case WAIT_TG_BARRIER: return "at threadgroup_barrier";
        case DONE:            return "returned";
    }
    return "?";
}

// Lockstep within a simd-group. The kernel's translation unit is compiled with clang's
// -fsanitize=thread instrumentation, which calls __tsan_readN/__tsan_writeN before every load
// and store; these are defined here (no sanitizer runtime is linked). Before each access to
// threadgroup memory a lane stops; the lanes of a simd-group then make their next access
// together, round by round, as a GPU's simd-group executes one instruction for all its lanes.
// (A kernel may rely on that: ggml's flash-attention vec kernel lets lane 0 overwrite a
// threadgroup value that the other lanes of its simd-group read just before, with no barrier.)
inline void mem_access(const void * p) {
    const uintptr_t a = (uintptr_t) p;
    if (S.cur && a >= S.tg_lo && a < S.tg_hi) {
        S.cur->st = WAIT_MEM;
        S.cur->what = "threadgroup memory access";
        yield_to_scheduler();
    }
}

} // namespace
} // namespace msl_emu

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_vptr_read(void **) {}
#define MSL_EMU_HOOK(N)                                                          \
    void __tsan_read##N(void * p) { msl_emu::mem_access(p); }                    \
    void __tsan_write##N(void * p) { msl_emu::mem_access(p); }                   \
    void __tsan_unaligned_read##N(void * p) { msl_emu::mem_access(p); }          \
    void __tsan_unaligned_write##N(void * p) { msl_emu::mem_access(p); }         \
    void __tsan_volatile_read##N(void * p) { msl_emu::mem_access(p); }           \
    void __tsan_volatile_write##N(void * p) { msl_emu::mem_access(p); }
MSL_EMU_HOOK(1)
MSL_EMU_HOOK(2)
MSL_EMU_HOOK(4)
MSL_EMU_HOOK(8)
MSL_EMU_HOOK(16)
#undef MSL_EMU_HOOK
void __tsan_read_range(void * p, unsigned long) { msl_emu::mem_access(p); }
void __tsan_write_range(void * p, unsigned long) { msl_emu::mem_access(p); }
}

namespace msl_emu {

[[noreturn]] void fail(const char * fmt, ...) {
    std::fprintf(stderr, "msl-emu: error: ");
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (S.cur) {
        const thread_ids & i = S.cur->ids;
        std::fprintf(stderr, " (threadgroup %u,%u,%u thread %u: simd-group %u lane %u)",
                     i.threadgroup_position_in_grid.x, i.threadgroup_position_in_grid.y, i.threadgroup_position_in_grid.z,
                     i.thread_index_in_threadgroup, i.simdgroup_index_in_threadgroup, i.thread_index_in_simdgroup);
    }
    std::fprintf(stderr, "\n");
    std::exit(3);
}

const thread_ids & ids() {
    if (!S.cur) {
        fail("a kernel function was called outside a dispatch");
    }
    return S.cur->ids;
}

const dispatch_stats & last_stats() { return S.stats; }

exchange_result simd_exchange(const char * what, const void * value, size_t size) {
    fiber & f = *S.cur;
    simdgroup & g = S.sgs[f.ids.simdgroup_index_in_threadgroup];
    const int lane = f.ids.thread_index_in_simdgroup;
    const int b = f.gen & 1;
    std::memset(g.buf[b][lane], 0, SLOT_BYTES);
    std::memcpy(g.buf[b][lane], value, size);
    f.st = WAIT_SIMD;
    f.what = what;
    yield_to_scheduler();
    f.gen++;
    return exchange_result{&g.buf[b][0][0], g.active[b], lane};
}

void barrier_simdgroup(const char * what) {
    S.cur->st = WAIT_SG_BARRIER;
    S.cur->what = what;
    yield_to_scheduler();
}

void barrier_threadgroup(const char * what) {
    S.cur->st = WAIT_TG_BARRIER;
    S.cur->what = what;
    yield_to_scheduler();
}

void dispatch_raw(const dispatch_cfg & cfg, body_fn body, void * ctx) {
    const uint3 nt = cfg.threads;
    const uint3 ng = cfg.threadgroups;
    const unsigned n = nt.x*nt.y*nt.z;
    if (n == 0 || n > 1024) {
        fail("threads per threadgroup %u is outside 1..1024", n);
    }
    const unsigned nsg = (n + SIMD_WIDTH - 1)/SIMD_WIDTH;

    const char * env = std::getenv("MSL_EMU_STACK_KB");
    const size_t stack_bytes = (size_t) (env ? std::atoi(env) : 256)*1024;

    S.fibers.assign(n, fiber{});
    S.sgs.assign(nsg, simdgroup{});
    if (S.stacks.size() < (size_t) n*stack_bytes) {
        S.stacks.assign((size_t) n*stack_bytes, 0);
    }
    S.body = body;
    S.body_ctx = ctx;
    S.stats = dispatch_stats{};

    // 4 KiB of slack after the allocation: upstream's flash-attention vec kernel with NE > 1 zeroes
    // its output scratch past the end of the threadgroup memory the host allocates (lanes with
    // ty > 0 in the `zero out so` loop); the GPU tolerates it, the emulator must not corrupt its heap
    std::vector<unsigned char> tgmem(cfg.threadgroup_bytes + 4096);
    std::vector<unsigned> order(n);
    std::mt19937 rng(cfg.seed);

    const unsigned ntg = ng.x*ng.y*ng.z;
    for (unsigned t = 0; t < ntg; ++t) {
        const unsigned tg = cfg.order == ORDER_REVERSE ? ntg - 1 - t : t;
        const uint3 tgpos(tg % ng.x, (tg / ng.x) % ng.y, tg / (ng.x*ng.y));

        std::fill(tgmem.begin(), tgmem.end(), 0xff);
        S.tgmem = tgmem.data();
        S.tg_lo = (uintptr_t) tgmem.data();
        S.tg_hi = S.tg_lo + tgmem.size();

        for (unsigned i = 0; i < n; ++i) {
            fiber & f = S.fibers[i];
            f = fiber{};
            thread_ids & id = f.ids;
            id.threadgroup_position_in_grid   = tgpos;
            id.thread_position_in_threadgroup = uint3(i % nt.x, (i / nt.x) % nt.y, i / (nt.x*nt.y));
            id.thread_position_in_grid        = uint3(tgpos.x*nt.x + id.thread_position_in_threadgroup.x,
                                                      tgpos.y*nt.y + id.thread_position_in_threadgroup.y,
                                                      tgpos.z*nt.z + id.thread_position_in_threadgroup.z);
            id.threads_per_threadgroup        = nt;
            id.threadgroups_per_grid          = ng;
            id.thread_index_in_threadgroup    = i;
            id.thread_index_in_simdgroup      = (ushort) (i % SIMD_WIDTH);
            id.simdgroup_index_in_threadgroup = (ushort) (i / SIMD_WIDTH);
            id.simdgroups_per_threadgroup     = (ushort) nsg;
            f.stack = S.stacks.data() + (size_t) i*stack_bytes;
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp   = f.stack;
            f.ctx.uc_stack.ss_size = stack_bytes;
            f.ctx.uc_link          = &S.sched;
            makecontext(&f.ctx, fiber_entry, 0);
            f.st = RUNNABLE;
            order[i] = i;
        }
        if (cfg.order == ORDER_REVERSE) {
            std::reverse(order.begin(), order.end());
        }

        for (;;) {
            if (cfg.order == ORDER_SHUFFLED) {
                std::shuffle(order.begin(), order.end(), rng);
            }
            for (unsigned k = 0; k < n; ++k) {
                fiber & f = S.fibers[order[k]];
                if (f.st == RUNNABLE) {
                    S.cur = &f;
                    swapcontext(&S.sched, &f.ctx);
                    S.stats.fiber_switches++;
                }
            }
            S.cur = nullptr;

            bool all_done = true;
            bool released = false;
            for (unsigned i = 0; i < n; ++i) {
                all_done = all_done && S.fibers[i].st == DONE;
            }
            if (all_done) {
                break;
            }

            // simd-groups whose lanes have all stopped: one lockstep round of threadgroup-memory accesses
            for (unsigned s = 0; s < nsg; ++s) {
                const unsigned l0 = s*SIMD_WIDTH;
                const unsigned l1 = std::min(n, l0 + SIMD_WIDTH);
                bool any_mem = false;
                for (unsigned i = l0; i < l1; ++i) any_mem = any_mem || S.fibers[i].st == WAIT_MEM;
                if (!any_mem) continue;
                for (unsigned i = l0; i < l1; ++i) if (S.fibers[i].st == WAIT_MEM) S.fibers[i].st = RUNNABLE;
                released = true;
            }
            if (released) continue;

            // simd-groups: release when every lane that has not returned waits at the same thing
            for (unsigned s = 0; s < nsg; ++s) {
                const unsigned l0 = s*SIMD_WIDTH;
                const unsigned l1 = std::min(n, l0 + SIMD_WIDTH);
                int waiting = 0, live = 0, kind = -1;
                const char * what = nullptr;
                for (unsigned i = l0; i < l1; ++i) {
                    const fiber & f = S.fibers[i];
                    if (f.st == DONE) continue;
                    live++;
                    if (f.st == WAIT_SIMD || f.st == WAIT_SG_BARRIER) {
                        if (kind >= 0 && (kind != (int) f.st || std::strcmp(what, f.what) != 0)) {
                            S.cur = const_cast<fiber *>(&f);
                            fail("simd-group divergence: lanes of simd-group %u wait at %s and at %s", s, what, f.what);
                        }
                        kind = f.st;
                        what = f.what;
                        waiting++;
                    }
                }
                if (waiting == 0 || waiting != live) continue;
                uint32_t mask = 0;
                unsigned gen = 0;
                for (unsigned i = l0; i < l1; ++i) {
                    if (S.fibers[i].st != DONE) {
                        mask |= 1u << (i - l0);
                        gen = S.fibers[i].gen;
                    }
                }
                if (kind == WAIT_SIMD) {
                    for (unsigned i = l0; i < l1; ++i) {
                        if (S.fibers[i].st != DONE && S.fibers[i].gen != gen) {
                            S.cur = &S.fibers[i];
                            fail("simd-group exchange out of step (%s)", what);
                        }
                    }
                    S.sgs[s].active[gen & 1] = mask;
                    S.stats.simd_exchanges++;
                } else {
                    S.stats.barriers++;
                }
                for (unsigned i = l0; i < l1; ++i) {
                    if (S.fibers[i].st != DONE) S.fibers[i].st = RUNNABLE;
                }
                released = true;
            }
            if (released) continue;

            // threadgroup barrier: every thread must be there
            unsigned at_tg = 0, done = 0;
            for (unsigned i = 0; i < n; ++i) {
                at_tg += S.fibers[i].st == WAIT_TG_BARRIER;
                done  += S.fibers[i].st == DONE;
            }
            if (at_tg > 0 && at_tg + done == n) {
                if (done > 0) {
                    fail("threadgroup_barrier reached by %u of %u threads; the other %u returned before it "
                         "(threadgroup %u,%u,%u)", at_tg, n, done, tgpos.x, tgpos.y, tgpos.z);
                }
                for (unsigned i = 0; i < n; ++i) S.fibers[i].st = RUNNABLE;
                S.stats.barriers++;
                continue;
            }

            // nothing can move: describe where everybody is
            std::fprintf(stderr, "msl-emu: deadlock in threadgroup %u,%u,%u:\n", tgpos.x, tgpos.y, tgpos.z);
            for (unsigned i = 0; i < n; ++i) {
                const fiber & f = S.fibers[i];
                std::fprintf(stderr, "  thread %u (simd-group %u lane %u): %s%s%s\n", i, i / SIMD_WIDTH, i % SIMD_WIDTH,
                             state_name(f.st), f.what ? " " : "", f.what ? f.what : "");
            }
            fail("deadlock: threads wait at different barriers or simd-group functions");
        }
        S.stats.threadgroups++;
    }
    S.cur = nullptr;
}

} // namespace msl_emu
