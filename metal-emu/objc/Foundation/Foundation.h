// Foundation, as far as ggml's Metal host files (ggml-metal-device.m, ggml-metal-context.m,
// ggml-metal-oscar-device.m) use it: declarations only, for `clang -fsyntax-only` on Linux
// (tests/test_metal_host.py).
// Written for OSCAR from the public API reference (developer.apple.com/documentation/
// foundation); not Apple's header. Types follow the 64-bit Apple-silicon ABI (BOOL is bool,
// NSInteger is long). What is not here is a compile error in the checked file: add a
// declaration only after looking it up in the reference.
#pragma once

#include <TargetConditionals.h>
#include <Foundation/NSObjCRuntime.h>
#include <dispatch/dispatch.h>

#include <Block.h>
#include <mach/mach.h>

// the C library headers that Foundation brings in on a Mac (through CoreFoundation)
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

NS_ASSUME_NONNULL_BEGIN

@class NSString, NSArray<ObjectType>, NSDictionary<KeyType, ObjectType>, NSError, NSURL, NSCharacterSet;

// --- NSObject -------------------------------------------------------------------------------

@protocol NSObject
- (BOOL)isEqual:(nullable id)object;
@property (readonly) NSUInteger hash;
- (Class)class;
- (instancetype)self;
- (BOOL)isKindOfClass:(Class)aClass;
- (BOOL)respondsToSelector:(SEL)aSelector;
- (BOOL)conformsToProtocol:(Protocol *)aProtocol;
- (instancetype)retain;
- (oneway void)release;
- (instancetype)autorelease;
- (NSUInteger)retainCount;
@property (readonly, copy) NSString * description;
@end

@protocol NSCopying
- (id)copyWithZone:(nullable void *)zone;
@end

@protocol NSMutableCopying
- (id)mutableCopyWithZone:(nullable void *)zone;
@end

@protocol NSFastEnumeration
- (NSUInteger)countByEnumeratingWithState:(void *)state objects:(id __unsafe_unretained _Nullable [_Nonnull])buffer count:(NSUInteger)len;
@end

@interface NSObject <NSObject>
+ (instancetype)alloc;
+ (instancetype)new;
+ (Class)class;
- (instancetype)init;
- (void)dealloc;
- (id)copy;
- (id)mutableCopy;
@end

// --- NSRange --------------------------------------------------------------------------------

typedef struct _NSRange {
    NSUInteger location;
    NSUInteger length;
} NSRange;

static inline NSRange NSMakeRange(NSUInteger loc, NSUInteger len) {
    NSRange r = { loc, len };
    return r;
}

// --- NSString -------------------------------------------------------------------------------

typedef NSUInteger NSStringEncoding;
enum {
    NSASCIIStringEncoding = 1,
    NSUTF8StringEncoding  = 4,
};

