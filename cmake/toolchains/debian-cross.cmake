# Cross-compiling for another Debian architecture on a Debian 12 machine, with
# Debian's cross compilers (crossbuild-essential-ARCH) and the :ARCH
# development packages of every dependency installed beside the native ones
# (multiarch). Pick the target with OUTBOX_TARGET_ARCH (a Debian architecture:
# arm64 or armhf):
#
#   cmake -S . -B build-arm64 -DOUTBOX_TARGET_ARCH=arm64 \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/debian-cross.cmake
#
# Binaries of the target run on this machine under qemu-user-static, called
# directly (binfmt need not be registered): CMAKE_CROSSCOMPILING_EMULATOR, so
# that ctest and test discovery run them, and the tests that start a program
# themselves go through the wrappers of cmake/emulator.cmake.
if(NOT OUTBOX_TARGET_ARCH)
  set(OUTBOX_TARGET_ARCH "$ENV{OUTBOX_TARGET_ARCH}")
endif()
if(OUTBOX_TARGET_ARCH STREQUAL "arm64")
  set(_triplet aarch64-linux-gnu)
  set(CMAKE_SYSTEM_PROCESSOR aarch64)
  set(_qemu qemu-aarch64-static)
elseif(OUTBOX_TARGET_ARCH STREQUAL "armhf")
  set(_triplet arm-linux-gnueabihf)
  set(CMAKE_SYSTEM_PROCESSOR armv7l)
  set(_qemu qemu-arm-static)
  # g++ notes on armhf that the passing of some std:: types changed in GCC 7.1:
  # news only for code mixed with objects built before it, which Debian 12
  # has none of.
  set(CMAKE_CXX_FLAGS_INIT "-Wno-psabi")
else()
  message(FATAL_ERROR "debian-cross.cmake: set OUTBOX_TARGET_ARCH to arm64 or armhf, "
    "not '${OUTBOX_TARGET_ARCH}'")
endif()
# try_compile projects see the choice too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES OUTBOX_TARGET_ARCH)

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${_triplet}-gcc)
set(CMAKE_CXX_COMPILER ${_triplet}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${_triplet})
# Debian's multiarch layout: the target's libraries and CMake packages under
# /usr/lib/TRIPLET, headers in /usr/include (and /usr/include/TRIPLET).
set(CMAKE_FIND_ROOT_PATH /usr/${_triplet})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config: the target's .pc files only (and the architecture-free ones).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${_triplet}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

find_program(_outbox_qemu ${_qemu})
if(_outbox_qemu)
  # Cached, so that packaging/check-package.sh finds it in CMakeCache.txt.
  set(CMAKE_CROSSCOMPILING_EMULATOR ${_outbox_qemu} CACHE FILEPATH
    "Runs the target's programs on this machine (qemu-user-static)")
else()
  message(WARNING "debian-cross.cmake: ${_qemu} not found (Debian package "
    "qemu-user-static): the build works, its tests cannot run here")
endif()
# The .deb's Architecture field.
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${OUTBOX_TARGET_ARCH})
