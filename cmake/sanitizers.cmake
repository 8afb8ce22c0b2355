# OUTBOX_SANITIZE=address,undefined | thread | "" : instrument every target we
# build. Undefined behaviour aborts the run instead of printing and going on.
set(OUTBOX_SANITIZE "" CACHE STRING "Sanitizers to build with (address,undefined or thread)")
if(OUTBOX_SANITIZE)
  set(_flags "-fsanitize=${OUTBOX_SANITIZE}" -fno-omit-frame-pointer -g)
  if(OUTBOX_SANITIZE MATCHES "undefined")
    list(APPEND _flags -fno-sanitize-recover=all)
  endif()
  add_compile_options(${_flags})
  add_link_options("-fsanitize=${OUTBOX_SANITIZE}")
  message(STATUS "edge-outbox: sanitizers ${OUTBOX_SANITIZE}")
endif()
