# install-rules.cmake: how edge-outbox installs, exports and packages itself.
#
# Included once from the top-level CMakeLists.txt AFTER every component's
# add_subdirectory(), so that it sees every target and its link libraries.
#
# Wiring in a component: the targets listed below install when they exist, so
# outbox_transport, outbox_agent and outboxd need no line of their own. A new
# library or program is one more name in OUTBOX_INSTALL_LIBRARIES or
# OUTBOX_INSTALL_PROGRAMS. A library's public headers are the `include/`
# folder beside its CMakeLists.txt (STYLE.md rule 1).
#
# What the package config needs from other packages is read off the
# libraries' INTERFACE_LINK_LIBRARIES (for static libraries CMake records the
# private dependencies there too, as $<LINK_ONLY:...>), so the installed
# outboxConfig.cmake, outbox.pc and the -dev package's Depends can't silently miss a
# dependency: an imported target without an entry in
# _outbox_describe_dependency() below stops the configure step.
#
# Layout. With CMAKE_INSTALL_PREFIX=/usr (the Debian package, see
# packaging/check-package.sh) the example config goes to /etc/outbox, the
# systemd unit to /lib/systemd/system and the parent of the database
# directories is /var/lib/outbox, as Debian 12 expects. Under any other prefix
# all three stay inside the prefix (etc/outbox, lib/systemd/system,
# var/lib/outbox), so `cmake --install build --prefix DIR` of such a build
# never writes outside DIR. A /usr build is staged with DESTDIR instead.

include(CMakePackageConfigHelpers)

# Libraries in link order (a library before the ones it uses), then programs.
# outbox_row_json and outbox_util are internal (no headers installed): their
# archives go along so that static builds of the others link.
set(OUTBOX_INSTALL_LIBRARIES
  outbox_testing outbox_agent outbox_row_json outbox_transport outbox_store outbox_util)
set(OUTBOX_INSTALL_PROGRAMS outboxd outboxctl)

set(OUTBOX_INSTALL_CMAKEDIR "" CACHE STRING
    "Where outboxConfig.cmake goes (empty: LIBDIR/cmake/outbox)")
set(OUTBOX_INSTALL_CONFDIR "" CACHE STRING
    "Where the example config goes (empty: /etc/outbox for prefix /usr, else etc/outbox)")
set(OUTBOX_INSTALL_UNITDIR "" CACHE STRING
    "Where the systemd unit goes (empty: /lib/systemd/system for prefix /usr, else lib/systemd/system)")
mark_as_advanced(OUTBOX_INSTALL_CMAKEDIR OUTBOX_INSTALL_CONFDIR OUTBOX_INSTALL_UNITDIR)

set(_outbox_cmakedir "${OUTBOX_INSTALL_CMAKEDIR}")
if(NOT _outbox_cmakedir)
  set(_outbox_cmakedir "${CMAKE_INSTALL_LIBDIR}/cmake/outbox")
endif()
set(_outbox_confdir "${OUTBOX_INSTALL_CONFDIR}")
set(_outbox_unitdir "${OUTBOX_INSTALL_UNITDIR}")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  if(NOT _outbox_confdir)
    set(_outbox_confdir /etc/outbox)
  endif()
  if(NOT _outbox_unitdir)
    set(_outbox_unitdir /lib/systemd/system)
  endif()
  set(_outbox_statedir /var/lib/outbox)
else()
  if(NOT _outbox_confdir)
    set(_outbox_confdir "${CMAKE_INSTALL_SYSCONFDIR}/outbox")
  endif()
  if(NOT _outbox_unitdir)
    set(_outbox_unitdir lib/systemd/system)
  endif()
  set(_outbox_statedir "${CMAKE_INSTALL_LOCALSTATEDIR}/lib/outbox")
endif()
# Absolute forms, for the files that name these paths.
foreach(_dir confdir unitdir statedir)
  if(IS_ABSOLUTE "${_outbox_${_dir}}")
    set(_outbox_full_${_dir} "${_outbox_${_dir}}")
  else()
    set(_outbox_full_${_dir} "${CMAKE_INSTALL_PREFIX}/${_outbox_${_dir}}")
  endif()
