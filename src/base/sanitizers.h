// Whether this translation unit is built with AddressSanitizer or
// ThreadSanitizer (GCC defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__,
// clang answers __has_feature). Code that exists only to keep a sanitized
// run's reports exact, and tests that cover the same code with fewer rounds
// under ThreadSanitizer (each memory access and hand-off many times slower),
// say so with these.
#pragma once

namespace lanes {

#if defined(__has_feature)
#define LNS_HAS_FEATURE(x) __has_feature(x)
#else
#define LNS_HAS_FEATURE(x) 0
#endif

#if defined(__SANITIZE_ADDRESS__) || LNS_HAS_FEATURE(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__) || LNS_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kUnderThreadSanitizer = true;
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif

#undef LNS_HAS_FEATURE

}  // namespace lanes
