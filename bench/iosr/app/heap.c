/* The evaluation app's heap: see heap.h and docs/design/iosr-eval.md. */
#include "heap.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HEAP_TAG 0x4845415042454e43ull /* "HEAPBENC" */
#define NEVER 0xffffffffu
#define FLAG_HOT 1u

/* splitmix64: the build's decisions and the object contents. */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t rnext(rng *r) { return mix64(r->s++); }
static double runit(rng *r) { return (double)(rnext(r) >> 11) / 9007199254740992.0; }

static const uint32_t class_size[] = {48,  64,  80,   96,   128,  160,  192,  256,  320,  384,  512,
                                      640, 768, 1024, 1280, 1536, 2048, 2560, 3072, 4096};
#define NCLASS (sizeof class_size / sizeof class_size[0])
#define NBINS (HEAP_LARGE_MAX / 4096 + 1)

typedef struct carver {
  uint8_t *slab_cur[NCLASS], *slab_end[NCLASS];
  void *free_small[NCLASS];
  void *free_large[NBINS];
} carver;

static unsigned class_of(uint32_t size) {
  unsigned c = 0;
  while (class_size[c] < size) c++;
  return c;
}

static void *bump(heap *h, size_t bytes, size_t align) {
  size_t at = (h->bump + align - 1) & ~(align - 1);
  if (at + bytes > h->cap) return NULL;
  h->bump = at + bytes;
  return h->base + at;
}

/* Returns an object of at least `size` bytes (rounded to its class or to
 * pages) and its rounded size; reuses freed objects of the same class/pages. */
static void *carve(heap *h, carver *cv, uint32_t size, uint32_t *rounded) {
  if (size <= HEAP_SMALL_MAX) {
    unsigned c = class_of(size);
    *rounded = class_size[c];
    if (cv->free_small[c]) {
      void *o = cv->free_small[c];
      cv->free_small[c] = *(void **)o;
      return o;
    }
    if (!cv->slab_cur[c] || cv->slab_cur[c] + class_size[c] > cv->slab_end[c]) {
      uint8_t *s = bump(h, HEAP_SLAB_BYTES, 4096);
      if (!s) return NULL;
      cv->slab_cur[c] = s;
      cv->slab_end[c] = s + HEAP_SLAB_BYTES;
    }
    void *o = cv->slab_cur[c];
    cv->slab_cur[c] += class_size[c];
    return o;
  }
  uint32_t pages = (size + 4095) / 4096;
  *rounded = pages * 4096;
  if (cv->free_large[pages]) {
    void *o = cv->free_large[pages];
    cv->free_large[pages] = *(void **)o;
    return o;
  }
  return bump(h, (size_t)pages * 4096, 4096);
}

static void release(carver *cv, heap_obj *o) {
  uint32_t size = o->size;
  o->tag = 0;
  if (size <= HEAP_SMALL_MAX) {
    unsigned c = class_of(size);
    *(void **)o = cv->free_small[c];
    cv->free_small[c] = o;
  } else {
    uint32_t pages = size / 4096;
    *(void **)o = cv->free_large[pages];
    cv->free_large[pages] = o;
  }
}

/* Sizes: half small (48-256 B), a third medium (256 B-4 KiB), the rest large
 * (4-64 KiB) and a few buffers (64 KiB-1 MiB), log-uniform inside each band:
 * by bytes about 1% small, 9% medium, 60% large, 30% buffers. */
static uint32_t draw_size(rng *r) {
  double u = runit(r), lo, hi;
  if (u < 0.50) lo = 48, hi = 256;
  else if (u < 0.85) lo = 256, hi = 4096;
  else if (u < 0.995) lo = 4096, hi = 65536;
  else lo = 65536, hi = HEAP_LARGE_MAX;
  double s = exp(log(lo) + runit(r) * (log(hi) - log(lo)));
  uint32_t v = (uint32_t)s;
  return v < HEAP_HDR_BYTES ? HEAP_HDR_BYTES : v > HEAP_LARGE_MAX ? HEAP_LARGE_MAX : v;
}

static uint64_t obj_key(const heap *h, uint64_t id) { return mix64(h->p.seed ^ mix64(id)); }
static uint64_t word_val(uint64_t key, uint64_t j) { return mix64(key + j * 0xd1b54a32d192ed03ull); }