endforeach()

# A /usr build names /etc, /lib and /var: `cmake --install --prefix DIR` of it
# would still write there, so refuse that; stage it with DESTDIR instead.
if(IS_ABSOLUTE "${_outbox_confdir}" OR IS_ABSOLUTE "${_outbox_unitdir}"
   OR IS_ABSOLUTE "${_outbox_statedir}")
  install(CODE "
    if(NOT CMAKE_INSTALL_PREFIX STREQUAL \"${CMAKE_INSTALL_PREFIX}\"
       AND \"\$ENV{DESTDIR}\" STREQUAL \"\")
      message(FATAL_ERROR \"edge-outbox was configured for ${CMAKE_INSTALL_PREFIX} and \"
        \"installs files to ${_outbox_full_confdir}, ${_outbox_full_unitdir} and \"
        \"${_outbox_full_statedir}; --prefix would not move them. Stage it \"
        \"with DESTDIR=DIR cmake --install BUILD, or configure with \"
        \"-DCMAKE_INSTALL_PREFIX=\${CMAKE_INSTALL_PREFIX}.\")
    endif()"
    ALL_COMPONENTS)
endif()

# _outbox_describe_dependency(ITEM): what a consumer of the installed package
# needs for one entry of a library's INTERFACE_LINK_LIBRARIES. Sets, in the
# caller's scope: _dep_package (for find_dependency), _dep_pc_requires
# (pkg-config modules), _dep_pc_libs and _dep_pc_cflags (flags for what has no
# .pc file) and _dep_deb (the Debian package holding its development files).
function(_outbox_describe_dependency item)
  set(package "")
  set(requires "")
  set(libs "")
  set(cflags "")
  set(deb "")
  if(item STREQUAL "SQLiteCpp")
    # Debian's libsqlitecpp-dev ships only a static library and no .pc
    # file; these flags copy its SQLiteCppTargets.cmake.
    set(package SQLiteCpp)
    set(requires sqlite3)
    set(libs -lSQLiteCpp -pthread -ldl)
    set(cflags -DSQLITE_ENABLE_COLUMN_METADATA)
    set(deb libsqlitecpp-dev)
  elseif(item STREQUAL "SQLite::SQLite3")
    set(package SQLite3)
    set(requires sqlite3)
    set(deb libsqlite3-dev)
  elseif(item STREQUAL "CURL::libcurl")
    set(package CURL)
    set(requires libcurl)
    set(deb libcurl4-openssl-dev)
  elseif(item STREQUAL "OpenSSL::SSL")
    set(package OpenSSL)
    set(requires libssl)
    set(deb libssl-dev)
  elseif(item STREQUAL "OpenSSL::Crypto")
    set(package OpenSSL)
    set(requires libcrypto)
    set(deb libssl-dev)
  elseif(item MATCHES "^spdlog::")
    set(package spdlog)
    set(requires spdlog)
    set(deb libspdlog-dev)
  elseif(item MATCHES "^fmt::")
    set(package fmt)
    set(requires fmt)
    set(deb libfmt-dev)
  elseif(item STREQUAL "CLI11::CLI11")
    set(package CLI11)  # header-only
    set(deb libcli11-dev)
  elseif(item STREQUAL "ZLIB::ZLIB")
    set(package ZLIB)
    set(requires zlib)
    set(deb zlib1g-dev)
  elseif(item STREQUAL "Threads::Threads")
    set(package Threads)
    set(libs -pthread)
  else()
    message(FATAL_ERROR
      "install-rules.cmake: an installed outbox library links ${item}; tell "
      "_outbox_describe_dependency() how a consumer finds it (find_package name, "
      "pkg-config module, Debian -dev package).")
  endif()
  set(_dep_package "${package}" PARENT_SCOPE)
  set(_dep_pc_requires "${requires}" PARENT_SCOPE)
  set(_dep_pc_libs "${libs}" PARENT_SCOPE)
  set(_dep_pc_cflags "${cflags}" PARENT_SCOPE)
  set(_dep_deb "${deb}" PARENT_SCOPE)
endfunction()

# --- libraries, headers, export set ------------------------------------------

set(_outbox_find_packages "")
set(_outbox_pc_requires "")
set(_outbox_pc_own_libs "")
set(_outbox_pc_dep_libs "")
set(_outbox_pc_cflags "")
set(_outbox_deb_dev_depends "")
set(_outbox_any_shared FALSE)
foreach(_lib IN LISTS OUTBOX_INSTALL_LIBRARIES)
  if(NOT TARGET ${_lib})
    continue()
  endif()
  get_target_property(_type ${_lib} TYPE)
  string(REGEX REPLACE "^outbox_" "" _name "${_lib}")
  # outbox_store is exported as outbox::store, the same name as in-tree.
  set_target_properties(${_lib} PROPERTIES EXPORT_NAME ${_name})
  if(_type STREQUAL "SHARED_LIBRARY")
    set(_outbox_any_shared TRUE)
    # 0.x: every minor release may break the ABI.
    set_target_properties(${_lib} PROPERTIES
      VERSION ${PROJECT_VERSION}
      SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  endif()
  install(TARGETS ${_lib} EXPORT outboxTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
            NAMELINK_COMPONENT Development
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  get_target_property(_out ${_lib} OUTPUT_NAME)
  if(NOT _out)
    set(_out ${_lib})
  endif()
  if(_type STREQUAL "STATIC_LIBRARY")
    # A stripped install (cpack with CPACK_STRIP_FILES, cmake --install
    # --strip) strips archives too, as dh_strip does: CMake's own strip step
    # skips them, and their debug info is twenty times their code.
    install(CODE "
      if(CMAKE_INSTALL_DO_STRIP)
        execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug --remove-section=.comment
            --remove-section=.note --enable-deterministic-archives
            \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/lib${_out}.a\"
          COMMAND_ERROR_IS_FATAL ANY)
      endif()"
      COMPONENT Development)
  endif()
  get_target_property(_src ${_lib} SOURCE_DIR)
  if(IS_DIRECTORY "${_src}/include" AND NOT _lib MATCHES "^outbox_(row_json|util)$")
    install(DIRECTORY "${_src}/include/"
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
      COMPONENT Development
      FILES_MATCHING PATTERN "*.h")
  endif()
  list(APPEND _outbox_pc_own_libs "-l${_out}")

  get_target_property(_links ${_lib} INTERFACE_LINK_LIBRARIES)
  if(NOT _links)
    set(_links "")
  endif()
  foreach(_item IN LISTS _links)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _item "${_item}")
    if(_item MATCHES "^outbox(_|::)")
      continue()  # one of ours: same export set
    endif()
    if(_item MATCHES "^\\$<")
      message(FATAL_ERROR "install-rules.cmake: ${_lib} links ${_item}; "
        "generator expressions in link libraries are not handled here")
    endif()
    if(NOT TARGET ${_item})
      # A plain library name or flag, e.g. m or -latomic.
      if(_item MATCHES "^-")
        list(APPEND _outbox_pc_dep_libs "${_item}")
      else()
        list(APPEND _outbox_pc_dep_libs "-l${_item}")
      endif()
      # The broker sinks' C clients, linked by name (transport/CMakeLists.txt).
      if(_item STREQUAL "nats")
        list(APPEND _outbox_deb_dev_depends libnats-dev)
      elseif(_item STREQUAL "mosquitto")
        list(APPEND _outbox_deb_dev_depends libmosquitto-dev)
      elseif(_item STREQUAL "rabbitmq")
        list(APPEND _outbox_deb_dev_depends librabbitmq-dev)
      elseif(_item STREQUAL "cpp-httplib")
        # outbox::testing's receiver (agent/testing/CMakeLists.txt).
        list(APPEND _outbox_deb_dev_depends libcpp-httplib-dev)
      endif()
      continue()
    endif()
    _outbox_describe_dependency("${_item}")
    list(APPEND _outbox_find_packages ${_dep_package})
    list(APPEND _outbox_pc_requires ${_dep_pc_requires})
    list(APPEND _outbox_pc_dep_libs ${_dep_pc_libs})
    list(APPEND _outbox_pc_cflags ${_dep_pc_cflags})
    list(APPEND _outbox_deb_dev_depends ${_dep_deb})
  endforeach()
endforeach()
foreach(_list _outbox_find_packages _outbox_pc_requires _outbox_pc_dep_libs
              _outbox_pc_cflags _outbox_deb_dev_depends)
  list(REMOVE_DUPLICATES ${_list})
endforeach()
# -pthread last: after every archive that may need it.
if("-pthread" IN_LIST _outbox_pc_dep_libs)
  list(REMOVE_ITEM _outbox_pc_dep_libs -pthread)
  list(APPEND _outbox_pc_dep_libs -pthread)
endif()

install(EXPORT outboxTargets
  NAMESPACE outbox::
  DESTINATION ${_outbox_cmakedir}
  COMPONENT Development)

set(OUTBOX_FIND_DEPENDENCIES "")
foreach(_pkg IN LISTS _outbox_find_packages)
  string(APPEND OUTBOX_FIND_DEPENDENCIES "find_dependency(${_pkg})\n")
endforeach()
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/outboxConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/packaging/outboxConfig.cmake"
  INSTALL_DESTINATION ${_outbox_cmakedir})
# 0.x: a minor release may break the API, so only the same minor is compatible.
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/packaging/outboxConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES
    "${PROJECT_BINARY_DIR}/packaging/outboxConfig.cmake"
    "${PROJECT_BINARY_DIR}/packaging/outboxConfigVersion.cmake"
  DESTINATION ${_outbox_cmakedir}
  COMPONENT Development)

