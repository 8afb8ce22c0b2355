# The sidecar pieces of the agent component (issue #6): the configuration
# file, Prometheus text, the commit watcher and the outboxd daemon. Kept in
# their own file so that agent/CMakeLists.txt only needs
#
#   include(sidecar.cmake)
#   outbox_add_sidecar(outbox_agent)
#
# RapidJSON (rapidjson-dev, pulled in by libcereal-dev) and cpp-httplib are
# used only inside src/ and tools/: consumers of outbox::agent never see them.
find_package(RapidJSON REQUIRED)
find_package(spdlog REQUIRED)
if(NOT TARGET PkgConfig::HTTPLIB)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
endif()

set(OUTBOX_SIDECAR_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/commit_watcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/config.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/prometheus.cc)

# RapidJSON 1.1 adds to a null pointer before its stack's first allocation
# (see transport/rapidjson-ubsan.ignorelist); the config parser meets it on
# every parse, so UBSan ignores that one check there too.
if(NOT DEFINED OUTBOX_RAPIDJSON_UBSAN_IGNORELIST)
  set(OUTBOX_RAPIDJSON_UBSAN_IGNORELIST
    ${CMAKE_CURRENT_LIST_DIR}/../transport/rapidjson-ubsan.ignorelist)
endif()
if(OUTBOX_SANITIZE MATCHES "undefined" AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang"
   AND EXISTS ${OUTBOX_RAPIDJSON_UBSAN_IGNORELIST})
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/src/config.cc PROPERTIES
    COMPILE_OPTIONS "-fsanitize-ignorelist=${OUTBOX_RAPIDJSON_UBSAN_IGNORELIST}")
endif()

# outbox_add_sidecar(library): compiles the sidecar sources into `library`
# (the agent's library target) and defines the outboxd executable over it.
function(outbox_add_sidecar library)
  target_sources(${library} PRIVATE ${OUTBOX_SIDECAR_SOURCES})
  target_include_directories(${library} SYSTEM PRIVATE ${RAPIDJSON_INCLUDE_DIRS})
  target_link_libraries(${library} PRIVATE spdlog::spdlog)

  add_executable(outboxd ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/tools/outboxd.cc)
  # outboxd binds the metrics address with the parser the config uses.
  target_include_directories(outboxd PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/src)
  target_link_libraries(outboxd PRIVATE ${library} spdlog::spdlog PkgConfig::HTTPLIB
                                        CLI11::CLI11 Threads::Threads)
  outbox_target_warnings(outboxd)
  install(TARGETS outboxd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
