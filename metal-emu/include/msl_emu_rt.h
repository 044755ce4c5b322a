// The emulator's runtime as a kernel sees it: the thread's position, the threadgroup and
// simd-group barriers, and the simd-group exchange under the simd_* functions.
//
// Each thread of a threadgroup is a fiber (runtime.cpp). A fiber runs until it reaches a
// barrier or a simd-group function; a barrier releases when every thread of the threadgroup
// (or of the simd-group) has reached it, a simd-group function when all 32 lanes of the
// simd-group have. Lanes that reach different simd-group functions, or a barrier that only
// some threads reach, stop the run with an error naming the place.
#pragma once

#include "msl_emu_types.h"

namespace msl_emu {

constexpr int SIMD_WIDTH = 32;
constexpr int SLOT_BYTES = 64;   // the largest value a simd-group function carries (16 floats)

struct thread_ids {
    uint3  threadgroup_position_in_grid;
    uint3  thread_position_in_threadgroup;
    uint3  thread_position_in_grid;
    uint3  threads_per_threadgroup;
    uint3  threadgroups_per_grid;
    uint   thread_index_in_threadgroup;
    ushort thread_index_in_simdgroup;
    ushort simdgroup_index_in_threadgroup;
    ushort simdgroups_per_threadgroup;
};

// the ids of the calling fiber
const thread_ids & ids();

// simd-group exchange: deposits this lane's value, waits for all lanes of the simd-group,
// returns the 32 slots (SLOT_BYTES apart) and the mask of lanes that took part
struct exchange_result {
    const unsigned char * slots;
    uint32_t active;
    int lane;
};
exchange_result simd_exchange(const char * what, const void * value, size_t size);

void barrier_threadgroup(const char * what);
void barrier_simdgroup(const char * what);

[[noreturn]] void fail(const char * fmt, ...);

template <typename T> inline const T & slot(const exchange_result & r, int lane) {
    if (lane < 0 || lane >= SIMD_WIDTH || !(r.active & (1u << lane))) {
        fail("simd-group function read lane %d, which is not active (mask 0x%08x)", lane, r.active);
    }
    return *(const T *) (r.slots + lane*SLOT_BYTES);
}

template <typename T> inline exchange_result exchange(const char * what, const T & x) {
    static_assert(sizeof(T) <= SLOT_BYTES, "simd-group value too large for the emulator");
    return simd_exchange(what, &x, sizeof(T));
}

// element-wise helpers over scalars and vectors
template <typename T> struct lanes_of { using elem = T; static constexpr int n = 1; };
template <typename T, int N, bool P> struct lanes_of<vec<T, N, P>> { using elem = T; static constexpr int n = N; };
template <typename T> inline typename lanes_of<T>::elem & comp(T & x, int i) {
    if constexpr (lanes_of<T>::n == 1) { (void) i; return x; } else { return x.v[i]; }
}
template <typename T> inline const typename lanes_of<T>::elem & comp(const T & x, int i) {
    if constexpr (lanes_of<T>::n == 1) { (void) i; return x; } else { return x.v[i]; }
}

// reductions combine the lanes as a butterfly (pairs at distance 1, 2, 4, ...), so every lane
// gets the same value; inactive lanes are left out
template <typename T, typename F> inline T reduce(const char * what, const T & x, F op) {
    const exchange_result r = exchange(what, x);
    T acc[SIMD_WIDTH];
    bool has[SIMD_WIDTH];
    for (int l = 0; l < SIMD_WIDTH; ++l) {
        has[l] = (r.active >> l) & 1u;
        if (has[l]) acc[l] = *(const T *) (r.slots + l*SLOT_BYTES);
    }
    for (int d = 1; d < SIMD_WIDTH; d <<= 1) {
        for (int l = 0; l < SIMD_WIDTH; l += 2*d) {
            if (has[l] && has[l + d]) {
                for (int i = 0; i < lanes_of<T>::n; ++i) comp(acc[l], i) = op(comp(acc[l], i), comp(acc[l + d], i));
            } else if (has[l + d]) {
                acc[l] = acc[l + d];
                has[l] = true;
            }
        }
    }
    return acc[0];
}

} // namespace msl_emu

namespace metal {

enum class mem_flags : int { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4, mem_threadgroup_imageblock = 8 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags) ((int) a | (int) b); }