# pkg-config: static libraries need their dependencies on the link line, so
# everything goes into Requires/Libs, not the .private fields.
foreach(_dir libdir includedir)
  string(TOUPPER "${_dir}" _up)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_up}}")
    set(OUTBOX_PC_${_up} "${CMAKE_INSTALL_${_up}}")
  else()
    set(OUTBOX_PC_${_up} "\${prefix}/${CMAKE_INSTALL_${_up}}")
  endif()
endforeach()
list(JOIN _outbox_pc_requires " " OUTBOX_PC_REQUIRES)
list(JOIN _outbox_pc_own_libs " " _own)
list(JOIN _outbox_pc_dep_libs " " _deps)
set(OUTBOX_PC_LIBS "-L\${libdir} ${_own} ${_deps}")
list(JOIN _outbox_pc_cflags " " OUTBOX_PC_CFLAGS)
configure_file("${PROJECT_SOURCE_DIR}/packaging/outbox.pc.in"
  "${PROJECT_BINARY_DIR}/packaging/outbox.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/packaging/outbox.pc"
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
  COMPONENT Development)

# --- programs, service, config, docs ------------------------------------------

foreach(_prog IN LISTS OUTBOX_INSTALL_PROGRAMS)
  if(NOT TARGET ${_prog})
    continue()
  endif()
  if(_outbox_any_shared AND NOT CMAKE_INSTALL_FULL_LIBDIR IN_LIST
     CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    set_target_properties(${_prog} PROPERTIES
      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  endif()
  install(TARGETS ${_prog}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
  # CMake's strip keeps the compiler's .comment; dh_strip drops it too.
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --remove-section=.comment --remove-section=.note
          \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${_prog}\"
        COMMAND_ERROR_IS_FATAL ANY)
    endif()"
    COMPONENT Runtime)
endforeach()

# The unit in the source tree names the Debian paths; elsewhere, rewrite them.
set(_outbox_unit_source "${PROJECT_SOURCE_DIR}/packaging/systemd/outboxd@.service")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_outbox_unit_source}")
file(READ "${_outbox_unit_source}" _unit)
string(REPLACE "/usr/bin/" "${CMAKE_INSTALL_FULL_BINDIR}/" _unit "${_unit}")
string(REPLACE "/usr/share/doc/edge-outbox/" "${CMAKE_INSTALL_FULL_DOCDIR}/" _unit "${_unit}")
string(REPLACE "/etc/outbox/" "${_outbox_full_confdir}/" _unit "${_unit}")
string(REPLACE "/var/lib/outbox/" "${_outbox_full_statedir}/" _unit "${_unit}")
file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/packaging/outboxd@.service"
  CONTENT "${_unit}" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/packaging/outboxd@.service"
  DESTINATION "${_outbox_unitdir}"
  COMPONENT Runtime)
