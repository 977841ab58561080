/* Statistics (brief: "Statistics"; design note section 14): per app and for
 * the engine, as iosr_app_stats and as the JSON of `iosr stat --json`.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/histo.h"
#include "common/json.h"
#include "engine/engine_int.h"

void iosr_stats_fill(iosr_engine *e, iosr_app *a, iosr_app_stats *out) {
  *out = a->st;
  snprintf(out->name, sizeof out->name, "%s", a->name);
  out->pid = a->pid;
  out->id = a->id;
  out->foreground = a->id == e->fg_app;
  out->forked = a->forked;
  out->resident_pages = a->resident;
  out->swapped_pages = a->swapped;
  out->clean_pages = a->clean;
  out->ra_window = a->ra_last_window;
  for (uint32_t i = 0; i < a->n_ra_regions; i++) {
    out->ra_read_pages += a->ra_regions[i].read_pages;
    out->ra_needed_pages += a->ra_regions[i].needed_pages;
  }
  /* an interval still open counts up to now */
  if (a->nlat) out->swapin_busy_ns += iosr_now_ns() - a->busy_since;
  out->lat_p50_ns = iosr_lat_quantile(out->lat_hist, 0.50);
  out->lat_p90_ns = iosr_lat_quantile(out->lat_hist, 0.90);
  out->lat_p99_ns = iosr_lat_quantile(out->lat_hist, 0.99);
}

/* Bytes read per byte needed (0 when nothing was needed yet). */
static double per_needed(uint64_t read, uint64_t needed) { return needed ? (double)read / (double)needed : 0; }

/* The rest of an app's "readahead" object: pages read against pages needed,
 * and the same per region with its window and probe-weighted hits/misses. */
static void ra_json(const iosr_app *a, const iosr_app_stats *s, iosr_buf *b) {
  iosr_buf_printf(b, "\"read_pages\":%llu,\"needed_pages\":%llu,\"read_per_needed\":%.3f,\"regions\":[",
                  (unsigned long long)s->ra_read_pages, (unsigned long long)s->ra_needed_pages,
                  per_needed(s->ra_read_pages, s->ra_needed_pages));
  for (uint32_t i = 0; i < a->n_ra_regions; i++) {
    const iosr_ra_region *r = &a->ra_regions[i];
    iosr_buf_printf(b,
                    "%s{\"region\":%u,\"zone\":%llu,\"window\":%u,\"hits\":%llu,\"misses\":%llu,\"read_pages\":%llu,"
                    "\"needed_pages\":%llu,\"read_per_needed\":%.3f}",
                    i ? "," : "", r->region, (unsigned long long)r->zone, r->ra.window, (unsigned long long)r->hits, (unsigned long long)r->misses,
                    (unsigned long long)r->read_pages, (unsigned long long)r->needed_pages,
                    per_needed(r->read_pages, r->needed_pages));
  }
  iosr_buf_printf(b, "]},");
}

static void app_json(iosr_engine *e, iosr_app *a, iosr_buf *b) {
  iosr_app_stats s;
  iosr_stats_fill(e, a, &s);
  double mbps = s.swapin_busy_ns ? (double)s.swapin_bytes / 1e6 / ((double)s.swapin_busy_ns / 1e9) : 0;
  iosr_buf_printf(b, "{\"name\":");
  iosr_buf_json_str(b, s.name);
  iosr_buf_printf(b,
                  ",\"id\":%u,\"pid\":%d,\"foreground\":%s,\"forked\":%s,\"state\":\"%s\","
                  "\"resident_pages\":%llu,\"swapped_pages\":%llu,\"clean_pages\":%llu,"
                  "\"faults\":{\"total\":%llu,\"zero\":%llu,\"major\":%llu,\"probe\":%llu,\"wp\":%llu},"
                  "\"readahead\":{\"pages\":%llu,\"hits\":%llu,\"misses\":%llu,\"window\":%u,",
                  s.id, s.pid, s.foreground ? "true" : "false", s.forked ? "true" : "false",
                  a->state == IOSR_APP_ACTIVE ? (a->conn || a->forked ? "active" : "detached") : "dead",
                  (unsigned long long)s.resident_pages, (unsigned long long)s.swapped_pages,
                  (unsigned long long)s.clean_pages, (unsigned long long)s.faults, (unsigned long long)s.zero_faults,
                  (unsigned long long)s.major_faults, (unsigned long long)s.probe_faults,
                  (unsigned long long)s.wp_faults, (unsigned long long)s.ra_pages, (unsigned long long)s.ra_hits,
                  (unsigned long long)s.ra_misses, s.ra_window);
  ra_json(a, &s, b);
  iosr_buf_printf(b, "\"io\":{\"read_reqs\":%llu,\"read_bytes\":%llu,\"write_reqs\":%llu,\"write_bytes\":%llu,",
                  (unsigned long long)s.read_reqs, (unsigned long long)s.read_bytes,
                  (unsigned long long)s.write_reqs, (unsigned long long)s.write_bytes);
  iosr_buf_printf(b, "\"size_buckets_bytes\":[");
  for (unsigned i = 0; i < IOSR_SIZE_BUCKETS; i++)
    iosr_buf_printf(b, i ? ",%llu" : "%llu", (unsigned long long)iosr_size_bucket_floor(i));
  iosr_buf_printf(b, "],\"read_hist\":");
  iosr_buf_json_u64s(b, s.read_hist, IOSR_SIZE_BUCKETS);
  iosr_buf_printf(b, ",\"write_hist\":");
  iosr_buf_json_u64s(b, s.write_hist, IOSR_SIZE_BUCKETS);
  iosr_buf_printf(b,
                  "},\"swapin\":{\"bytes\":%llu,\"busy_ns\":%llu,\"mb_per_s\":%.1f},"
                  "\"swapout\":{\"pages\":%llu,\"zero_pages\":%llu,\"clean_drops\":%llu},"
                  "\"fault_latency_ns\":{\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"max\":%llu,\"hist\":",
                  (unsigned long long)s.swapin_bytes, (unsigned long long)s.swapin_busy_ns, mbps,
                  (unsigned long long)s.swapout_pages, (unsigned long long)s.zero_pages,
                  (unsigned long long)s.clean_drops, (unsigned long long)s.lat_p50_ns, (unsigned long long)s.lat_p90_ns,
                  (unsigned long long)s.lat_p99_ns, (unsigned long long)s.lat_max_ns);
  iosr_buf_json_u64s(b, s.lat_hist, IOSR_LAT_BUCKETS);
  iosr_buf_printf(b, "},\"errors\":{\"read\":%llu,\"write\":%llu,\"checksum\":%llu}}",
                  (unsigned long long)s.read_errors, (unsigned long long)s.write_errors,
                  (unsigned long long)s.checksum_errors);
}