@interface NSString : NSObject <NSCopying, NSMutableCopying>
@property (readonly) NSUInteger length;
@property (nullable, readonly) const char * UTF8String NS_RETURNS_INNER_POINTER;
@property (readonly) int intValue;
@property (readonly) NSInteger integerValue;
@property (readonly) double doubleValue;
@property (readonly) BOOL boolValue;
@property (readonly, copy) NSString * stringByDeletingLastPathComponent;
@property (readonly, copy) NSString * stringByStandardizingPath;
@property (readonly, copy) NSString * lastPathComponent;
@property (readonly, copy) NSString * pathExtension;
+ (instancetype)string;
+ (instancetype)stringWithString:(NSString *)string;
+ (nullable instancetype)stringWithUTF8String:(const char *)nullTerminatedCString;
+ (nullable instancetype)stringWithCString:(const char *)cString encoding:(NSStringEncoding)enc;
+ (instancetype)stringWithFormat:(NSString *)format, ... NS_FORMAT_FUNCTION(1, 2);
+ (nullable instancetype)stringWithContentsOfFile:(NSString *)path encoding:(NSStringEncoding)enc error:(NSError * _Nullable * _Nullable)error;
+ (NSString *)pathWithComponents:(NSArray<NSString *> *)components;
- (instancetype)init;
- (nullable instancetype)initWithBytes:(const void *)bytes length:(NSUInteger)len encoding:(NSStringEncoding)encoding;
- (nullable instancetype)initWithUTF8String:(const char *)nullTerminatedCString;
- (instancetype)initWithFormat:(NSString *)format, ... NS_FORMAT_FUNCTION(1, 2);
- (BOOL)isEqualToString:(NSString *)aString;
- (BOOL)hasPrefix:(NSString *)str;
- (BOOL)hasSuffix:(NSString *)str;
- (BOOL)containsString:(NSString *)str;
- (NSRange)rangeOfString:(NSString *)searchString;
- (NSString *)substringToIndex:(NSUInteger)to;
- (NSString *)substringFromIndex:(NSUInteger)from;
- (NSString *)substringWithRange:(NSRange)range;
- (NSString *)stringByAppendingString:(NSString *)aString;
- (NSString *)stringByAppendingPathComponent:(NSString *)str;
- (nullable NSString *)stringByAppendingPathExtension:(NSString *)str;
- (NSString *)stringByTrimmingCharactersInSet:(NSCharacterSet *)set;
- (NSString *)stringByReplacingOccurrencesOfString:(NSString *)target withString:(NSString *)replacement;
- (NSArray<NSString *> *)componentsSeparatedByString:(NSString *)separator;
@end

@interface NSMutableString : NSString
+ (NSMutableString *)stringWithCapacity:(NSUInteger)capacity;
- (void)appendString:(NSString *)aString;
- (void)appendFormat:(NSString *)format, ... NS_FORMAT_FUNCTION(1, 2);
- (void)setString:(NSString *)aString;
@end

// the class of @"..." literals
@interface NSConstantString : NSString
@end

@interface NSCharacterSet : NSObject <NSCopying, NSMutableCopying>
@property (class, readonly, copy) NSCharacterSet * whitespaceCharacterSet;
@property (class, readonly, copy) NSCharacterSet * whitespaceAndNewlineCharacterSet;
@property (class, readonly, copy) NSCharacterSet * newlineCharacterSet;
+ (NSCharacterSet *)characterSetWithCharactersInString:(NSString *)aString;
@end

@interface NSScanner : NSObject <NSCopying>
@property (readonly, copy) NSString * string;
@property NSUInteger scanLocation;
@property (nullable, copy) NSCharacterSet * charactersToBeSkipped;
@property (getter=isAtEnd, readonly) BOOL atEnd;
+ (instancetype)scannerWithString:(NSString *)string;
- (instancetype)initWithString:(NSString *)string;
- (BOOL)scanString:(NSString *)string intoString:(NSString * _Nullable * _Nullable)result;
- (BOOL)scanUpToString:(NSString *)string intoString:(NSString * _Nullable * _Nullable)result;
- (BOOL)scanInt:(nullable int *)result;
@end

// --- NSNumber -------------------------------------------------------------------------------

@interface NSValue : NSObject <NSCopying>
@end

@interface NSNumber : NSValue
@property (readonly) BOOL boolValue;
@property (readonly) int intValue;
@property (readonly) unsigned int unsignedIntValue;
@property (readonly) NSInteger integerValue;
@property (readonly) NSUInteger unsignedIntegerValue;
@property (readonly) long long longLongValue;
@property (readonly) float floatValue;
@property (readonly) double doubleValue;
// the factories behind @(...) literals
+ (NSNumber *)numberWithChar:(char)value;
+ (NSNumber *)numberWithUnsignedChar:(unsigned char)value;
+ (NSNumber *)numberWithShort:(short)value;
+ (NSNumber *)numberWithUnsignedShort:(unsigned short)value;
+ (NSNumber *)numberWithInt:(int)value;
+ (NSNumber *)numberWithUnsignedInt:(unsigned int)value;
+ (NSNumber *)numberWithLong:(long)value;
+ (NSNumber *)numberWithUnsignedLong:(unsigned long)value;
+ (NSNumber *)numberWithLongLong:(long long)value;
+ (NSNumber *)numberWithUnsignedLongLong:(unsigned long long)value;
+ (NSNumber *)numberWithFloat:(float)value;
+ (NSNumber *)numberWithDouble:(double)value;
+ (NSNumber *)numberWithBool:(BOOL)value;
+ (NSNumber *)numberWithInteger:(NSInteger)value;
+ (NSNumber *)numberWithUnsignedInteger:(NSUInteger)value;
@end