install(FILES "${PROJECT_SOURCE_DIR}/packaging/outboxd.example.json"
  DESTINATION "${_outbox_confdir}"
  COMPONENT Runtime)
# Parent of the per-instance database directories (the unit's ReadWritePaths).
install(DIRECTORY DESTINATION "${_outbox_statedir}" COMPONENT Runtime)
install(FILES "${PROJECT_SOURCE_DIR}/packaging/prometheus/outbox-alerts.yml"
  DESTINATION ${CMAKE_INSTALL_DATADIR}/edge-outbox/prometheus
  COMPONENT Runtime)
# README.md and docs/ as in the repository, so that the README's relative
# links (docs/...) and the pages' links to each other work in the installed
# tree. Uncompressed on purpose: a compressed page breaks every link to it.
install(FILES "${PROJECT_SOURCE_DIR}/README.md"
  DESTINATION ${CMAKE_INSTALL_DOCDIR}
  COMPONENT Runtime)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/docs/"
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
  COMPONENT Runtime
  FILES_MATCHING PATTERN "*.md")

# The Python producer module, where Debian's python3 finds it.
set(OUTBOX_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "Where the edge_outbox Python module goes (relative: under the prefix)")
mark_as_advanced(OUTBOX_INSTALL_PYTHONDIR)
# A package: edge_outbox (enqueue) and edge_outbox.testing (docs/testing.md).
install(DIRECTORY "${PROJECT_SOURCE_DIR}/packaging/python/edge_outbox"
  DESTINATION "${OUTBOX_INSTALL_PYTHONDIR}"
  COMPONENT Runtime
  # The tests import it from the source tree first, which leaves byte code
  # there unless PYTHONDONTWRITEBYTECODE is set (a fresh machine's default).
  FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)

