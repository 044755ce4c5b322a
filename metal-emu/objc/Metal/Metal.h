// Metal, as far as ggml's Metal host files (ggml-metal-device.m, ggml-metal-context.m,
// ggml-metal-oscar-device.m) use it:
// declarations only, for `clang -fsyntax-only` on Linux (tests/test_metal_host.py). Written for
// OSCAR from the public API reference (developer.apple.com/documentation/metal); not Apple's
// header. Enum values are the documented ones. A selector or type that is not here is a
// compile error in the checked file: add it only after looking it up in the reference.
#pragma once

#include <Foundation/Foundation.h>

NS_ASSUME_NONNULL_BEGIN

@protocol MTLDevice, MTLBuffer, MTLCommandBuffer, MTLCommandQueue, MTLLibrary, MTLFunction, MTLEvent;
@protocol MTLComputePipelineState, MTLComputeCommandEncoder, MTLBlitCommandEncoder, MTLResidencySet;
@class MTLCompileOptions, MTLFunctionConstantValues, MTLResidencySetDescriptor, MTLCaptureDescriptor;

// --- basic types ----------------------------------------------------------------------------

typedef struct {
    NSUInteger width, height, depth;
} MTLSize;

static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
    MTLSize s = { width, height, depth };
    return s;
}

typedef struct {
    NSUInteger x, y, z;
} MTLOrigin;

typedef NS_ENUM(NSInteger, MTLGPUFamily) {
    MTLGPUFamilyApple1  = 1001,
    MTLGPUFamilyApple2  = 1002,
    MTLGPUFamilyApple3  = 1003,
    MTLGPUFamilyApple4  = 1004,
    MTLGPUFamilyApple5  = 1005,
    MTLGPUFamilyApple6  = 1006,
    MTLGPUFamilyApple7  = 1007,
    MTLGPUFamilyApple8  = 1008,
    MTLGPUFamilyApple9  = 1009,
    MTLGPUFamilyMac2    = 2002,
    MTLGPUFamilyCommon1 = 3001,
    MTLGPUFamilyCommon2 = 3002,
    MTLGPUFamilyCommon3 = 3003,
    MTLGPUFamilyMetal3  = 5001,
};

typedef NS_ENUM(NSUInteger, MTLDeviceLocation) {
    MTLDeviceLocationBuiltIn     = 0,
    MTLDeviceLocationSlot        = 1,
    MTLDeviceLocationExternal    = 2,
    MTLDeviceLocationUnspecified = NSUIntegerMax,
};

typedef NS_ENUM(NSUInteger, MTLLanguageVersion) {
    MTLLanguageVersion2_0 = (2 << 16),
    MTLLanguageVersion2_4 = (2 << 16) + 4,
    MTLLanguageVersion3_0 = (3 << 16) + 0,
    MTLLanguageVersion3_1 = (3 << 16) + 1,
    MTLLanguageVersion3_2 = (3 << 16) + 2,
};

typedef NS_ENUM(NSUInteger, MTLCPUCacheMode) {
    MTLCPUCacheModeDefaultCache  = 0,
    MTLCPUCacheModeWriteCombined = 1,
};

typedef NS_ENUM(NSUInteger, MTLStorageMode) {
    MTLStorageModeShared     = 0,
    MTLStorageModeManaged    = 1,
    MTLStorageModePrivate    = 2,
    MTLStorageModeMemoryless = 3,
};

typedef NS_ENUM(NSUInteger, MTLHazardTrackingMode) {
    MTLHazardTrackingModeDefault   = 0,
    MTLHazardTrackingModeUntracked = 1,
    MTLHazardTrackingModeTracked   = 2,
};

// the resource options combine a CPU cache mode, a storage mode (shifted by 4) and a hazard
// tracking mode (shifted by 8)
typedef NS_OPTIONS(NSUInteger, MTLResourceOptions) {
    MTLResourceCPUCacheModeDefaultCache  = MTLCPUCacheModeDefaultCache  << 0,
    MTLResourceCPUCacheModeWriteCombined = MTLCPUCacheModeWriteCombined << 0,
    MTLResourceStorageModeShared         = MTLStorageModeShared     << 4,
    MTLResourceStorageModeManaged        = MTLStorageModeManaged    << 4,
    MTLResourceStorageModePrivate        = MTLStorageModePrivate    << 4,
    MTLResourceStorageModeMemoryless     = MTLStorageModeMemoryless << 4,
    MTLResourceHazardTrackingModeDefault   = MTLHazardTrackingModeDefault   << 8,
    MTLResourceHazardTrackingModeUntracked = MTLHazardTrackingModeUntracked << 8,
    MTLResourceHazardTrackingModeTracked   = MTLHazardTrackingModeTracked   << 8,
};

