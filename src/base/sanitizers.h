// Whether this translation unit is built with AddressSanitizer (GCC defines
// __SANITIZE_ADDRESS__, clang answers __has_feature): code that exists only to
// keep a sanitized run's reports exact says so with this.
#pragma once

namespace lanes {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

}  // namespace lanes
