// The subset of the Metal Shading Language that ggml's Metal kernels use, modelled in C++17:
// the half type, vector and matrix types, the math and conversion functions, and the
// simd-group functions and barriers (which call the emulator's runtime, msl_emu_rt.h).
//
// Every operation on `half` rounds its result to half (round to nearest even), as the GPU does;
// conversions between vector types are explicit, as in MSL, so that a kernel that mixes
// half4 and float4 without a cast fails to compile here as it would on a Mac.
#pragma once

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace msl_emu {

// ---------------------------------------------------------------------------------------------
// half: IEEE binary16, stored as 16 bits, arithmetic in float rounded back after every op

inline uint16_t f32_to_f16_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax   = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {                              // inf or NaN
        return (uint16_t) (sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    }
    if (ax >= 0x477ff000u) {                              // rounds to >= 65520: overflow to inf
        return (uint16_t) (sign | 0x7c00u);
    }
    if (ax < 0x38800000u) {                               // below the smallest normal half
        if (ax < 0x33000000u) {                           // below half of the smallest subnormal
            return (uint16_t) sign;
        }
        // |x| = m * 2^(e - 150); the subnormal code is |x| / 2^-24, rounded to nearest even
        const uint32_t e     = ax >> 23;
        const uint32_t m     = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e;
        const uint32_t drop  = m & ((1u << shift) - 1u);
        const uint32_t halfw = 1u << (shift - 1);
        uint32_t q = m >> shift;
        if (drop > halfw || (drop == halfw && (q & 1u))) {
            q++;
        }
        return (uint16_t) (sign | q);
    }
    uint32_t       h    = ((ax >> 13) - (112u << 10));    // rebias exponent 127 -> 15
    const uint32_t drop = ax & 0x1fffu;
    if (drop > 0x1000u || (drop == 0x1000u && (h & 1u))) {
        h++;
    }
    return (uint16_t) (sign | h);
}

inline float f16_bits_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t) (h & 0x8000u) << 16;
    const uint32_t e    = (h >> 10) & 0x1fu;
    const uint32_t m    = h & 0x3ffu;
    uint32_t x;
    if (e == 0) {
        if (m == 0) {
            x = sign;
        } else {
            const float f = std::ldexp((float) m, -24);
            std::memcpy(&x, &f, 4);
            x |= sign;
        }
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13);
    } else {
        x = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

struct half {
    uint16_t bits;

    half() = default;
    half(float f) : bits(f32_to_f16_bits(f)) {}
    half(double f) : bits(f32_to_f16_bits((float) f)) {}
    template <typename I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>
    half(I i) : bits(f32_to_f16_bits((float) i)) {}

    operator float() const { return f16_bits_to_f32(bits); }

    static half from_bits(uint16_t b) { half h; h.bits = b; return h; }

    half & operator+=(half o) { *this = half(float(*this) + float(o)); return *this; }
    half & operator-=(half o) { *this = half(float(*this) - float(o)); return *this; }
    half & operator*=(half o) { *this = half(float(*this) * float(o)); return *this; }
    half & operator/=(half o) { *this = half(float(*this) / float(o)); return *this; }
    half operator-() const { return from_bits((uint16_t) (bits ^ 0x8000u)); }
    half operator+() const { return *this; }
};
static_assert(sizeof(half) == 2, "half must be 2 bytes");

// half op half -> half; half op float -> float; half op int -> half (as MSL's usual conversions)
#define MSL_EMU_HALF_OP(OP)                                                                      \
    inline half operator OP(half a, half b) { return half(float(a) OP float(b)); }              \
    inline float operator OP(half a, float b) { return float(a) OP b; }                         \
    inline float operator OP(float a, half b) { return a OP float(b); }                         \
    inline float operator OP(half a, double b) { return float(a) OP (float) b; }                \
    inline float operator OP(double a, half b) { return (float) a OP float(b); }                \
    template <typename I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>   \
    inline half operator OP(half a, I b) { return half(float(a) OP (float) b); }                \
    template <typename I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>   \
    inline half operator OP(I a, half b) { return half((float) a OP float(b)); }
MSL_EMU_HALF_OP(+)
MSL_EMU_HALF_OP(-)
MSL_EMU_HALF_OP(*)
MSL_EMU_HALF_OP(/)
#undef MSL_EMU_HALF_OP

#define MSL_EMU_HALF_CMP(OP)                                                                     \
    inline bool operator OP(half a, half b) { return float(a) OP float(b); }                    \
    inline bool operator OP(half a, float b) { return float(a) OP b; }                          \
    inline bool operator OP(float a, half b) { return a OP float(b); }                          \
    inline bool operator OP(half a, double b) { return float(a) OP (float) b; }                 \
    inline bool operator OP(double a, half b) { return (float) a OP float(b); }                 \
    template <typename I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>   \
    inline bool operator OP(half a, I b) { return float(a) OP (float) b; }                      \
    template <typename I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>   \
    inline bool operator OP(I a, half b) { return (float) a OP float(b); }
MSL_EMU_HALF_CMP(<)
MSL_EMU_HALF_CMP(>)
MSL_EMU_HALF_CMP(<=)
MSL_EMU_HALF_CMP(>=)
MSL_EMU_HALF_CMP(==)
MSL_EMU_HALF_CMP(!=)
#undef MSL_EMU_HALF_CMP

template <typename T> struct is_scalar_t : std::integral_constant<bool, std::is_arithmetic<T>::value> {};
template <> struct is_scalar_t<half> : std::true_type {};

// ---------------------------------------------------------------------------------------------
// vectors: vec<T, N> (N = 2, 3, 4), MSL's alignment (a 3-vector takes the room of 4);
// packed_* types have the element's alignment

template <typename T, int N, bool P> struct vec_storage;

#define MSL_EMU_ALIGN(T, N, P) alignas((P) ? alignof(T) : sizeof(T) * ((N) == 3 ? 4 : (N)))
template <typename T, bool P> struct MSL_EMU_ALIGN(T, 2, P) vec_storage<T, 2, P> {
    union { T v[2]; struct { T x, y; }; struct { T r, g; }; };
};
template <typename T> struct vec_storage<T, 3, false> {
    union { T v[4]; struct { T x, y, z; }; struct { T r, g, b; }; };
} __attribute__((aligned(sizeof(T) * 4)));
template <typename T> struct vec_storage<T, 3, true> {
    union { T v[3]; struct { T x, y, z; }; struct { T r, g, b; }; };
};
template <typename T, bool P> struct MSL_EMU_ALIGN(T, 4, P) vec_storage<T, 4, P> {
    union { T v[4]; struct { T x, y, z, w; }; struct { T r, g, b, a; }; };
};
#undef MSL_EMU_ALIGN

template <typename T, int N, bool P = false> struct vec;

template <typename X> struct vec_traits { static constexpr int n = 1; };
template <typename T, int N, bool P> struct vec_traits<vec<T, N, P>> { static constexpr int n = N; };

template <typename T, int N, bool P> struct vec : vec_storage<T, N, P> {
    using elem = T;
    static constexpr int size = N;

    vec() = default;

    // scalar -> every component (implicit, as in MSL)
    template <typename S, typename std::enable_if<is_scalar_t<S>::value, int>::type = 0>
    vec(S s) { for (int i = 0; i < N; ++i) this->v[i] = T(s); }

    // components and sub-vectors, N in total
    template <typename A0, typename A1, typename... As>
    vec(A0 a0, A1 a1, As... as) {
        static_assert(vec_traits<A0>::n + vec_traits<A1>::n + (0 + ... + vec_traits<As>::n) == N,
                      "vector constructor: the components do not add up to the vector's size");
        int k = 0;
        put(k, a0); put(k, a1); (put(k, as), ...);
    }

    // packed <-> unpacked of the same type: implicit
    vec(const vec<T, N, !P> & o) { for (int i = 0; i < N; ++i) this->v[i] = o.v[i]; }

    // other element type: explicit, as MSL demands (float4(h4), (float4) h4)
    template <typename U, bool Q, typename std::enable_if<!std::is_same<U, T>::value, int>::type = 0>
    explicit vec(const vec<U, N, Q> & o) { for (int i = 0; i < N; ++i) this->v[i] = T(o.v[i]); }

    T & operator[](int i) { return this->v[i]; }
    const T & operator[](int i) const { return this->v[i]; }

private:
    template <typename S> void put(int & k, S s) {
        if constexpr (vec_traits<S>::n == 1) {
            this->v[k++] = T(s);
        } else {
            for (int i = 0; i < vec_traits<S>::n; ++i) this->v[k++] = T(s.v[i]);
        }
    }
};

#define MSL_EMU_VEC_BINOP(OP)                                                                    \
    template <typename T, int N, bool P, bool Q>                                                \
    inline vec<T, N> operator OP(const vec<T, N, P> & a, const vec<T, N, Q> & b) {              \
        vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = T(a.v[i] OP b.v[i]); return r;        \
    }                                                                                            \
    template <typename T, int N, bool P, typename S,                                            \
              typename std::enable_if<is_scalar_t<S>::value, int>::type = 0>                    \
    inline vec<T, N> operator OP(const vec<T, N, P> & a, S s) {                                 \
        const T b = T(s); vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = T(a.v[i] OP b); return r; \
    }                                                                                            \
    template <typename T, int N, bool P, typename S,                                            \
              typename std::enable_if<is_scalar_t<S>::value, int>::type = 0>                    \
    inline vec<T, N> operator OP(S s, const vec<T, N, P> & b) {                                 \
        const T a = T(s); vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = T(a OP b.v[i]); return r; \
    }                                                                                            \
    template <typename T, int N, bool P, typename B>                                            \
    inline vec<T, N, P> & operator OP##=(vec<T, N, P> & a, const B & b) {                       \
        a = vec<T, N, P>(a OP b); return a;                                                     \
    }
