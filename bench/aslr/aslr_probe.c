/* Prints the addresses of the process's first small (64 B), midend-sized
 * (8000 B) and range-sized (100,000 B) allocations, in hexadecimal on one
 * line, for the entropy measurement of bench/aslr/entropy.py (make
 * bench-aslr). The allocator is whatever is preloaded. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  void *small = malloc(64), *mid = malloc(8000), *range = malloc(100000);
  printf("%lx %lx %lx\n", (unsigned long)small, (unsigned long)mid, (unsigned long)range);
  free(range);
  free(mid);
  free(small);
  return 0;
}
