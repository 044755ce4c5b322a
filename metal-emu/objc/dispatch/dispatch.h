// Grand Central Dispatch, as far as ggml's Metal host files use it (see Foundation/Foundation.h).
// Written for OSCAR from the public API reference (developer.apple.com/documentation/dispatch);
// not Apple's header. The objects are opaque pointers, as in a build without ARC.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dispatch_queue_s     * dispatch_queue_t;
typedef struct dispatch_group_s     * dispatch_group_t;
typedef struct dispatch_semaphore_s * dispatch_semaphore_t;
typedef struct dispatch_queue_attr_s * dispatch_queue_attr_t;
typedef void * dispatch_object_t;

typedef uint64_t dispatch_time_t;
#define DISPATCH_TIME_NOW     ((dispatch_time_t) 0)
#define DISPATCH_TIME_FOREVER (~(dispatch_time_t) 0)

typedef void (^dispatch_block_t)(void);

// quality-of-service classes (sys/qos.h)
typedef enum {
    QOS_CLASS_USER_INTERACTIVE = 0x21,
    QOS_CLASS_USER_INITIATED   = 0x19,
    QOS_CLASS_DEFAULT          = 0x15,
    QOS_CLASS_UTILITY          = 0x11,
    QOS_CLASS_BACKGROUND       = 0x09,
    QOS_CLASS_UNSPECIFIED      = 0x00,
} qos_class_t;

#define DISPATCH_QUEUE_PRIORITY_HIGH       2
#define DISPATCH_QUEUE_PRIORITY_DEFAULT    0
#define DISPATCH_QUEUE_PRIORITY_LOW        (-2)
#define DISPATCH_QUEUE_PRIORITY_BACKGROUND INT16_MIN

extern struct dispatch_queue_attr_s _dispatch_queue_attr_concurrent;
#define DISPATCH_QUEUE_SERIAL     ((dispatch_queue_attr_t) 0)
#define DISPATCH_QUEUE_CONCURRENT (&_dispatch_queue_attr_concurrent)
#define DISPATCH_APPLY_AUTO       ((dispatch_queue_t) 0)

dispatch_queue_t dispatch_get_global_queue(intptr_t identifier, uintptr_t flags);
dispatch_queue_t dispatch_get_main_queue(void);
dispatch_queue_t dispatch_queue_create(const char * label, dispatch_queue_attr_t attr);
void dispatch_async(dispatch_queue_t queue, dispatch_block_t block);
void dispatch_sync(dispatch_queue_t queue, dispatch_block_t block);
void dispatch_apply(size_t iterations, dispatch_queue_t queue, void (^block)(size_t iteration));

dispatch_group_t dispatch_group_create(void);
void dispatch_group_async(dispatch_group_t group, dispatch_queue_t queue, dispatch_block_t block);
intptr_t dispatch_group_wait(dispatch_group_t group, dispatch_time_t timeout);
void dispatch_group_enter(dispatch_group_t group);
void dispatch_group_leave(dispatch_group_t group);

dispatch_semaphore_t dispatch_semaphore_create(intptr_t value);
intptr_t dispatch_semaphore_wait(dispatch_semaphore_t dsema, dispatch_time_t timeout);
intptr_t dispatch_semaphore_signal(dispatch_semaphore_t dsema);

dispatch_time_t dispatch_time(dispatch_time_t when, int64_t delta);

// dispatch_object_t is a transparent union of the object types in C; a plain void * here
void dispatch_retain(dispatch_object_t object);
void dispatch_release(dispatch_object_t object);

#ifdef __cplusplus
}
#endif