MSL_EMU_VEC_BINOP(+)
MSL_EMU_VEC_BINOP(-)
MSL_EMU_VEC_BINOP(*)
MSL_EMU_VEC_BINOP(/)
MSL_EMU_VEC_BINOP(%)
MSL_EMU_VEC_BINOP(&)
MSL_EMU_VEC_BINOP(|)
MSL_EMU_VEC_BINOP(^)
MSL_EMU_VEC_BINOP(<<)
MSL_EMU_VEC_BINOP(>>)
#undef MSL_EMU_VEC_BINOP

#define MSL_EMU_VEC_CMP(OP)                                                                      \
    template <typename T, int N, bool P, bool Q>                                                \
    inline vec<bool, N> operator OP(const vec<T, N, P> & a, const vec<T, N, Q> & b) {           \
        vec<bool, N> r; for (int i = 0; i < N; ++i) r.v[i] = a.v[i] OP b.v[i]; return r;        \
    }                                                                                            \
    template <typename T, int N, bool P, typename S,                                            \
              typename std::enable_if<is_scalar_t<S>::value, int>::type = 0>                    \
    inline vec<bool, N> operator OP(const vec<T, N, P> & a, S s) {                              \
        vec<bool, N> r; for (int i = 0; i < N; ++i) r.v[i] = a.v[i] OP T(s); return r;          \
    }
