// LANES_CPU_CLONES: compile a loop kernel for AVX-512, AVX2 and the baseline,
// the loader picking one per CPU (ifunc): no extra dependency and no per-call
// dispatch. Inner loops of a fixed trip count vectorise at -O2 (GCC's "very
// cheap" cost model); loops over a run-time count do not.
#pragma once

// Not under TSan: the loader runs ifunc resolvers while relocating, before the
// TSan runtime is initialised, and GCC instruments them (SIGSEGV at start-up).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define LANES_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LANES_CPU_CLONES
#endif
