// The Mach virtual-memory calls of ggml's Metal host code (ggml_metal_host_malloc/free). On a
// Mac Foundation.h brings these in (through CoreFoundation); here Foundation.h includes this.
// Written for OSCAR from the public reference (developer.apple.com/documentation/kernel);
// not Apple's header.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int          kern_return_t;
typedef unsigned int mach_port_t;
typedef mach_port_t  vm_map_t;
typedef uintptr_t    vm_address_t;
typedef uintptr_t    vm_size_t;

#define KERN_SUCCESS      0
#define VM_FLAGS_FIXED    0x0000
#define VM_FLAGS_ANYWHERE 0x0001

extern mach_port_t mach_task_self_;
#define mach_task_self() mach_task_self_

kern_return_t vm_allocate(vm_map_t target_task, vm_address_t * address, vm_size_t size, int flags);
kern_return_t vm_deallocate(vm_map_t target_task, vm_address_t address, vm_size_t size);

#ifdef __cplusplus
}
#endif
