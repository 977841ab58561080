# What the jwmalloc library is built from: its sources, each named once, in
# the lists every target takes them from (jwmalloc/CMakeLists.txt: the
# library variants and the standalone backend's objects; tests/backend: the
# backend's variants; verify/: the model-checked copy). Included by the
# top-level CMakeLists.txt, so every directory sees the same lists. Paths are
# absolute. A .c file under jwmalloc/ that no list names is a configure error
# (a new source is added here, to the list of its layer).
set(JW_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR})

# The options table and the output it needs (the `jwmalloc` tool compiles
# them too: `jwmalloc options` prints the table).
set(JW_TABLE_SOURCES common/log.c common/option_table.c)
# The pieces under every build of the backend, the library's and its
# standalone one's: the options table and parser, page size, OS mappings, the
# root map (the table's files are added below).
set(JW_BASE_SOURCES common/options.c common/page.c os/os_mem.c pages/root_map.c)
# The page source: the closed-sibling-tree backend (docs/design/backend.md).
set(JW_BACKEND_SOURCES
  backend/size_class.c backend/tree.c backend/meta.c backend/bins.c backend/fast.c backend/roots.c
  backend/ahead.c backend/backend.c backend/options.c backend/alloc.c backend/lockfree.c backend/free.c
  backend/classify.c backend/placement.c backend/stats.c backend/control.c backend/check.c backend/release.c)
# Lifetime-based reclamation on the backend's release mechanism.
set(JW_RECLAIM_SOURCES reclaim/options.c reclaim/cycle.c reclaim/watermark.c reclaim/thread.c reclaim/placement.c)
# The rest of the layers, bottom up, for the library: the tiers' doors to
# the page source, midend, frontend, and the API.
set(JW_TIER_SOURCES
  common/random.c os/os_meta.c os/os_swap.c pages/tier_pages.c
  midend/ptr_cache.c midend/midend.c
  frontend/size_class.c frontend/page_tag.c frontend/slab.c frontend/page_pool.c frontend/thread_cache.c
  frontend/tc_registry.c frontend/remote_free.c frontend/block_cache.c
  api/alloc.c api/large.c api/huge.c api/huge_cache.c api/runtime.c api/stats.c api/android.c api/iterate.c
  api/options.c)
# Single files some targets add: the jw_ API's names, the malloc override,
# the test hooks (JW_TEST_HOOKS builds) and their preloadable export, the
# `jwmalloc` tool (with the table's files).
set(JW_API_SOURCE api/jw_api.c)
set(JW_OVERRIDE_SOURCE api/override.c)
set(JW_TEST_HOOKS_SOURCE common/test_hooks.c)
set(JW_TEST_EXPORT_SOURCE api/test_export.c)
set(JW_TOOL_SOURCE tools/jwmalloc.c)

foreach(list TABLE BASE BACKEND RECLAIM TIER)
  list(TRANSFORM JW_${list}_SOURCES PREPEND ${JW_SOURCE_DIR}/)
endforeach()
list(PREPEND JW_BASE_SOURCES ${JW_TABLE_SOURCES})
foreach(one API OVERRIDE TEST_HOOKS TEST_EXPORT TOOL)
  set(JW_${one}_SOURCE ${JW_SOURCE_DIR}/${JW_${one}_SOURCE})
endforeach()

# The backend without the tiers (its own tests and tools, tests/backend and
# tests/reclaim): base, backend, reclamation.
set(JW_STANDALONE_SOURCES ${JW_BASE_SOURCES} ${JW_BACKEND_SOURCES} ${JW_RECLAIM_SOURCES})
# The allocator: every layer but the jw_ names and the override, which each
# variant adds as it needs them.
set(JW_CORE_SOURCES ${JW_STANDALONE_SOURCES} ${JW_TIER_SOURCES})

# Every .c under jwmalloc/ is in exactly one list.
file(GLOB_RECURSE jw_all_c ${JW_SOURCE_DIR}/*.c)
set(jw_listed ${JW_CORE_SOURCES} ${JW_API_SOURCE} ${JW_OVERRIDE_SOURCE} ${JW_TEST_HOOKS_SOURCE}
  ${JW_TEST_EXPORT_SOURCE} ${JW_TOOL_SOURCE})
set(jw_unique ${jw_listed})
list(REMOVE_DUPLICATES jw_unique)
list(LENGTH jw_listed n_listed)
list(LENGTH jw_unique n_unique)
if(NOT n_listed EQUAL n_unique)
  message(FATAL_ERROR "jwmalloc/sources.cmake names a source twice")
endif()
foreach(f ${jw_all_c})
  if(NOT f IN_LIST jw_listed)
    message(FATAL_ERROR "${f} is in no list of jwmalloc/sources.cmake")
  endif()
endforeach()
foreach(f ${jw_listed})
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "jwmalloc/sources.cmake names ${f}, which does not exist")
  endif()
endforeach()

# -DJWMALLOC_CHECK_DEFAULT=ON: the backend's invariant checks are on unless
# JWMALLOC_CHECK=0 (README, "jwmalloc backend"): the default of the options
# table's CHECK row (common/option_table.h). The definition reaches every
# compilation of the library's sources that builds a library (each variant in
# jwmalloc/CMakeLists.txt, the standalone backend) and the `jwmalloc` tool,
# which prints the table; the model-checked copy in verify/ keeps its own
# settings. tests/jwmalloc's jwmalloc.check_default
# shows the built library's default.
option(JWMALLOC_CHECK_DEFAULT "Backend invariant checks on unless JWMALLOC_CHECK=0" OFF)
set(JW_CHECK_DEFINES)
if(JWMALLOC_CHECK_DEFAULT)
  set(JW_CHECK_DEFINES JWMALLOC_CHECK_DEFAULT=1)
endif()
