# The sidecar pieces of the agent component (issue #6): the configuration
# file, Prometheus text, the commit watcher and the outboxd daemon. Included
# by agent/CMakeLists.txt:
#
#   include(sidecar.cmake)
#   outbox_add_sidecar(outbox_agent)
#
# RapidJSON and cpp-httplib are used only inside src/ and tools/: consumers
# of outbox::agent never see them. outboxd is installed by
# cmake/install-rules.cmake like every program.
set(OUTBOX_SIDECAR_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/commit_watcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/config.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/prometheus.cc)

# outbox_add_sidecar(library): compiles the sidecar sources into `library`
# (the agent's library target) and defines the outboxd executable over it.
function(outbox_add_sidecar library)
  target_sources(${library} PRIVATE ${OUTBOX_SIDECAR_SOURCES})

  add_executable(outboxd ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/tools/outboxd.cc)
  # outboxd binds the metrics address with the parser the config uses.
  target_include_directories(outboxd PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/src)
  target_link_libraries(outboxd PRIVATE ${library} spdlog::spdlog PkgConfig::HTTPLIB
                                        CLI11::CLI11 Threads::Threads)
  outbox_target_warnings(outboxd)
endfunction()