// --- collections ----------------------------------------------------------------------------

@interface NSArray<__covariant ObjectType> : NSObject <NSCopying, NSMutableCopying, NSFastEnumeration>
@property (readonly) NSUInteger count;
@property (nullable, readonly) ObjectType firstObject;
@property (nullable, readonly) ObjectType lastObject;
+ (instancetype)array;
+ (instancetype)arrayWithObject:(ObjectType)anObject;
+ (instancetype)arrayWithObjects:(const ObjectType _Nonnull [_Nonnull])objects count:(NSUInteger)cnt; // @[...]
- (ObjectType)objectAtIndex:(NSUInteger)index;
- (ObjectType)objectAtIndexedSubscript:(NSUInteger)idx;
- (BOOL)containsObject:(ObjectType)anObject;
- (NSUInteger)indexOfObject:(ObjectType)anObject;
- (NSString *)componentsJoinedByString:(NSString *)separator;
@end

@interface NSMutableArray<ObjectType> : NSArray<ObjectType>
+ (instancetype)arrayWithCapacity:(NSUInteger)numItems;
- (instancetype)initWithCapacity:(NSUInteger)numItems;
- (void)addObject:(ObjectType)anObject;
- (void)insertObject:(ObjectType)anObject atIndex:(NSUInteger)index;
- (void)removeObject:(ObjectType)anObject;
- (void)removeObjectAtIndex:(NSUInteger)index;
- (void)removeLastObject;
- (void)removeAllObjects;
- (void)setObject:(ObjectType)obj atIndexedSubscript:(NSUInteger)idx;
@end

@interface NSDictionary<__covariant KeyType, __covariant ObjectType> : NSObject <NSCopying, NSMutableCopying, NSFastEnumeration>
@property (readonly) NSUInteger count;
@property (readonly, copy) NSArray<KeyType> * allKeys;
@property (readonly, copy) NSArray<ObjectType> * allValues;
+ (instancetype)dictionary;
+ (instancetype)dictionaryWithObjects:(const ObjectType _Nonnull [_Nullable])objects
                              forKeys:(const id <NSCopying> _Nonnull [_Nullable])keys
                                count:(NSUInteger)cnt; // @{...}
- (nullable ObjectType)objectForKey:(KeyType)aKey;
- (nullable ObjectType)objectForKeyedSubscript:(KeyType)key;
@end

@interface NSMutableDictionary<KeyType, ObjectType> : NSDictionary<KeyType, ObjectType>
+ (instancetype)dictionaryWithCapacity:(NSUInteger)numItems;
- (instancetype)initWithCapacity:(NSUInteger)numItems;
- (void)setObject:(ObjectType)anObject forKey:(KeyType <NSCopying>)aKey;
- (void)setObject:(nullable ObjectType)obj forKeyedSubscript:(KeyType <NSCopying>)key;
- (void)removeObjectForKey:(KeyType)aKey;
- (void)removeAllObjects;
@end

@interface NSSet<__covariant ObjectType> : NSObject <NSCopying, NSMutableCopying, NSFastEnumeration>
@property (readonly) NSUInteger count;
@property (readonly, copy) NSArray<ObjectType> * allObjects;
+ (instancetype)set;
+ (instancetype)setWithArray:(NSArray<ObjectType> *)array;
+ (instancetype)setWithObject:(ObjectType)object;
- (BOOL)containsObject:(ObjectType)anObject;
- (nullable ObjectType)member:(ObjectType)object;
@end

