# Helpers for variants that change a few sources with a definition (a planted
# JW_MUTATE_* bug, shrunk constants): those sources compiled privately, a
# shared copy's objects of every other one (verify/, tests/backend).

# jw_sources_using(OUT DEFINES SOURCES): those of SOURCES whose text names one
# of DEFINES (NAME or NAME=VALUE), read at configure time. A define named in a
# header or an included .inc reaches files that do not name it: then all of
# SOURCES. A define no file names is a configure error (a stale name).
function(jw_sources_using out defines sources)
  set(names)
  foreach(d ${defines})
    string(REGEX REPLACE "=.*" "" d "${d}")
    list(APPEND names ${d})
  endforeach()
  file(GLOB_RECURSE texts ${PROJECT_SOURCE_DIR}/jwmalloc/*.h ${PROJECT_SOURCE_DIR}/jwmalloc/*.inc
       ${PROJECT_SOURCE_DIR}/include/*.h)
  list(APPEND texts ${sources})
  set(using)
  foreach(f ${texts})
    file(READ ${f} text)
    foreach(d ${names})
      if(text MATCHES "${d}")
        if(NOT f MATCHES "\\.c$")
          set(${out} ${sources} PARENT_SCOPE)
          return()
        endif()
        list(APPEND using ${f})
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES using)
  if(NOT using)
    message(FATAL_ERROR "no source uses ${names}")
  endif()
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