void iosr_stats_json(iosr_engine *e, iosr_buf *b) {
  iosr_app *fg = iosr_engine_app(e, e->fg_app);
  iosr_buf_printf(b, "{\"engine\":{\"role\":\"%s\",\"pid\":%d,\"uptime_ms\":%llu,\"swap\":{\"path\":", e->role,
                  (int)getpid(), (unsigned long long)((iosr_now_ns() - e->started_ns) / 1000000));
  iosr_buf_json_str(b, e->area.path);
  iosr_buf_printf(b,
                  ",\"slots\":%llu,\"used\":%llu,\"bad\":%llu,\"spills\":%llu,\"holes\":%llu,\"direct\":%s,\"io\":\"%s\"},"
                  "\"policy\":{\"slot\":\"%s\",\"readahead\":\"%s\",\"sched\":\"%s\"},\"foreground\":",
                  (unsigned long long)e->slots.nslots, (unsigned long long)e->slots.used,
                  (unsigned long long)e->slots.bad, (unsigned long long)e->slots.spills, (unsigned long long)e->slots.holes,
                  e->area.direct ? "true" : "false", iosr_io_backend_name(e->io), iosr_slot_name(e->set.slot),
                  iosr_ra_name(e->set.readahead), iosr_sched_name(e->set.sched));
  if (fg) iosr_buf_json_str(b, fg->name);
  else iosr_buf_printf(b, "null");
  iosr_buf_printf(b,
                  ",\"budget_bytes\":%llu,\"resident_pages\":%llu,\"resident_peak_pages\":%llu,\"reads\":%llu,\"read_bytes\":%llu,"
                  "\"writes\":%llu,\"write_bytes\":%llu,\"submit_calls\":%llu,\"io_errors\":%llu,"
                  "\"forced_writes\":%llu,\"zero_fill_pages\":%llu,\"inconsistencies\":%llu,"
                  "\"checksum_errors\":%llu,\"checksum\":\"%s\",\"queued\":%u,\"inflight\":%u,\"reads_inflight_peak\":%u,\"restart_grace\":%s,"
                  "\"admission\":{\"accept_errors\":%llu,\"refused\":%llu,\"hello_timeouts\":%llu,\"listening\":%s},"
                  "\"loop_turns\":%llu,"
                  "\"moveout\":{\"pages\":%llu,\"refused_runs\":%llu,\"no_room_runs\":%llu,\"graveyard_pages\":%llu},"
                  "\"budget\":{\"charged_pages\":%llu,\"over_peak_pages\":%llu,\"overrun_pages\":%llu,"
                  "\"held_faults\":%llu,\"held_now\":%u,\"ra_cut_pages\":%llu}},\"apps\":[",
                  (unsigned long long)e->set.budget, (unsigned long long)e->resident_total,
                  (unsigned long long)e->resident_peak,
                  (unsigned long long)e->reads, (unsigned long long)e->read_bytes, (unsigned long long)e->writes,
                  (unsigned long long)e->write_bytes, (unsigned long long)iosr_io_submit_calls(e->io),
                  (unsigned long long)e->io_errors, (unsigned long long)e->sched.forced_writes,
                  (unsigned long long)e->zero_fill_pages, (unsigned long long)e->inconsistencies,
                  (unsigned long long)e->checksum_errors, iosr_crc32c_impl(), iosr_sched_queued(&e->sched), e->sched.inflight,
                  e->sched.reads_peak,
                  e->grace_until_ns && iosr_now_ns() < e->grace_until_ns ? "true" : "false",
                  (unsigned long long)e->accept_errors, (unsigned long long)e->conns_refused,
                  (unsigned long long)e->hello_timeouts, e->listen_off ? "false" : "true",
                  (unsigned long long)e->loop_turns, (unsigned long long)e->moveout_pages,
                  (unsigned long long)e->moveout_refused, (unsigned long long)e->moveout_no_room,
                  (unsigned long long)e->grave_total,
                  (unsigned long long)(e->resident_total + e->reading_total + e->grave_total),
                  (unsigned long long)e->budget_over_peak, (unsigned long long)e->budget_overrun_pages,
                  (unsigned long long)e->budget_held_faults, e->nheld, (unsigned long long)e->budget_ra_cut_pages);
  int first = 1;
  for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
    iosr_app *a = iosr_engine_app(e, i);
    if (!a || a->state == IOSR_APP_DEAD) continue;
    if (!first) iosr_buf_printf(b, ",");
    first = 0;
    app_json(e, a, b);
  }
  iosr_buf_printf(b, "]}\n");
}