typedef NS_ENUM(NSUInteger, MTLDataType) {
    MTLDataTypeNone   = 0,
    MTLDataTypeFloat  = 3,
    MTLDataTypeHalf   = 16,
    MTLDataTypeInt    = 29,
    MTLDataTypeUInt   = 33,
    MTLDataTypeShort  = 37,
    MTLDataTypeUShort = 41,
    MTLDataTypeChar   = 45,
    MTLDataTypeUChar  = 49,
    MTLDataTypeBool   = 53,
};

typedef NS_ENUM(NSUInteger, MTLDispatchType) {
    MTLDispatchTypeSerial     = 0,
    MTLDispatchTypeConcurrent = 1,
};

typedef NS_OPTIONS(NSUInteger, MTLBarrierScope) {
    MTLBarrierScopeBuffers       = 1 << 0,
    MTLBarrierScopeTextures      = 1 << 1,
    MTLBarrierScopeRenderTargets = 1 << 2,
};

typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus) {
    MTLCommandBufferStatusNotEnqueued = 0,
    MTLCommandBufferStatusEnqueued    = 1,
    MTLCommandBufferStatusCommitted   = 2,
    MTLCommandBufferStatusScheduled   = 3,
    MTLCommandBufferStatusCompleted   = 4,
    MTLCommandBufferStatusError       = 5,
};

// --- resources ------------------------------------------------------------------------------

@protocol MTLAllocation <NSObject>
@property (readonly) NSUInteger allocatedSize;
@end

// a resource is an allocation since macOS 15 (what a residency set holds)
@protocol MTLResource <MTLAllocation>
@property (nullable, copy, atomic) NSString * label;
@property (readonly) id<MTLDevice> device;
@property (readonly) MTLCPUCacheMode cpuCacheMode;
@property (readonly) MTLStorageMode storageMode;
@property (readonly) MTLResourceOptions resourceOptions;
@end

@protocol MTLBuffer <MTLResource>
@property (readonly) NSUInteger length;
- (void *)contents NS_RETURNS_INNER_POINTER;
- (void)didModifyRange:(NSRange)range;
@property (readonly) uint64_t gpuAddress;
@end

// --- libraries, functions, pipelines --------------------------------------------------------

@interface MTLCompileOptions : NSObject <NSCopying>
@property (nullable, readwrite, copy, nonatomic) NSDictionary<NSString *, NSObject *> * preprocessorMacros;
@property (readwrite, nonatomic) BOOL fastMathEnabled;
@property (readwrite, nonatomic) MTLLanguageVersion languageVersion;
@end

@interface MTLFunctionConstantValues : NSObject <NSCopying>
- (void)setConstantValue:(const void *)value type:(MTLDataType)type atIndex:(NSUInteger)index;
- (void)setConstantValues:(const void *)values type:(MTLDataType)type withRange:(NSRange)range;
- (void)setConstantValue:(const void *)value type:(MTLDataType)type withName:(NSString *)name;
- (void)reset;
@end

@protocol MTLFunction <NSObject>
@property (nullable, copy, atomic) NSString * label;
@property (readonly) id<MTLDevice> device;
@property (readonly) NSString * name;
@end

@protocol MTLLibrary <NSObject>
@property (nullable, copy, atomic) NSString * label;
@property (readonly) id<MTLDevice> device;
@property (readonly) NSArray<NSString *> * functionNames;
- (nullable id<MTLFunction>)newFunctionWithName:(NSString *)functionName;
- (nullable id<MTLFunction>)newFunctionWithName:(NSString *)name
                                 constantValues:(MTLFunctionConstantValues *)constantValues
                                          error:(__autoreleasing NSError * _Nullable * _Nullable)error;
@end

