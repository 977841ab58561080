# Helpers for variants that change a few sources with a definition (a planted
# JW_MUTATE_* bug, shrunk constants): those sources compiled privately, a
# shared copy's objects of every other one (verify/, tests/backend).

# jw_sources_using(OUT DEFINES SOURCES): those of SOURCES whose text names one
# of DEFINES (NAME or NAME=VALUE), or includes, directly or through other
# headers, a header or .inc that names one (matched by file name, which can
# only take in more sources than need it), read at configure time. A define no
# file names is a configure error (a stale name).
function(jw_sources_using out defines sources)
  set(names)
  foreach(d ${defines})
    string(REGEX REPLACE "=.*" "" d "${d}")
    list(APPEND names ${d})
  endforeach()
  list(JOIN names "|" named)
  file(GLOB_RECURSE texts ${PROJECT_SOURCE_DIR}/jwmalloc/*.h ${PROJECT_SOURCE_DIR}/jwmalloc/*.inc
       ${PROJECT_SOURCE_DIR}/include/*.h)
  list(APPEND texts ${sources})
  list(REMOVE_DUPLICATES texts)
  set(using)
  foreach(f ${texts})
    file(READ ${f} text)
    if(text MATCHES "${named}")
      list(APPEND using ${f})
    endif()
  endforeach()
  if(NOT using)
    message(FATAL_ERROR "no source uses ${names}")
  endif()
  # Headers reach the files that include them, until no more are reached.
  set(grown TRUE)
  while(grown)
    set(grown FALSE)
    set(headers)
    foreach(f ${using})
      if(NOT f MATCHES "\\.c$")
        get_filename_component(h ${f} NAME)
        string(REPLACE "." "\\." h "${h}")
        list(APPEND headers ${h})
      endif()
    endforeach()
    if(NOT headers)
      break()
    endif()
    list(JOIN headers "|" included)
    foreach(f ${texts})
      if(NOT f IN_LIST using)
        file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]([^\">]*/)?(${included})[\">]")
        if(lines)
          list(APPEND using ${f})
          set(grown TRUE)
        endif()
      endif()
    endforeach()
  endwhile()
  list(FILTER using INCLUDE REGEX "\\.c$")
  set(${out} ${using} PARENT_SCOPE)
endfunction()

# jw_objects_except(OUT TARGET SOURCES): $<TARGET_OBJECTS:TARGET> less the
# objects of SOURCES (absolute paths under the project, outside TARGET's own
# directory, whose objects CMake names after that path).
function(jw_objects_except out target sources)
  set(objs $<TARGET_OBJECTS:${target}>)
  foreach(src ${sources})
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
    string(REPLACE "." "\\." rel "${rel}")
    set(objs "$<FILTER:${objs},EXCLUDE,/${rel}\\.o$>")
  endforeach()
  set(${out} ${objs} PARENT_SCOPE)
endfunction()
