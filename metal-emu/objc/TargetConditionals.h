// The target of the check (tests/test_metal_host.py): macOS on Apple silicon, with a macOS 15
// SDK, so that ggml's newest code paths (residency sets, the Metal 4 tensor API switch) are
// compiled. Written for OSCAR; not Apple's header. The macros are those of Apple's
// TargetConditionals.h and Availability.h as the public documentation names them.
#pragma once

#define TARGET_OS_MAC        1
#define TARGET_OS_OSX        1
#define TARGET_OS_IPHONE     0
#define TARGET_OS_IOS        0
#define TARGET_OS_TV         0
#define TARGET_OS_WATCH      0
#define TARGET_OS_SIMULATOR  0
#define TARGET_CPU_ARM64     1
#define TARGET_CPU_X86_64    0

#ifndef __MAC_OS_X_VERSION_MAX_ALLOWED
#  define __MAC_OS_X_VERSION_MAX_ALLOWED 150000
#endif
#ifndef __MAC_OS_X_VERSION_MIN_REQUIRED
#  define __MAC_OS_X_VERSION_MIN_REQUIRED 130000
#endif