# --- Debian package (CPack DEB) -------------------------------------------------
# Build them with: cpack --config BUILD/CPackConfig.cmake (packaging/check-package.sh)
# on a build configured with -DCMAKE_INSTALL_PREFIX=/usr -DOUTBOX_BUILD_TESTS=OFF.
# Two packages, as Debian splits a library and its programs:
#   edge-outbox      outboxd, outboxctl, the unit, the example config, the alert
#                    rules, the man pages and the Python producer module
#                    (install component Runtime);
#   edge-outbox-dev  headers, static libraries (stripped), CMake package and
#                    pkg-config file (install component Development).
# Installing either starts nothing. The version is native (no Debian
# revision): this project packages itself, so the changelog is changelog.gz.

# The changelog's newest entry must be this version, and gives its date to
# the man pages (SOURCE_DATE_EPOCH).
set(_outbox_changelog "${PROJECT_SOURCE_DIR}/packaging/debian/changelog")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_outbox_changelog}")
file(STRINGS "${_outbox_changelog}" _outbox_changelog_top LIMIT_COUNT 1)
if(NOT _outbox_changelog_top MATCHES "^edge-outbox \\(${PROJECT_VERSION}\\) ")
  message(FATAL_ERROR "packaging/debian/changelog starts with '${_outbox_changelog_top}'; "
    "add an entry for edge-outbox (${PROJECT_VERSION}) at its top")
endif()
file(STRINGS "${_outbox_changelog}" _outbox_changelog_date REGEX "^ -- " LIMIT_COUNT 1)
string(REGEX REPLACE "^ -- .*>  " "" _outbox_changelog_date "${_outbox_changelog_date}")
execute_process(COMMAND date -u -d "${_outbox_changelog_date}" +%s
  OUTPUT_VARIABLE _outbox_changelog_epoch OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _status)
