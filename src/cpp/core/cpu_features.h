// What the CPU running this process can do, for the backends chosen at run time (CRC32C, varint
// decoding). Each probe is defined only in builds that compile a backend needing it.
#pragma once

namespace tfr {

// x86-64 (builds with TFREC_HAVE_SSE42_BACKEND or TFREC_HAVE_AVX512_BACKEND).
bool cpu_has_sse42_pclmul();  // SSE4.2 and PCLMULQDQ
bool cpu_has_avx2();          // AVX2, with YMM state enabled by the OS
// AVX-512F and VPCLMULQDQ (with the SSE4.2 probe's features), ZMM state enabled by the OS.
bool cpu_has_avx512_vpclmul();
bool cpu_has_avx512bw();  // AVX-512F and BW, ZMM state enabled by the OS

// aarch64 (builds with TFREC_HAVE_ARM64_BACKEND): the ARMv8 CRC32 extension. (NEON is part of
// the aarch64 baseline: no probe.)
bool cpu_has_arm64_crc();

}  // namespace tfr
