// C++ operators new and delete in every standard form are jwmalloc's:
// plain, array, nothrow, sized, aligned (up to 1 MiB), and the failure rules
// (new-handler loop, std::bad_alloc, nullptr for nothrow). Linked to
// libjwmalloc.so; jwmalloc's statistics show it served the calls.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "check.h"
#include "jwmalloc.h"


struct alignas(256) Wide {
  char x[300];
};

static int handler_calls;
static void handler() {
  handler_calls++;
  std::set_new_handler(nullptr);  // next failure throws
}

int main() {
  jw_stats s0, s1;
  jw_stats_get(&s0, sizeof s0);
  for (int i = 0; i < 1000; i++) {
    int *p = new int(i);
    CHECK(*p == i);
    delete p;
    char *a = new char[static_cast<std::size_t>(i) * 37 + 1];
    a[0] = 1;
    delete[] a;
  }
  Wide *w = new Wide;
  CHECK(reinterpret_cast<std::uintptr_t>(w) % 256 == 0);
  delete w;
  Wide *wa = new Wide[7];
  CHECK(reinterpret_cast<std::uintptr_t>(wa) % 256 == 0);
  delete[] wa;
  for (std::size_t al = 1; al <= (std::size_t(1) << 20); al *= 2) {
    void *p = ::operator new(100, std::align_val_t(al));
    CHECK(reinterpret_cast<std::uintptr_t>(p) % al == 0);
    std::memset(p, 1, 100);
    ::operator delete(p, std::align_val_t(al));
    p = ::operator new[](5000, std::align_val_t(al), std::nothrow);
    CHECK(p && reinterpret_cast<std::uintptr_t>(p) % al == 0);
    ::operator delete[](p, 5000, std::align_val_t(al));
  }
  void *sized = ::operator new(48);
  ::operator delete(sized, 48);
  void *nt = ::operator new(64, std::nothrow);
  ::operator delete(nt, std::nothrow);
  /* Beyond PTRDIFF_MAX on i386 (volatile: GCC rejects a constant that large there). */
  static volatile std::size_t absurd_v = sizeof(std::size_t) == 8 ? std::size_t(1) << 62 : std::size_t(1) << 31;
  std::size_t absurd = absurd_v;
  CHECK(::operator new(absurd, std::nothrow) == nullptr);
  CHECK(::operator new[](absurd, std::align_val_t(64), std::nothrow) == nullptr);
  bool threw = false;
  try {
    void *p = ::operator new(absurd);
    ::operator delete(p);
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  CHECK(threw);
  std::set_new_handler(handler);
  threw = false;
  try {
    void *p = ::operator new[](absurd);
    ::operator delete[](p);
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  CHECK(threw && handler_calls == 1);
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 5000; i++) m[std::to_string(i * 7919)].push_back(i);
  CHECK(m.size() == 5000);
  m.clear();
  jw_stats_get(&s1, sizeof s1);
  CHECK(s1.small_mallocs - s0.small_mallocs >= 10000);
  CHECK(s1.small_frees - s0.small_frees >= 10000);
  if (test_failures()) return 1;
  std::printf("c++ operators: ok (%llu frontend mallocs)\n",
              static_cast<unsigned long long>(s1.small_mallocs - s0.small_mallocs));
  return 0;
}
