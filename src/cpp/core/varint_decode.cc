// The portable varint backend, and the dispatcher that picks a backend once per process.
#include "varint_decode.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "cpu_features.h"
#include "varint_internal.h"

namespace tfr {
namespace varints {

// Eight bytes at a time where they fit: eight one-byte values at once, or one varint of up to 8
// bytes packed from the same word; longer varints and the last bytes one at a time.
size_t decode_portable(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room) {
  size_t n = 0;
  while (end - p >= 8 && room - n >= 8) {
    const uint64_t word = load_le64(p);
    if ((word & kHighBits) == 0) {
      for (int i = 0; i < 8; ++i) out[n + i] = (word >> (8 * i)) & 0xff;
      n += 8;
      p += 8;
      continue;
    }
    const uint64_t stops = ~word & kHighBits;  // the high bit of each byte that ends a varint
    if (stops != 0) {
      const unsigned len = unsigned(trailing_zeros64(stops)) / 8 + 1;
      out[n++] = pack7(word, len);
      p += len;
    } else if (!read_varint(p, end, out + n++)) {
      return kBadVarints;
    }
  }
  while (p < end) {
    if (n == room || !read_varint(p, end, out + n)) return kBadVarints;
    ++n;
  }
  return n;
}

size_t tagged_portable(const uint8_t** at, const uint8_t* end, uint8_t tag, uint64_t* out,
                       size_t room) {
  const uint8_t* p = *at;
  size_t n = 0;
  while (n < room && p < end && *p == tag) {
    const uint8_t* q = p + 1;
    if (!read_varint(q, end, out + n)) break;
    ++n;
    p = q;
  }
  *at = p;
  return n;
}

}  // namespace varints

namespace {

struct Backend {
  const char* name;
  varints::DecodeFn decode;
  varints::TaggedFn tagged;
};

constexpr Backend kPortable{"portable", varints::decode_portable, varints::tagged_portable};

// Backends that are built in and supported by this CPU, most preferred first; portable is last.
const std::vector<Backend>& runnable_backends() {
  static const std::vector<Backend> backends = [] {
    std::vector<Backend> out;
#if defined(TFREC_HAVE_X86_VARINTS)
    if (cpu_has_avx512bw() && cpu_has_avx2()) {
      out.push_back({"avx512", varints::decode_avx512, varints::tagged_avx2});
    }
    if (cpu_has_avx2()) out.push_back({"avx2", varints::decode_avx2, varints::tagged_avx2});
#endif
#if defined(TFREC_HAVE_NEON_VARINTS)
    out.push_back({"neon", varints::decode_neon, varints::tagged_neon});
#endif
    out.push_back(kPortable);
    return out;
  }();
  return backends;
}

// Guards against a miscompiled or mis-detected backend (as CRC32C's dispatcher does): it must
// decode, as the portable one does, varints of every length at every alignment, runs of small
// values long enough for its widest blocks, and unpacked runs.
bool agrees_with_portable(const Backend& b) {
  uint8_t bytes[600];
  size_t size = 0;
  uint32_t state = 0x2545f491u;
  for (int i = 0; size < sizeof bytes - 10; ++i) {
    state = state * 1664525u + 1013904223u;
    const unsigned len = i % 97 < 60 ? 1 : 1 + (state >> 8) % 10;  // mostly small, some long
    for (unsigned j = 0; j < len; ++j) {
      bytes[size++] = uint8_t(((state >> (j % 24)) & 0x7f) | (j + 1 < len ? 0x80 : 0));
    }
  }
  uint64_t want[600], got[600];
  for (size_t from = 0; from < 9; ++from) {
    const size_t n = varints::decode_portable(bytes + from, bytes + size, want, 600);
    if (n != b.decode(bytes + from, bytes + size, got, 600)) return false;
    if (n != kBadVarints && std::memcmp(want, got, n * 8) != 0) return false;
  }
  uint8_t tagged[400];
  for (size_t i = 0; i < sizeof tagged; i += 2) {
    tagged[i] = 8;
    tagged[i + 1] = uint8_t(i * 7 % 128);
  }
  tagged[301] = 0x81;  // a two-byte value, then a run again
  const uint8_t* p = tagged;
  const uint8_t* q = tagged;
  const size_t n = varints::tagged_portable(&p, tagged + sizeof tagged, 8, want, 600);
  return n == b.tagged(&q, tagged + sizeof tagged, 8, got, 600) && p == q &&
         std::memcmp(want, got, n * 8) == 0;
}

Backend choose_backend() {
  const char* requested = std::getenv("TFREC_FAST_VARINT");
  const bool forced =
      requested != nullptr && *requested != '\0' && std::strcmp(requested, "auto") != 0;
  for (const Backend& b : runnable_backends()) {
    if (forced && std::strcmp(requested, b.name) != 0) continue;
    if (b.decode == kPortable.decode || agrees_with_portable(b)) return b;
  }
  return kPortable;
}

const Backend& active_backend() {
  static const Backend backend = choose_backend();
  return backend;
}

// The first call through either pointer lands here and installs the chosen backend (two threads
// may both do so; they store the same values).
size_t resolve_decode(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room);
size_t resolve_tagged(const uint8_t** p, const uint8_t* end, uint8_t tag, uint64_t* out,
                      size_t room);

std::atomic<varints::DecodeFn> g_decode{resolve_decode};
std::atomic<varints::TaggedFn> g_tagged{resolve_tagged};

void install() {
  g_decode.store(active_backend().decode, std::memory_order_relaxed);
  g_tagged.store(active_backend().tagged, std::memory_order_relaxed);
}

size_t resolve_decode(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room) {
  install();
  return active_backend().decode(p, end, out, room);
}

size_t resolve_tagged(const uint8_t** p, const uint8_t* end, uint8_t tag, uint64_t* out,
                      size_t room) {
  install();
  return active_backend().tagged(p, end, tag, out, room);
}

const Backend& named_backend(const std::string& name) {
  for (const Backend& b : runnable_backends()) {
    if (name == b.name) return b;
  }
  throw std::invalid_argument("unknown or unavailable varint backend: '" + name + "'");
}

}  // namespace

size_t decode_wide_varints(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room) {
  return g_decode.load(std::memory_order_relaxed)(p, end, out, room);
}

size_t decode_tagged_varints(const uint8_t** p, const uint8_t* end, uint8_t tag, uint64_t* out,
                             size_t room) {
  return g_tagged.load(std::memory_order_relaxed)(p, end, tag, out, room);
}

const char* varint_backend() { return active_backend().name; }

std::vector<std::string> varint_available_backends() {
  std::vector<std::string> names;
  for (const Backend& b : runnable_backends()) names.emplace_back(b.name);
  return names;
}

size_t decode_varints_with(const std::string& backend, const uint8_t* p, const uint8_t* end,
                           uint64_t* out, size_t room) {
  return named_backend(backend).decode(p, end, out, room);
}

size_t decode_tagged_varints_with(const std::string& backend, const uint8_t** p, const uint8_t* end,
                                  uint8_t tag, uint64_t* out, size_t room) {
  return named_backend(backend).tagged(p, end, tag, out, room);
}

}  // namespace tfr
