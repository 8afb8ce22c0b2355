# outbox_target_warnings(target): the project's warning set on one of our own
# targets. Warnings become errors only when CMAKE_COMPILE_WARNING_AS_ERROR is ON
# (the CI configuration in packaging/dev.sh sets it).
function(outbox_target_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
    -Wnon-virtual-dtor -Woverloaded-virtual)
endfunction()
