// Whether this test binary runs under ThreadSanitizer, which runs each memory
// access and each thread hand-off many times slower: tests that cover the same
// code with fewer rounds there say so with this flag.
#pragma once

namespace lanes::test {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kUnderThreadSanitizer = true;
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif

}  // namespace lanes::test