MSL_EMU_VEC_CMP(<)
MSL_EMU_VEC_CMP(>)
MSL_EMU_VEC_CMP(<=)
MSL_EMU_VEC_CMP(>=)
MSL_EMU_VEC_CMP(==)
MSL_EMU_VEC_CMP(!=)
#undef MSL_EMU_VEC_CMP

template <typename T, int N, bool P> inline vec<T, N> operator-(const vec<T, N, P> & a) {
    vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = T(-a.v[i]); return r;
}
template <typename T, int N, bool P> inline vec<T, N> operator+(const vec<T, N, P> & a) { return a; }
template <typename T, int N, bool P> inline vec<T, N> operator~(const vec<T, N, P> & a) {
    vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = T(~a.v[i]); return r;
}

// ---------------------------------------------------------------------------------------------
// matrices: C columns of R-vectors

template <typename T, int C, int R> struct matrix {
    vec<T, R> c[C];
    matrix() = default;
    template <typename S, typename std::enable_if<is_scalar_t<S>::value, int>::type = 0>
    explicit matrix(S s) { for (int i = 0; i < C; ++i) { c[i] = vec<T, R>(T(0)); if (i < R) c[i][i] = T(s); } }
    template <typename U, typename std::enable_if<!std::is_same<U, T>::value, int>::type = 0>
    explicit matrix(const matrix<U, C, R> & o) { for (int i = 0; i < C; ++i) c[i] = vec<T, R>(o.c[i]); }
    vec<T, R> & operator[](int i) { return c[i]; }
    const vec<T, R> & operator[](int i) const { return c[i]; }
};

