# Unit tests of the sidecar pieces (config, Prometheus text, commit watcher),
# compiled into the agent's test executable: tests/agent/CMakeLists.txt only
# needs
#
#   include(sidecar.cmake)
#   outbox_add_sidecar_tests(agent_test)
set(OUTBOX_SIDECAR_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/commit_watcher_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/config_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/prometheus_test.cc)

function(outbox_add_sidecar_tests target)
  target_sources(${target} PRIVATE ${OUTBOX_SIDECAR_TEST_SOURCES})
  # The watcher and the Prometheus renderer with injected time are internal.
  target_include_directories(${target} PRIVATE
    ${PROJECT_SOURCE_DIR}/agent/src ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${target} PRIVATE outbox::store SQLite::SQLite3)
endfunction()
