/* The explorer's results, read by main.c. */
#ifndef VRF_EXPLORE_H
#define VRF_EXPLORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rt.h"

#define MAX_OUTCOMES 256

typedef struct explore_stats {
  uint64_t distinct, executions, complete, stutter, sleep_blocked, limit;
  uint32_t max_events;
  bool failed, partial, quiet, no_dpor, count_graphs, list_graphs;
  char fail_kind[32];
  char fail_msg[2048];
  double seconds;
  int noutcomes;
  char *outcomes[MAX_OUTCOMES];
  uint64_t outcome_count[MAX_OUTCOMES];
} explore_stats_t;

extern explore_stats_t xs;

void replay_print(shm_t *s);
void symbolize_and_print(char *text, size_t len);
void print_choices(FILE *f, shm_t *s);
int parse_choices(shm_t *s, const char *str);

#endif