if(NOT _status EQUAL 0 OR NOT _outbox_changelog_epoch MATCHES "^[0-9]+$")
  message(FATAL_ERROR "packaging/debian/changelog: no date in the newest entry's trailer "
    "(read '${_outbox_changelog_date}')")
endif()
find_program(OUTBOX_GZIP gzip REQUIRED)

# Each package's /usr/share/doc/PACKAGE: the machine-readable copyright file
# and the changelog, compressed as Debian policy wants (gzip -9n).
add_custom_command(OUTPUT "${PROJECT_BINARY_DIR}/packaging/debian/changelog.gz"
  COMMAND "${OUTBOX_GZIP}" -9n -c "${_outbox_changelog}"
    > "${PROJECT_BINARY_DIR}/packaging/debian/changelog.gz"
  DEPENDS "${_outbox_changelog}"
  COMMENT "Compressing the Debian changelog")
add_custom_target(outbox_changelog ALL DEPENDS "${PROJECT_BINARY_DIR}/packaging/debian/changelog.gz")
foreach(_component_package Runtime:edge-outbox Development:edge-outbox-dev)
  string(REPLACE ":" ";" _pair "${_component_package}")
  list(GET _pair 0 _component)
  list(GET _pair 1 _package)
  install(FILES "${PROJECT_SOURCE_DIR}/packaging/debian/copyright"
      "${PROJECT_BINARY_DIR}/packaging/debian/changelog.gz"
    DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/${_package}"
    COMPONENT ${_component})
endforeach()

# --- man pages -------------------------------------------------------------------
# outboxd(8) and outboxctl(1) are help2man's reading of the programs' own
# --help and --version, so they cannot drift from the code; the prose that
# --help has no room for (files, signals, see also) is in packaging/man/*.h2m.
option(OUTBOX_MANPAGES "Generate man pages for outboxd and outboxctl (needs help2man)" ON)
if(OUTBOX_MANPAGES)
  find_program(OUTBOX_HELP2MAN help2man)
  if(NOT OUTBOX_HELP2MAN)
    message(FATAL_ERROR "edge-outbox: the man pages need help2man (Debian package "
      "help2man); install it or configure with -DOUTBOX_MANPAGES=OFF")
  endif()
  set(_outbox_man_outboxd 8 "deliver committed outbox rows of one SQLite database over HTTP")
  set(_outbox_man_outboxctl 1 "inspect and operate the outbox table of a SQLite database")
  set(_outbox_man_pages "")
  foreach(_prog IN LISTS OUTBOX_INSTALL_PROGRAMS)
    if(NOT TARGET ${_prog})
      continue()
    endif()
    list(GET _outbox_man_${_prog} 0 _section)
    list(GET _outbox_man_${_prog} 1 _name)
    set(_include "${PROJECT_SOURCE_DIR}/packaging/man/${_prog}.h2m")
    set(_page "${PROJECT_BINARY_DIR}/man/${_prog}.${_section}")
    # help2man runs the program: under the emulator in a cross build.
    outbox_runnable(_run ${_prog})
    if(_prog STREQUAL "outboxctl")
      # outboxctl(1) lists every subcommand with its flags, from the program.
      set(_static "${_include}")
      set(_include "${PROJECT_BINARY_DIR}/man/outboxctl.h2m")
      add_custom_command(OUTPUT "${_include}"
        COMMAND ${CMAKE_COMMAND} -E make_directory "${PROJECT_BINARY_DIR}/man"
        COMMAND sh "${PROJECT_SOURCE_DIR}/packaging/man/subcommands-h2m.sh"
          "${_run}" "${_static}" > "${_include}"
        DEPENDS outboxctl "${_static}" "${PROJECT_SOURCE_DIR}/packaging/man/subcommands-h2m.sh"
        COMMENT "Listing outboxctl's subcommands for its man page")
    endif()
    # The date of the newest changelog entry, not today's: the same source
    # gives the same page.
    add_custom_command(OUTPUT "${_page}.gz"
      COMMAND ${CMAKE_COMMAND} -E make_directory "${PROJECT_BINARY_DIR}/man"
      COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=${_outbox_changelog_epoch}
        "${OUTBOX_HELP2MAN}" --no-info --no-discard-stderr --section=${_section}
        --name=${_name} --include=${_include} --output=${_page} "${_run}"
      COMMAND "${OUTBOX_GZIP}" -9nf "${_page}"
      DEPENDS ${_prog} "${_include}" "${PROJECT_SOURCE_DIR}/packaging/debian/changelog"
      COMMENT "Generating ${_prog}(${_section}) with help2man"
      VERBATIM)
    list(APPEND _outbox_man_pages "${_page}.gz")
    install(FILES "${_page}.gz"
      DESTINATION "${CMAKE_INSTALL_MANDIR}/man${_section}"
      COMPONENT Runtime)
  endforeach()
  add_custom_target(outbox_man_pages ALL DEPENDS ${_outbox_man_pages})
