// Whether this translation unit is built with AddressSanitizer (GCC defines
// __SANITIZE_ADDRESS__, clang answers __has_feature): code that exists only to
// keep a sanitized run's reports exact says so with this.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define LANES_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LANES_UNDER_ASAN 1
#endif
#endif
#ifndef LANES_UNDER_ASAN
#define LANES_UNDER_ASAN 0
#endif
