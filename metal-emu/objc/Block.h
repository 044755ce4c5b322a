// The blocks runtime calls of ggml's Metal host code (ggml-metal-context.m copies and releases
// its encode block). On a Mac Foundation.h brings this in; here Foundation.h includes it.
// Written for OSCAR from the blocks runtime's public interface; not Apple's header.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

void * _Block_copy(const void * aBlock);
void   _Block_release(const void * aBlock);

// the block's own type comes back, as with Apple's macros
#define Block_copy(...)    ((__typeof(__VA_ARGS__)) _Block_copy((const void *) (__VA_ARGS__)))
#define Block_release(...) _Block_release((const void *) (__VA_ARGS__))

#ifdef __cplusplus
}
#endif