@protocol MTLComputePipelineState <NSObject>
@property (nullable, readonly) NSString * label;
@property (readonly) id<MTLDevice> device;
@property (readonly) NSUInteger maxTotalThreadsPerThreadgroup;
@property (readonly) NSUInteger threadExecutionWidth;
@property (readonly) NSUInteger staticThreadgroupMemoryLength;
@end

// --- events ---------------------------------------------------------------------------------

@protocol MTLEvent <NSObject>
@property (nullable, readonly) id<MTLDevice> device;
@property (nullable, copy, atomic) NSString * label;
@end

@protocol MTLSharedEvent <MTLEvent>
@property (readwrite) uint64_t signaledValue;
- (BOOL)waitUntilSignaledValue:(uint64_t)value timeoutMS:(uint64_t)milliseconds;
@end

// --- residency sets (macOS 15) --------------------------------------------------------------

@interface MTLResidencySetDescriptor : NSObject <NSCopying>
@property (nullable, copy, nonatomic) NSString * label;
@property (nonatomic) NSUInteger initialCapacity;
@end

@protocol MTLResidencySet <NSObject>
@property (readonly) id<MTLDevice> device;
@property (nullable, readonly) NSString * label;
@property (readonly) uint64_t allocatedSize;
@property (readonly) NSUInteger allocationCount;
- (void)requestResidency;
- (void)endResidency;
- (void)addAllocation:(id<MTLAllocation>)allocation;
- (void)addAllocations:(const id<MTLAllocation> _Nonnull [_Nonnull])allocations count:(NSUInteger)count;
- (void)removeAllocation:(id<MTLAllocation>)allocation;
- (void)removeAllAllocations;
- (BOOL)containsAllocation:(id<MTLAllocation>)anAllocation;
- (void)commit;
@end

// --- command encoders -----------------------------------------------------------------------

@protocol MTLCommandEncoder <NSObject>
@property (readonly) id<MTLDevice> device;
@property (nullable, copy, atomic) NSString * label;
- (void)endEncoding;
- (void)insertDebugSignpost:(NSString *)string;
- (void)pushDebugGroup:(NSString *)string;
- (void)popDebugGroup;
@end

@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
@property (readonly) MTLDispatchType dispatchType;
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
- (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)setBuffer:(nullable id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setBufferOffset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)dispatchThreads:(MTLSize)threadsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)memoryBarrierWithScope:(MTLBarrierScope)scope;
- (void)useResource:(id<MTLResource>)resource usage:(NSUInteger)usage;
@end

@protocol MTLBlitCommandEncoder <MTLCommandEncoder>
- (void)copyFromBuffer:(id<MTLBuffer>)sourceBuffer
          sourceOffset:(NSUInteger)sourceOffset
              toBuffer:(id<MTLBuffer>)destinationBuffer
     destinationOffset:(NSUInteger)destinationOffset
                  size:(NSUInteger)size;
- (void)fillBuffer:(id<MTLBuffer>)buffer range:(NSRange)range value:(uint8_t)value;
@end

// --- command buffers and queues -------------------------------------------------------------

typedef void (^MTLCommandBufferHandler)(id<MTLCommandBuffer> buffer);

@protocol MTLCommandBuffer <NSObject>
@property (readonly) id<MTLDevice> device;
@property (readonly) id<MTLCommandQueue> commandQueue;
@property (nullable, copy, atomic) NSString * label;
@property (readonly) MTLCommandBufferStatus status;
@property (nullable, readonly) NSError * error;
@property (readonly) BOOL retainedReferences;
- (void)enqueue;
- (void)commit;
- (void)addScheduledHandler:(MTLCommandBufferHandler)block;
- (void)addCompletedHandler:(MTLCommandBufferHandler)block;
- (void)waitUntilScheduled;
- (void)waitUntilCompleted;
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoder;
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoderWithDispatchType:(MTLDispatchType)dispatchType;
- (nullable id<MTLBlitCommandEncoder>)blitCommandEncoder;
- (void)encodeWaitForEvent:(id<MTLEvent>)event value:(uint64_t)value;
- (void)encodeSignalEvent:(id<MTLEvent>)event value:(uint64_t)value;
- (void)useResidencySet:(id<MTLResidencySet>)residencySet;
- (void)pushDebugGroup:(NSString *)string;
- (void)popDebugGroup;
@end