inline void threadgroup_barrier(mem_flags) { msl_emu::barrier_threadgroup("threadgroup_barrier"); }
inline void simdgroup_barrier(mem_flags)   { msl_emu::barrier_simdgroup("simdgroup_barrier"); }

template <typename T> inline T simd_sum(T x) {
    using E = typename msl_emu::lanes_of<T>::elem;
    return msl_emu::reduce("simd_sum", x, [](E a, E b) { return E(a + b); });
}
template <typename T> inline T simd_product(T x) {
    using E = typename msl_emu::lanes_of<T>::elem;
    return msl_emu::reduce("simd_product", x, [](E a, E b) { return E(a * b); });
}
template <typename T> inline T simd_max(T x) {
    using E = typename msl_emu::lanes_of<T>::elem;
    return msl_emu::reduce("simd_max", x, [](E a, E b) { return a > b ? a : b; });
}
template <typename T> inline T simd_min(T x) {
    using E = typename msl_emu::lanes_of<T>::elem;
    return msl_emu::reduce("simd_min", x, [](E a, E b) { return a < b ? a : b; });
}
template <typename T> inline T simd_and(T x) {
    using E = typename msl_emu::lanes_of<T>::elem;
    return msl_emu::reduce("simd_and", x, [](E a, E b) { return E(a & b); });
}
template <typename T> inline T simd_or(T x) {
    using E = typename msl_emu::lanes_of<T>::elem;
    return msl_emu::reduce("simd_or", x, [](E a, E b) { return E(a | b); });
}
inline bool simd_any(bool x) { return msl_emu::reduce("simd_any", x, [](bool a, bool b) { return a || b; }); }
inline bool simd_all(bool x) { return msl_emu::reduce("simd_all", x, [](bool a, bool b) { return a && b; }); }

template <typename T> inline T simd_shuffle(T x, ushort lane) {
    const msl_emu::exchange_result r = msl_emu::exchange("simd_shuffle", x);
    return msl_emu::slot<T>(r, lane);
}
template <typename T> inline T simd_broadcast(T x, ushort lane) {
    const msl_emu::exchange_result r = msl_emu::exchange("simd_broadcast", x);
    return msl_emu::slot<T>(r, lane);
}
template <typename T> inline T simd_broadcast_first(T x) {
    const msl_emu::exchange_result r = msl_emu::exchange("simd_broadcast_first", x);
    for (int l = 0; l < msl_emu::SIMD_WIDTH; ++l) if ((r.active >> l) & 1u) return msl_emu::slot<T>(r, l);
    return x;
}
// lanes whose source lies outside the simd-group keep their own value (MSL)
template <typename T> inline T simd_shuffle_down(T x, ushort delta) {
    const msl_emu::exchange_result r = msl_emu::exchange("simd_shuffle_down", x);
    const int src = r.lane + delta;
    return src < msl_emu::SIMD_WIDTH ? msl_emu::slot<T>(r, src) : x;
}
template <typename T> inline T simd_shuffle_up(T x, ushort delta) {
    const msl_emu::exchange_result r = msl_emu::exchange("simd_shuffle_up", x);
    const int src = r.lane - delta;
    return src >= 0 ? msl_emu::slot<T>(r, src) : x;
}
template <typename T> inline T simd_shuffle_xor(T x, ushort mask) {
    const msl_emu::exchange_result r = msl_emu::exchange("simd_shuffle_xor", x);
    return msl_emu::slot<T>(r, r.lane ^ mask);
}
template <typename T> inline T simd_prefix_inclusive_sum(T x) {
    const msl_emu::exchange_result r = msl_emu::exchange("simd_prefix_inclusive_sum", x);
    T s = T(0);
    for (int l = 0; l <= r.lane; ++l) if ((r.active >> l) & 1u) s = T(s + msl_emu::slot<T>(r, l));
    return s;
}
template <typename T> inline T simd_prefix_exclusive_sum(T x) {
    const msl_emu::exchange_result r = msl_emu::exchange("simd_prefix_exclusive_sum", x);
    T s = T(0);
    for (int l = 0; l < r.lane; ++l) if ((r.active >> l) & 1u) s = T(s + msl_emu::slot<T>(r, l));
    return s;
}

} // namespace metal