@interface NSMutableSet<ObjectType> : NSSet<ObjectType>
+ (instancetype)setWithCapacity:(NSUInteger)numItems;
- (void)addObject:(ObjectType)object;
- (void)removeObject:(ObjectType)object;
- (void)removeAllObjects;
@end

// --- NSError --------------------------------------------------------------------------------

typedef NSString * NSErrorDomain;
typedef NSString * NSErrorUserInfoKey;

extern NSErrorUserInfoKey const NSLocalizedDescriptionKey;

@interface NSError : NSObject <NSCopying>
@property (readonly, copy) NSErrorDomain domain;
@property (readonly) NSInteger code;
@property (readonly, copy) NSDictionary<NSErrorUserInfoKey, id> * userInfo;
@property (readonly, copy) NSString * localizedDescription;
+ (instancetype)errorWithDomain:(NSErrorDomain)domain code:(NSInteger)code userInfo:(nullable NSDictionary<NSErrorUserInfoKey, id> *)dict;
- (instancetype)initWithDomain:(NSErrorDomain)domain code:(NSInteger)code userInfo:(nullable NSDictionary<NSErrorUserInfoKey, id> *)dict;
@end

// --- files, bundles, the process ------------------------------------------------------------

@interface NSURL : NSObject <NSCopying>
@property (nullable, readonly, copy) NSString * path;
@property (nullable, readonly, copy) NSString * absoluteString;
+ (NSURL *)fileURLWithPath:(NSString *)path;
+ (NSURL *)fileURLWithPath:(NSString *)path isDirectory:(BOOL)isDir;
+ (nullable instancetype)URLWithString:(NSString *)URLString;
@end

typedef NSString * NSFileAttributeKey;
typedef NSString * NSFileAttributeType;

extern NSFileAttributeKey const NSFileType;
extern NSFileAttributeKey const NSFileSize;
extern NSFileAttributeType const NSFileTypeRegular;
extern NSFileAttributeType const NSFileTypeDirectory;
extern NSFileAttributeType const NSFileTypeSymbolicLink;

@interface NSFileManager : NSObject
@property (class, readonly, strong) NSFileManager * defaultManager;
- (BOOL)fileExistsAtPath:(NSString *)path;
- (BOOL)isReadableFileAtPath:(NSString *)path;
- (nullable NSDictionary<NSFileAttributeKey, id> *)attributesOfItemAtPath:(NSString *)path error:(NSError * _Nullable * _Nullable)error;
- (nullable NSString *)destinationOfSymbolicLinkAtPath:(NSString *)path error:(NSError * _Nullable * _Nullable)error;
@end

@interface NSBundle : NSObject
@property (class, readonly, strong) NSBundle * mainBundle;
@property (readonly, copy) NSString * bundlePath;
@property (nullable, readonly, copy) NSString * resourcePath;
+ (NSBundle *)bundleForClass:(Class)aClass;
+ (nullable instancetype)bundleWithPath:(NSString *)path;
- (nullable NSString *)pathForResource:(nullable NSString *)name ofType:(nullable NSString *)ext;
@end

@interface NSProcessInfo : NSObject
@property (class, readonly, strong) NSProcessInfo * processInfo;
@property (readonly, copy) NSDictionary<NSString *, NSString *> * environment;
@property (readonly, copy) NSArray<NSString *> * arguments;
@property (readonly, copy) NSString * processName;
@property (readonly) int processIdentifier;
@property (readonly) NSUInteger processorCount;
@property (readonly) NSUInteger activeProcessorCount;
@property (readonly) unsigned long long physicalMemory;
@end

// --- locking --------------------------------------------------------------------------------

@protocol NSLocking
- (void)lock;
- (void)unlock;
@end

@interface NSLock : NSObject <NSLocking>
@property (nullable, copy) NSString * name;
- (BOOL)tryLock;
@end

NS_ASSUME_NONNULL_END
