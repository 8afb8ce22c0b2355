# Programs that the tests start themselves (outboxd, outboxctl, the example
# receiver, the crash suite's child agent) in a cross build. ctest and test
# discovery run a test's own binary under CMAKE_CROSSCOMPILING_EMULATOR, but
# an emulated program cannot start another one (without binfmt, an exec of a
# foreign binary fails with "Exec format error"), nor can a host Python test.
# So each such program gets a wrapper script that runs it under the emulator;
# tests are handed the wrapper's path instead of the binary's.
# The wrappers are PROJECT_BINARY_DIR/emulated/TARGET, one directory for a PATH.
#
# outbox_runnable(OUT TARGET): OUT = how to start TARGET: the wrapper's path
# in a cross build, else $<TARGET_FILE:TARGET>.
function(outbox_runnable out target)
  if(CMAKE_CROSSCOMPILING_EMULATOR)
    set(wrapper "${PROJECT_BINARY_DIR}/emulated/${target}")
    # Generated once: CMake refuses two file(GENERATE)s of one output.
    get_property(done GLOBAL PROPERTY OUTBOX_RUNNABLE_${target})
    if(done)
      set(${out} "${wrapper}" PARENT_SCOPE)
      return()
    endif()
    set_property(GLOBAL PROPERTY OUTBOX_RUNNABLE_${target} TRUE)
    list(JOIN CMAKE_CROSSCOMPILING_EMULATOR " " emulator)
    file(GENERATE OUTPUT "${wrapper}"
      CONTENT "#!/bin/sh\n# ${target} under ${emulator} (cmake/emulator.cmake)\nexec ${emulator} \"$<TARGET_FILE:${target}>\" \"$@\"\n"
      FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
        WORLD_READ WORLD_EXECUTE)
    set(${out} "${wrapper}" PARENT_SCOPE)
  else()
    set(${out} "$<TARGET_FILE:${target}>" PARENT_SCOPE)
  endif()
endfunction()