static uint64_t *words(heap_obj *o) { return (uint64_t *)((uint8_t *)o + HEAP_HDR_BYTES); }
static size_t nwords(const heap_obj *o) { return (o->size - HEAP_HDR_BYTES) / 8; }

static void fill(heap *h, heap_obj *o, uint64_t id, uint32_t size, uint32_t flags) {
  o->tag = HEAP_TAG ^ id;
  o->id = id;
  o->next_hot = NULL;
  o->size = size;
  o->flags = flags;
  o->visits = 0;
  uint64_t key = obj_key(h, id), sum = 0, *w = words(o);
  size_t n = nwords(o);
  for (size_t j = 0; j < n; j++) {
    w[j] = word_val(key, j);
    if (!(j % (HEAP_STRIDE / 8))) sum += w[j];
  }
  o->sum = sum;
}

void heap_params_default(heap_params *p, uint64_t seed) {
  *p = (heap_params){.seed = seed, .epochs = 32, .hot_epoch_frac = 0.35, .hot_in_hot = 0.9, .hot_in_cold = 0.08,
                     .die_frac = 0.4};
}

typedef struct rec {
  heap_obj *o;
  uint32_t death;
} rec;

static int cmp_addr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (heap_obj *const *)a, y = (uintptr_t) * (heap_obj *const *)b;
  return x < y ? -1 : x > y;
}

int heap_build(heap *h, void *base, size_t cap, const heap_params *p, void (*progress)(unsigned, void *),
               void *arg) {
  memset(h, 0, sizeof *h);
  h->base = base;
  h->cap = cap;
  h->p = *p;
  carver *cv = calloc(1, sizeof *cv);
  size_t nrec = 0, caprec = 1 << 16;
  rec *recs = malloc(sizeof *recs * caprec);
  if (!cv || !recs) goto nomem;
  rng r = {p->seed * 0x2545f4914f6cdd1dull + 1};
  uint64_t next_id = 1;
  int full = 0;
  for (unsigned e = 0; e < p->epochs && !full; e++) {
    size_t target = e + 1 == p->epochs ? cap : cap / p->epochs * (e + 1);
    int hot_epoch = runit(&r) < p->hot_epoch_frac;
    while (h->bump < target) {
      uint32_t want = draw_size(&r), size;
      heap_obj *o = carve(h, cv, want, &size);
      if (!o) {
        full = 1;
        break;
      }
      double ph = hot_epoch ? p->hot_in_hot : p->hot_in_cold;
      fill(h, o, next_id++, size, runit(&r) < ph ? FLAG_HOT : 0);
      uint32_t death = runit(&r) < p->die_frac ? e + 1 + (uint32_t)(rnext(&r) % 4) : NEVER;
      if (nrec == caprec) {
        rec *n = realloc(recs, sizeof *recs * caprec * 2);
        if (!n) goto nomem;
        recs = n;
        caprec *= 2;
      }
      recs[nrec++] = (rec){o, death};
      h->st.objects++;
    }
    /* deaths at the end of the epoch; survivors keep their order */
    size_t k = 0;
    for (size_t i = 0; i < nrec; i++) {
      if (recs[i].death <= e) release(cv, recs[i].o);
      else recs[k++] = recs[i];
    }
    nrec = k;
    if (progress) progress(e, arg);
  }
  h->st.arena_used = h->bump;
  /* the hot set: chain (random order) and buffers (address order) */
  size_t nchain = 0, nbuf = 0;
  for (size_t i = 0; i < nrec; i++) {
    heap_obj *o = recs[i].o;
    h->st.live_objects++;
    h->st.live_bytes += o->size;
    h->st.by_class[o->size <= 256 ? 0 : o->size <= 4096 ? 1 : o->size < HEAP_BUFFER_MIN ? 2 : 3]++;
    if (o->flags & FLAG_HOT) {
      if (o->size >= HEAP_BUFFER_MIN) nbuf++;
      else nchain++;
    }
  }
  heap_obj **chain = malloc(sizeof *chain * (nchain ? nchain : 1));
  h->buffers = malloc(sizeof *h->buffers * (nbuf ? nbuf : 1));
  size_t npages = (cap + 4095) / 4096;
  uint8_t *bits = calloc(npages / 8 + 1, 1);
  if (!chain || !h->buffers || !bits) {
    free(chain);
    free(bits);
    goto nomem;
  }
  nchain = nbuf = 0;
  for (size_t i = 0; i < nrec; i++) {
    heap_obj *o = recs[i].o;
    if (!(o->flags & FLAG_HOT)) continue;
    if (o->size >= HEAP_BUFFER_MIN) {
      h->buffers[nbuf++] = o;
      h->st.hot_buffer_bytes += o->size;
    } else {
      chain[nchain++] = o;
      h->st.hot_chain_bytes += o->size;
    }
    size_t first = (size_t)((uint8_t *)o - h->base) / 4096, last = (size_t)((uint8_t *)o - h->base + o->size - 1) / 4096;
    for (size_t pg = first; pg <= last; pg++) bits[pg / 8] |= (uint8_t)(1u << (pg % 8));
  }
  for (size_t i = nchain; i > 1; i--) {
    size_t j = rnext(&r) % i;
    heap_obj *t = chain[i - 1];
    chain[i - 1] = chain[j];
    chain[j] = t;
  }
  for (size_t i = 0; i + 1 < nchain; i++) chain[i]->next_hot = chain[i + 1];
  h->chain = nchain ? chain[0] : NULL;
  qsort(h->buffers, nbuf, sizeof *h->buffers, cmp_addr);
  h->nbuffers = nbuf;
  h->st.hot_chain_objects = nchain;
  h->st.hot_buffers = nbuf;
  for (size_t pg = 0; pg < npages; pg++) h->nhot_pages += (bits[pg / 8] >> (pg % 8)) & 1;
  h->hot_pages = malloc(sizeof *h->hot_pages * (h->nhot_pages ? h->nhot_pages : 1));
  if (!h->hot_pages) {
    free(chain);
    free(bits);
    goto nomem;
  }
  size_t k = 0;
  for (size_t pg = 0; pg < npages; pg++)
    if ((bits[pg / 8] >> (pg % 8)) & 1) h->hot_pages[k++] = (uint32_t)pg;
  h->st.hot_pages = h->nhot_pages;
  free(chain);
  free(bits);
  free(recs);
  free(cv);
  return 0;
nomem:
  free(recs);
  free(cv);
  errno = ENOMEM;
  return -1;
}

