# Hardening flags for the binaries we ship, as Debian builds its packages
# (dpkg-buildflags with hardening=+all): stack protector, PIE, full RELRO
# with immediate binding, and _FORTIFY_SOURCE where the optimiser makes it
# work (it needs -O1 or more). Sanitizer and fuzzing builds are test tools,
# never shipped, and keep their own instrumentation alone.
option(OUTBOX_HARDENING "Build with Debian's hardening flags (not with sanitizers)" ON)
if(OUTBOX_HARDENING AND NOT OUTBOX_SANITIZE AND NOT OUTBOX_FUZZ)
  include(CheckPIESupported)
  check_pie_supported(LANGUAGES C CXX)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  add_compile_options(-fstack-protector-strong)
  add_link_options(LINKER:-z,relro LINKER:-z,now)
  if(NOT "${CMAKE_CXX_FLAGS} ${CMAKE_C_FLAGS}" MATCHES "_FORTIFY_SOURCE")
    add_compile_definitions($<$<NOT:$<CONFIG:Debug>>:_FORTIFY_SOURCE=2>)
  endif()
endif()