template <typename T, int C, int R, typename S, typename std::enable_if<is_scalar_t<S>::value, int>::type = 0>
inline matrix<T, C, R> operator*(const matrix<T, C, R> & m, S s) {
    matrix<T, C, R> r; for (int i = 0; i < C; ++i) r.c[i] = m.c[i] * s; return r;
}

} // namespace msl_emu

// ---------------------------------------------------------------------------------------------
// the MSL names

using msl_emu::half;
using msl_emu::matrix;

typedef unsigned char  uchar;
typedef unsigned short ushort;
typedef unsigned int   uint;
typedef unsigned long  ulong;

#define MSL_EMU_VEC_NAMES(NAME, T)                                       \
    typedef msl_emu::vec<T, 2>       NAME##2;                            \
    typedef msl_emu::vec<T, 3>       NAME##3;                            \
    typedef msl_emu::vec<T, 4>       NAME##4;                            \
    typedef msl_emu::vec<T, 2, true> packed_##NAME##2;                   \
    typedef msl_emu::vec<T, 3, true> packed_##NAME##3;                   \
    typedef msl_emu::vec<T, 4, true> packed_##NAME##4;
MSL_EMU_VEC_NAMES(float,  float)
MSL_EMU_VEC_NAMES(half,   msl_emu::half)
MSL_EMU_VEC_NAMES(int,    int)
MSL_EMU_VEC_NAMES(uint,   unsigned int)
MSL_EMU_VEC_NAMES(short,  short)
MSL_EMU_VEC_NAMES(ushort, unsigned short)
MSL_EMU_VEC_NAMES(char,   signed char)
MSL_EMU_VEC_NAMES(uchar,  unsigned char)
MSL_EMU_VEC_NAMES(bool,   bool)
MSL_EMU_VEC_NAMES(long,   long)
MSL_EMU_VEC_NAMES(ulong,  unsigned long)
#undef MSL_EMU_VEC_NAMES

#define MSL_EMU_MAT_NAMES(NAME, T)                  \
    typedef matrix<T, 2, 2> NAME##2x2;              \
    typedef matrix<T, 2, 4> NAME##2x4;              \
    typedef matrix<T, 3, 3> NAME##3x3;              \
    typedef matrix<T, 4, 2> NAME##4x2;              \
    typedef matrix<T, 4, 4> NAME##4x4;
MSL_EMU_MAT_NAMES(float, float)
MSL_EMU_MAT_NAMES(half,  msl_emu::half)
#undef MSL_EMU_MAT_NAMES

// MSL literals: 1.5h, 16.h
inline half operator""h(long double x) { return half((float) x); }
inline half operator""h(unsigned long long x) { return half((float) x); }

#define MAXHALF    65504.0f
#define HALF_MAX   65504.0f
#define M_PI_F     3.14159265358979323846f
#define M_SQRT2_F  1.41421356237309504880f
#define M_LN2_F    0.69314718055994530942f

namespace metal {

using msl_emu::vec;

// elementwise lifting of a unary scalar function
#define MSL_EMU_UNARY(NAME, EXPR)                                                                \
    inline float NAME(float x) { return EXPR; }                                                  \
    inline half NAME(half hx) { const float x = float(hx); return half(EXPR); }                  \
    template <typename T, int N, bool P> inline vec<T, N> NAME(const vec<T, N, P> & a) {         \
        vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = NAME(a.v[i]); return r;                \
    }
MSL_EMU_UNARY(exp,   std::exp(x))
MSL_EMU_UNARY(exp2,  std::exp2(x))
MSL_EMU_UNARY(log,   std::log(x))
MSL_EMU_UNARY(log2,  std::log2(x))
MSL_EMU_UNARY(sqrt,  std::sqrt(x))
MSL_EMU_UNARY(rsqrt, 1.0f/std::sqrt(x))
MSL_EMU_UNARY(fabs,  std::fabs(x))
MSL_EMU_UNARY(floor, std::floor(x))
MSL_EMU_UNARY(ceil,  std::ceil(x))
MSL_EMU_UNARY(round, std::round(x))
MSL_EMU_UNARY(rint,  std::nearbyint(x))
MSL_EMU_UNARY(trunc, std::trunc(x))
MSL_EMU_UNARY(tanh,  std::tanh(x))
MSL_EMU_UNARY(sin,   std::sin(x))
MSL_EMU_UNARY(cos,   std::cos(x))
MSL_EMU_UNARY(erf,   std::erf(x))
MSL_EMU_UNARY(sign,  (x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f)))
#undef MSL_EMU_UNARY