namespace msl_emu {

// how the scheduler picks the next fiber between synchronisation points; a kernel free of
// races gives the same bytes under every order (the tests run each case under several)
enum schedule_order { ORDER_FORWARD = 0, ORDER_REVERSE = 1, ORDER_SHUFFLED = 2 };

struct dispatch_cfg {
    uint3    threadgroups;        // threadgroups per grid
    uint3    threads;             // threads per threadgroup (x*y*z a multiple of 32, or one partial simd-group)
    size_t   threadgroup_bytes;   // threadgroup memory [[threadgroup(0)]], filled with 0xff before each threadgroup
    int      order;               // schedule_order
    unsigned seed;                // for ORDER_SHUFFLED
};

typedef void (*body_fn)(void * ctx, unsigned char * threadgroup_mem);

// runs body once per thread of every threadgroup, one threadgroup at a time
void dispatch_raw(const dispatch_cfg & cfg, body_fn body, void * ctx);

template <typename F> inline void dispatch(const dispatch_cfg & cfg, F && f) {
    using G = typename std::remove_reference<F>::type;
    dispatch_raw(cfg, [](void * c, unsigned char * m) { (*(G *) c)(m); }, (void *) &f);
}

// counters of the last dispatch
struct dispatch_stats {
    uint64_t threadgroups;
    uint64_t fiber_switches;
    uint64_t simd_exchanges;
    uint64_t barriers;
};
const dispatch_stats & last_stats();

} // namespace msl_emu

// ---------------------------------------------------------------------------------------------
// simd-group matrices, modelled functionally: every lane holds the whole 8x8 matrix; load,
// store and multiply-accumulate are simd-group functions (all lanes must call them together)
// and compute the full result in each lane (products and sums in float, rounded to T at the end)

namespace metal {

template <typename T, int C, int R> struct simdgroup_matrix {
    T m[R][C];   // m[row][col]
    simdgroup_matrix() = default;
    explicit simdgroup_matrix(T v) { for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) m[r][c] = r == c ? v : T(0); }
};

template <typename T, int N> inline simdgroup_matrix<T, N, N> make_filled_simdgroup_matrix(T v) {
    msl_emu::exchange("make_filled_simdgroup_matrix", 0);
    simdgroup_matrix<T, N, N> r;
    for (int i = 0; i < N; ++i) for (int j = 0; j < N; ++j) r.m[i][j] = v;
    return r;
}

template <typename T, typename S>
inline void simdgroup_load(simdgroup_matrix<T, 8, 8> & d, const S * src, ulong elements_per_row = 8,
                           ulong2 origin = ulong2(0, 0), bool transpose = false) {
    msl_emu::exchange("simdgroup_load", 0);
    src += origin.y*elements_per_row + origin.x;
    for (int r = 0; r < 8; ++r)
        for (int c = 0; c < 8; ++c)
            d.m[r][c] = T(transpose ? src[c*elements_per_row + r] : src[r*elements_per_row + c]);
}

template <typename T, typename S>
inline void simdgroup_store(const simdgroup_matrix<T, 8, 8> & a, S * dst, ulong elements_per_row = 8,
                            ulong2 origin = ulong2(0, 0), bool transpose = false) {
    msl_emu::exchange("simdgroup_store", 0);
    dst += origin.y*elements_per_row + origin.x;
    for (int r = 0; r < 8; ++r)
        for (int c = 0; c < 8; ++c)
            (transpose ? dst[c*elements_per_row + r] : dst[r*elements_per_row + c]) = S(a.m[r][c]);
}

template <typename TD, typename TA, typename TB, typename TC>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8> & d, const simdgroup_matrix<TA, 8, 8> & a,
                                          const simdgroup_matrix<TB, 8, 8> & b, const simdgroup_matrix<TC, 8, 8> & c) {
    msl_emu::exchange("simdgroup_multiply_accumulate", 0);
    simdgroup_matrix<TD, 8, 8> r;
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) {
            float s = float(c.m[i][j]);
            for (int k = 0; k < 8; ++k) s += float(a.m[i][k])*float(b.m[k][j]);
            r.m[i][j] = TD(s);
        }
    d = r;
}

template <typename TD, typename TA, typename TB>
inline void simdgroup_multiply(simdgroup_matrix<TD, 8, 8> & d, const simdgroup_matrix<TA, 8, 8> & a,
                               const simdgroup_matrix<TB, 8, 8> & b) {
    simdgroup_multiply_accumulate(d, a, b, simdgroup_matrix<TD, 8, 8>(TD(0)));
}

typedef simdgroup_matrix<half,  8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;

} // namespace metal