endif()

# What lintian reports about text that is not ours, explained where it is.
install(FILES "${PROJECT_SOURCE_DIR}/packaging/debian/edge-outbox.lintian-overrides"
  DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides"
  RENAME edge-outbox
  COMPONENT Runtime)

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL Runtime Development)
set(CPACK_PACKAGE_NAME edge-outbox)
set(CPACK_PACKAGE_VENDOR "edge-outbox developers")
set(CPACK_PACKAGE_CONTACT "edge-outbox developers <dev@edge-outbox.invalid>")
# Each package's description below starts with its own synopsis line. CPack
# prepends CPACK_PACKAGE_DESCRIPTION_SUMMARY to it unless the summary is
# CPack's default text, so it is set to exactly that.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# edge-outbox: runtime libraries from dpkg-shlibdeps; postinst needs
# adduser (prerm's deb-systemd-invoke is in init-system-helpers, which is
# essential).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME edge-outbox)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "adduser")
# Only the Python module needs python3.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "python3")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
"transactional outbox for SQLite on edge devices
An application commits its own rows and an outbox row in one SQLite
transaction; outboxd, beside it, pushes the message over HTTP right after
the commit and retries until the receiver acknowledges it (at-least-once,
with a stable Idempotency-Key).
.
This package contains outboxd with its systemd template unit
outboxd@.service, outboxctl, their man pages, an example config,
Prometheus alert rules and the Python producer module edge_outbox.")
file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/packaging/debian/conffiles"
  CONTENT "${_outbox_full_confdir}/outboxd.example.json\n")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  "${PROJECT_BINARY_DIR}/packaging/debian/conffiles"
  "${PROJECT_SOURCE_DIR}/packaging/debian/postinst"
  "${PROJECT_SOURCE_DIR}/packaging/debian/prerm"
  "${PROJECT_SOURCE_DIR}/packaging/debian/postrm")

# edge-outbox-dev: the static libraries are self-contained, so it does not
# need outboxd; find_package(outbox) and pkg-config outbox need the -dev
# packages of what the libraries link (read off the targets above). It
# recommends the same version of edge-outbox: outboxctl creates the schema,
# and outboxd beside an application should know the same schema.
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME edge-outbox-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SHLIBDEPS OFF)
list(TRANSFORM _outbox_deb_dev_depends REPLACE "^libcurl4-openssl-dev$"
  "libcurl4-openssl-dev | libcurl-dev")
list(JOIN _outbox_deb_dev_depends ", " CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_RECOMMENDS "edge-outbox (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
"transactional outbox for SQLite on edge devices - development files
An application commits its own rows and an outbox row in one SQLite
transaction; the outbox agent pushes the message over HTTP right after the
commit and retries until the receiver acknowledges it.
.
This package contains the C++20 headers and static libraries (store,
transport, agent) with their CMake package (find_package(outbox)) and
pkg-config file (outbox), to enqueue from C++ or to run the agent inside an
application.")
if(_outbox_any_shared)
  # A shlibs file for packages linking us, and ldconfig after (de)installation.
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_GENERATE_SHLIBS ON)
  file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/packaging/debian/triggers"
    CONTENT "activate-noawait ldconfig\n")
  list(APPEND CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
    "${PROJECT_BINARY_DIR}/packaging/debian/triggers")
endif()
include(CPack)
