// The base types and macros of Foundation and the Objective-C runtime that ggml's Metal host
// files and our Foundation.h/Metal.h stubs need (see Foundation.h). Written for OSCAR from the
// public API reference; not Apple's header. id, Class, SEL and Protocol come from clang itself
// (-fobjc-runtime=macosx).
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Apple silicon: BOOL is the C bool (it is signed char only on x86-64 macOS)
typedef bool BOOL;
#define YES ((BOOL) 1)
#define NO  ((BOOL) 0)

#ifndef nil
#  if defined(__cplusplus)
#    define nil nullptr
#  else
#    define nil ((void *) 0)
#  endif
#endif
#ifndef Nil
#  define Nil nil
#endif

typedef long          NSInteger;
typedef unsigned long NSUInteger;

#define NSIntegerMax  LONG_MAX
#define NSUIntegerMax ULONG_MAX
#define NSNotFound    ((NSInteger) 0x7fffffffffffffffL)

#if __has_feature(assume_nonnull)
#  define NS_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
#  define NS_ASSUME_NONNULL_END   _Pragma("clang assume_nonnull end")
#else
#  define NS_ASSUME_NONNULL_BEGIN
#  define NS_ASSUME_NONNULL_END
#endif

#define NS_RETURNS_INNER_POINTER __attribute__((objc_returns_inner_pointer))
#define NS_FORMAT_FUNCTION(F, A) __attribute__((format(__NSString__, F, A)))
#define NS_ENUM(T, N)            enum N : T N; enum N : T
#define NS_OPTIONS(T, N)         enum N : T N; enum N : T
#define NS_SWIFT_NAME(x)
#define NS_REFINED_FOR_SWIFT
#define API_AVAILABLE(...)
#define API_UNAVAILABLE(...)
#define API_DEPRECATED(...)
#define MTL_EXTERN extern

@class NSString;
void NSLog(NSString * format, ...) NS_FORMAT_FUNCTION(1, 2);