static uint64_t touch_obj(heap_obj *o, touch_result *t) {
  uint64_t s = 0;
  const volatile uint64_t *w = (const volatile uint64_t *)words(o);
  size_t n = nwords(o);
  for (size_t j = 0; j < n; j += HEAP_STRIDE / 8) s += w[j];
  t->objects++;
  t->bytes += o->size;
  if (s != o->sum || o->tag != (HEAP_TAG ^ o->id)) t->bad++;
  return s;
}

touch_result heap_touch(heap *h, unsigned write_every) {
  touch_result t = {0, 0, 0, 0};
  uint64_t i = 0;
  for (heap_obj *o = h->chain; o; o = o->next_hot, i++) {
    touch_obj(o, &t);
    if (write_every && !(i % write_every)) {
      o->visits++;
      t.written++;
    }
  }
  for (size_t b = 0; b < h->nbuffers; b++) touch_obj(h->buffers[b], &t);
  return t;
}

static int full_ok(const heap *h, heap_obj *o) {
  uint64_t key = obj_key(h, o->id), *w = words(o);
  if (o->tag != (HEAP_TAG ^ o->id)) return 0;
  for (size_t j = 0; j < nwords(o); j++)
    if (w[j] != word_val(key, j)) return 0;
  return 1;
}

uint64_t heap_verify_full(heap *h) {
  uint64_t bad = 0;
  for (heap_obj *o = h->chain; o; o = o->next_hot) bad += !full_ok(h, o);
  for (size_t b = 0; b < h->nbuffers; b++) bad += !full_ok(h, h->buffers[b]);
  return bad;
}

void heap_free_lists(heap *h) {
  free(h->buffers);
  free(h->hot_pages);
  h->buffers = NULL;
  h->hot_pages = NULL;
}
