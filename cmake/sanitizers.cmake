# OUTBOX_SANITIZE=address,undefined | thread | "" : instrument every target we
# build. Undefined behaviour aborts the run instead of printing and going on.
set(OUTBOX_SANITIZE "" CACHE STRING "Sanitizers to build with (address,undefined or thread)")
if(OUTBOX_SANITIZE)
  set(_flags "-fsanitize=${OUTBOX_SANITIZE}" -fno-omit-frame-pointer -g)
  if(OUTBOX_SANITIZE MATCHES "undefined")
    list(APPEND _flags -fno-sanitize-recover=all)
    # One known, harmless check inside RapidJSON 1.1 (see the file).
    if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      list(APPEND _flags "-fsanitize-ignorelist=${CMAKE_CURRENT_LIST_DIR}/rapidjson-ubsan.ignorelist")
    endif()
  endif()
  add_compile_options(${_flags})
  add_link_options("-fsanitize=${OUTBOX_SANITIZE}")
  message(STATUS "edge-outbox: sanitizers ${OUTBOX_SANITIZE}")
endif()

# OUTBOX_FUZZ=ON (clang only): builds the libFuzzer targets of tests/fuzz and
# instruments every target for coverage; combine with OUTBOX_SANITIZE.
option(OUTBOX_FUZZ "Build the libFuzzer targets in tests/fuzz (clang)" OFF)
if(OUTBOX_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