@protocol MTLCommandQueue <NSObject>
@property (nullable, copy, atomic) NSString * label;
@property (readonly) id<MTLDevice> device;
- (nullable id<MTLCommandBuffer>)commandBuffer;
- (nullable id<MTLCommandBuffer>)commandBufferWithUnretainedReferences;
- (void)addResidencySet:(id<MTLResidencySet>)residencySet;
- (void)removeResidencySet:(id<MTLResidencySet>)residencySet;
@end

// --- the device -----------------------------------------------------------------------------

@protocol MTLDevice <NSObject>
@property (readonly) NSString * name;
@property (readonly) uint64_t registryID;
@property (readonly) MTLDeviceLocation location;
@property (readonly) NSUInteger locationNumber;
@property (readonly, getter=isLowPower) BOOL lowPower;
@property (readonly, getter=isRemovable) BOOL removable;
@property (readonly) BOOL hasUnifiedMemory;
@property (readonly) uint64_t recommendedMaxWorkingSetSize;
@property (readonly) NSUInteger currentAllocatedSize;
@property (readonly) NSUInteger maxThreadgroupMemoryLength;
@property (readonly) MTLSize maxThreadsPerThreadgroup;
@property (readonly) NSUInteger maxBufferLength;
- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily;
- (nullable id<MTLCommandQueue>)newCommandQueue;
- (nullable id<MTLCommandQueue>)newCommandQueueWithMaxCommandBufferCount:(NSUInteger)maxCommandBufferCount;
- (nullable id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytes:(const void *)pointer length:(NSUInteger)length options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytesNoCopy:(void *)pointer
                                            length:(NSUInteger)length
                                           options:(MTLResourceOptions)options
                                       deallocator:(void (^ _Nullable)(void * pointer, NSUInteger length))deallocator;
- (nullable id<MTLLibrary>)newDefaultLibrary;
- (nullable id<MTLLibrary>)newDefaultLibraryWithBundle:(NSBundle *)bundle error:(__autoreleasing NSError * _Nullable * _Nullable)error;
- (nullable id<MTLLibrary>)newLibraryWithURL:(NSURL *)url error:(__autoreleasing NSError * _Nullable * _Nullable)error;
- (nullable id<MTLLibrary>)newLibraryWithSource:(NSString *)source
                                        options:(nullable MTLCompileOptions *)options
                                          error:(__autoreleasing NSError * _Nullable * _Nullable)error;
- (nullable id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                                                                      error:(__autoreleasing NSError * _Nullable * _Nullable)error;
- (nullable id<MTLEvent>)newEvent;
- (nullable id<MTLSharedEvent>)newSharedEvent;
- (nullable id<MTLResidencySet>)newResidencySetWithDescriptor:(MTLResidencySetDescriptor *)desc
                                                        error:(NSError * _Nullable * _Nullable)error;
@end

MTL_EXTERN id<MTLDevice> _Nullable MTLCreateSystemDefaultDevice(void);
MTL_EXTERN NSArray<id<MTLDevice>> * MTLCopyAllDevices(void);

// --- capture --------------------------------------------------------------------------------

typedef NS_ENUM(NSInteger, MTLCaptureDestination) {
    MTLCaptureDestinationDeveloperTools   = 1,
    MTLCaptureDestinationGPUTraceDocument = 2,
};

@protocol MTLCaptureScope <NSObject>
@property (nullable, copy, atomic) NSString * label;
@property (readonly) id<MTLDevice> device;
- (void)beginScope;
- (void)endScope;
@end

@interface MTLCaptureDescriptor : NSObject <NSCopying>
@property (nullable, strong) id captureObject;
@property (nonatomic) MTLCaptureDestination destination;
@property (nullable, copy, nonatomic) NSURL * outputURL;
@end

@interface MTLCaptureManager : NSObject
@property (readonly) BOOL isCapturing;
+ (MTLCaptureManager *)sharedCaptureManager;
- (id<MTLCaptureScope>)newCaptureScopeWithDevice:(id<MTLDevice>)device;
- (id<MTLCaptureScope>)newCaptureScopeWithCommandQueue:(id<MTLCommandQueue>)commandQueue;
- (BOOL)startCaptureWithDescriptor:(MTLCaptureDescriptor *)descriptor error:(__autoreleasing NSError * _Nullable * _Nullable)error;
- (void)stopCapture;
@end

NS_ASSUME_NONNULL_END