inline int   abs(int x)   { return x < 0 ? -x : x; }
inline float abs(float x) { return std::fabs(x); }
inline half  abs(half x)  { return half(std::fabs(float(x))); }
template <typename T, int N, bool P> inline vec<T, N> abs(const vec<T, N, P> & a) {
    vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = abs(a.v[i]); return r;
}

inline bool isnan(float x) { return std::isnan(x); }
inline bool isinf(float x) { return std::isinf(x); }
inline bool isfinite(float x) { return std::isfinite(x); }

inline float pow(float a, float b)  { return std::pow(a, b); }
inline float powr(float a, float b) { return std::pow(a, b); }
inline float fmod(float a, float b) { return std::fmod(a, b); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline half  fma(half a, half b, half c) { return half(std::fma(float(a), float(b), float(c))); }
template <typename T, int N, bool P>
inline vec<T, N> fma(const vec<T, N, P> & a, const vec<T, N, P> & b, const vec<T, N, P> & c) {
    vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = fma(a.v[i], b.v[i], c.v[i]); return r;
}

// min/max/clamp over one type (MSL has no mixed-type versions)
template <typename T, typename std::enable_if<msl_emu::is_scalar_t<T>::value, int>::type = 0>
inline T max(T a, T b) { return a > b ? a : b; }
template <typename T, typename std::enable_if<msl_emu::is_scalar_t<T>::value, int>::type = 0>
inline T min(T a, T b) { return a < b ? a : b; }
inline float fmax(float a, float b) { return std::fmax(a, b); }
inline float fmin(float a, float b) { return std::fmin(a, b); }
template <typename T, int N, bool P> inline vec<T, N> max(const vec<T, N, P> & a, const vec<T, N, P> & b) {
    vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = max(a.v[i], b.v[i]); return r;
}
template <typename T, int N, bool P> inline vec<T, N> min(const vec<T, N, P> & a, const vec<T, N, P> & b) {
    vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = min(a.v[i], b.v[i]); return r;
}
template <typename T, typename std::enable_if<msl_emu::is_scalar_t<T>::value, int>::type = 0>
inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <typename T, int N, bool P, typename S>
inline vec<T, N> clamp(const vec<T, N, P> & x, S lo, S hi) {
    vec<T, N> r; for (int i = 0; i < N; ++i) r.v[i] = clamp(x.v[i], T(lo), T(hi)); return r;
}
template <typename T> inline T select(T a, T b, bool c) { return c ? b : a; }

template <typename T, int N, bool P, bool Q>
inline T dot(const vec<T, N, P> & a, const vec<T, N, Q> & b) {
    T s = T(0); for (int i = 0; i < N; ++i) s = T(s + a.v[i]*b.v[i]); return s;
}
template <typename T, int N, bool P> inline T length(const vec<T, N, P> & a) { return T(std::sqrt(float(dot(a, a)))); }

template <int N, bool P> inline bool all(const vec<bool, N, P> & a) { for (int i = 0; i < N; ++i) if (!a.v[i]) return false; return true; }
template <int N, bool P> inline bool any(const vec<bool, N, P> & a) { for (int i = 0; i < N; ++i) if (a.v[i]) return true; return false; }

template <typename To, typename From> inline To as_type(const From & f) {
    static_assert(sizeof(To) == sizeof(From), "as_type: the types differ in size");
    To t; std::memcpy((void *) &t, (const void *) &f, sizeof(To)); return t;
}

namespace precise {
using metal::tanh; using metal::exp; using metal::log; using metal::sqrt;
inline float divide(float a, float b) { return a / b; }
}
namespace fast {
using metal::tanh; using metal::exp; using metal::exp2; using metal::log; using metal::sqrt; using metal::rsqrt;
inline float divide(float a, float b) { return a / b; }
}

template <typename A, typename B> struct is_same : std::is_same<A, B> {};
template <typename A, typename B> constexpr bool is_same_v = std::is_same<A, B>::value;

} // namespace metal

using metal::as_type;
