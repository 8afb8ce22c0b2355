#!/usr/bin/env bash
# Developer entry point: installs what is missing, builds, runs.
#
#   packaging/dev.sh demo    build and run the end-to-end demo
#   packaging/dev.sh check   everyday work: the g++ build and the unit tests
#                            (util, store, transport, agent; a few minutes)
#   packaging/dev.sh test    build and run every test: g++ (warnings are
#                            errors; with the producers in Python, Go and
#                            Node.js and /metrics judged by promtool and the
#                            OpenMetrics parser), the validators (shellcheck,
#                            systemd-analyze verify, promtool check rules),
#                            the two Debian packages from a build without
#                            tests, checked with lintian and the installed
#                            CMake/pkg-config files (packaging/check-package.sh),
#                            clang ASan+UBSan (all but the `slow` crash test
#                            and the `broker` tests, which run in the g++
#                            stage only, and the `bench` smoke run),
#                            clang TSan (`unit`), and every libFuzzer target
#                            for FUZZ_SECONDS (default 20) each; then, under
#                            qemu-user-static, the arm64 cross build's unit
#                            suites and the armhf cross build's smoke run
#   packaging/dev.sh cross ARCH [all|unit|smoke]
#                            ARCH = arm64 or armhf: cross-build with Debian's
#                            cross compilers and run the tests under
#                            qemu-user-static: every suite and then the two
#                            packages for ARCH, built and checked (all, the
#                            default), the unit label only, or a smoke run
#   packaging/dev.sh bench   build and run the benchmarks (not part of test)
#   packaging/dev.sh soak    build and run the soak (ctest label soak, not part
#                            of test): outboxd under load and outages for
#                            OUTBOX_SOAK_MINUTES (default 30)
#   packaging/dev.sh deps    only install the Debian packages
#
# Works as root on a fresh Debian 12 machine; without root it uses sudo for
# apt-get when something is missing. Build trees: build/, build-asan/,
# build-tsan/, build-fuzz/, build-deb/ at the top of the repository.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)
# As on a fresh machine, whatever the caller's environment: Python leaves its
# byte code beside the modules the tests import (the packages must not).
unset PYTHONDONTWRITEBYTECODE

# Everything the build, the tests and the demo need, by Debian package name.
# prometheus is there for promtool (Debian has no smaller package with it);
# the brokers are started by the tests themselves. None of their system
# services may run or stay enabled: see service_units.
packages=(
  build-essential cmake ninja-build pkg-config git clang-14 libclang-rt-14-dev
  libsqlite3-dev sqlite3 libsqlitecpp-dev libcurl4-openssl-dev libssl-dev
  rapidjson-dev libspdlog-dev libfmt-dev libcli11-dev
  libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev python3
  dpkg-dev python3-yaml systemd ccache file llvm-14
  help2man lintian shellcheck prometheus python3-prometheus-client
  golang-go golang-github-mattn-go-sqlite3-dev
  nats-server mosquitto libnats-dev libmosquitto-dev
  rabbitmq-server librabbitmq-dev python3-pika
  zlib1g-dev tmux libsystemd-dev
  chromium chromium-driver python3-selenium
)
# The system services that packages installed here ship (or pull in).
# dev.sh needs their programs, never the services: installing one starts
# nothing (policy-rc.d) and leaves it disabled. Add a unit here with any
# package that brings one.
service_units=(
  prometheus.service mosquitto.service nats-server.service
  rabbitmq-server.service epmd.service epmd.socket nginx.service
)
# What `cross ARCH` adds: the cross compilers, the emulator, and the ARCH
# builds of every library the project links (multiarch, beside the native
# ones; the architecture-independent headers come with the list above).
cross_libraries=(
  libsqlite3-dev libsqlitecpp-dev libcurl4-openssl-dev libssl-dev libspdlog-dev
  libfmt-dev libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev libnats-dev libmosquitto-dev librabbitmq-dev libsystemd-dev
)
# Debian's node-sqlite3 needs Debian's nodejs; see install_node.
node_packages=(nodejs node-sqlite3)
node_tests=yes

# Compiler cache: a later run on the same machine (another clone included:
# paths are hashed relative to the checkout) rebuilds only what changed.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1

stage_start=0
stage() {
  stage_start=$(date +%s)
  printf '\n=== %s\n' "$*"
}
stage_done() {
  printf '=== done in %ss\n' "$(( $(date +%s) - stage_start ))"
}

# Installs those of the given Debian packages that are missing.
install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  stage "installing ${#missing[@]} Debian packages (and what they depend on): ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  apt_install_quietly "${missing[@]}"
  stage_done
}

# apt-get install that starts no service: a policy-rc.d that refuses every
# start while it runs (unless the machine has its own), then every unit of
# service_units disabled (and stopped, where systemd runs).
apt_install_quietly() {
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  local policy=/usr/sbin/policy-rc.d own_policy=no
  if [ ! -e "$policy" ]; then
    own_policy=yes
    printf '#!/bin/sh\n# packaging/dev.sh: no service starts while it installs\nexit 101\n' |
      "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
  fi
  local status=0
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null || status=$?
  [ "$own_policy" = no ] || "${sudo[@]}" rm -f "$policy"
  [ "$status" -eq 0 ] || return "$status"
  quiet_services
}

# Disables (and, where systemd runs, stops) each unit of service_units that
# exists on this machine.
quiet_services() {
  command -v systemctl >/dev/null || return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  local unit
  for unit in "${service_units[@]}"; do
    [ -e "/lib/systemd/system/$unit" ] || continue
    "${sudo[@]}" systemctl disable --quiet "$unit" 2>/dev/null || true
    if [ -d /run/systemd/system ]; then
      "${sudo[@]}" systemctl stop "$unit" 2>/dev/null || true
    fi
  done
}

install_deps() { install_packages "${packages[@]}"; }

# Packages only `bench` needs: nginx-light answers figure 3's requests from
# another process (the benchmark starts its own on a private config and port;
# without it that row says it was skipped). Where systemd runs, the package
# also enables a server on port 80.
install_bench_deps() { install_packages nginx-light; }

# The Node.js snippet's packages. A machine whose nodejs comes from elsewhere
# (NodeSource, say) cannot install node-sqlite3 beside it (it depends on
# Debian's nodejs and libnode); there the Node.js snippet test is left out,
# saying so, and the rest runs.
install_node() {
  local missing=()
  for p in "${node_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  if "${sudo[@]}" apt-get install -s -qq --no-install-recommends "${node_packages[@]}" >/dev/null 2>&1; then
    stage "installing ${missing[*]}"
    apt_install_quietly "${node_packages[@]}"
    stage_done
  else
    node_tests=no
    printf '\n=== NOTE: node-sqlite3 cannot be installed beside this machine'"'"'s nodejs (%s, not Debian'"'"'s):\n' \
      "$(dpkg-query -W -f='${Version}' nodejs 2>/dev/null || echo '?')"
    printf '=== the Node.js producer snippet test (producers.NodeSnippetTest) is left out\n'
  fi
}

# A ctest regex of the tests this machine cannot run, or nothing.
machine_skip_regex() {
  [ "$node_tests" = yes ] || echo producers.NodeSnippetTest
}

# ctest arguments that leave out what this machine cannot run.
skipped_tests() {
  local regex
  regex=$(machine_skip_regex)
  [ -z "$regex" ] || printf '%s\n' -E "$regex"
}

# configure_and_build DIR [cmake args...]
configure_and_build() {
  local dir=$1
  shift
  local launcher=()
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$root" -B "$root/$dir" -G Ninja -DCMAKE_COMPILE_WARNING_AS_ERROR=ON \
    "${launcher[@]}" "$@" >/dev/null
  cmake --build "$root/$dir" -j "$jobs"
}

# run_tests DIR [ctest args...]
run_tests() {
  local dir=$1
  shift
  ctest --test-dir "$root/$dir" --output-on-failure -j "$jobs" --timeout 300 "$@"
}

build_gcc() {
  stage "build (g++)"
  CC=gcc CXX=g++ configure_and_build build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX=/usr
  stage_done
}

# Every shell script of the repository: *.sh and the maintainer scripts.
shell_scripts() {
  if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$root" ls-files -- '*.sh' 'packaging/debian/post*' 'packaging/debian/pre*'
  else
    (cd "$root" && find . -path './build*' -prune -o \( -name '*.sh' -o -path './packaging/debian/p*' \) \
      -type f -print | sed 's|^\./||')
  fi
}

validators() {
  stage "validators: shellcheck, systemd-analyze verify, promtool check rules"
  local scripts=()
  mapfile -t scripts < <(shell_scripts)
  (cd "$root" && shellcheck --external-sources "${scripts[@]}")
  echo "  ok  shellcheck: ${#scripts[@]} scripts"
  # The unit as installed names /usr/bin/outboxd; verify it against the
  # built one (systemd-analyze wants ExecStart to exist).
  local unit_dir
  unit_dir=$(mktemp -d)
  sed "s|/usr/bin/outboxd|$root/build/agent/outboxd|" "$root/packaging/systemd/outboxd@.service" \
    >"$unit_dir/outboxd@.service"
  if ! systemd-analyze verify "$unit_dir/outboxd@.service" >"$unit_dir/log" 2>&1 || [ -s "$unit_dir/log" ]; then
    cat "$unit_dir/log" >&2
    rm -rf "$unit_dir"
    echo "systemd-analyze verify: the unit has problems (above)" >&2
    return 1
  fi
  rm -rf "$unit_dir"
  echo "  ok  systemd-analyze verify outboxd@.service"
  promtool check rules "$root"/packaging/prometheus/*.yml | sed '/^ *$/d; s/^/  /'
  stage_done
}

build_package() {
  stage "package: two .debs from a build without tests, lintian, staged install, consumers"
  CC=gcc CXX=g++ configure_and_build build-deb -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX=/usr -DOUTBOX_BUILD_TESTS=OFF
  "$root/packaging/check-package.sh" "$root/build-deb"
  stage_done
}

cmd_test() {
  local total_start
  total_start=$(date +%s)
  install_deps
  install_node
  local skip=()
  mapfile -t skip < <(skipped_tests)
  build_gcc

  stage "tests (g++): every label"
  run_tests build "${skip[@]}"
  # The figures of the reliability suites (tests/reliability), from the log.
  grep -ahE '^(crash test|receiver faults|outages|full disk|hostile rows)' \
    "$root/build/Testing/Temporary/LastTest.log" | sed 's/^/  /' || true
  stage_done

  validators
  build_package

  stage "build (clang 14, ASan + UBSan)"
  CC=clang-14 CXX=clang++-14 configure_and_build build-asan \
    -DCMAKE_BUILD_TYPE=Debug -DOUTBOX_SANITIZE=address,undefined
  stage_done
  stage "tests (ASan + UBSan): every label but slow, broker, browser and bench"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_tests build-asan -LE 'slow|broker|browser|bench' "${skip[@]}"

  stage_done

  stage "build (clang 14, TSan)"
  CC=clang-14 CXX=clang++-14 configure_and_build build-tsan \
    -DCMAKE_BUILD_TYPE=Debug -DOUTBOX_SANITIZE=thread
  stage_done
  stage "tests (TSan): unit"
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp" \
    run_tests build-tsan -L unit
  stage_done

  stage "fuzz (clang 14, libFuzzer): build"
  # Only the fuzz targets (and the libraries under them), every one
  # instrumented for coverage.
  local launcher=()
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$root/build-fuzz" -G Ninja \
    -DCMAKE_COMPILE_WARNING_AS_ERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DOUTBOX_SANITIZE=address,undefined -DOUTBOX_FUZZ=ON "${launcher[@]}" >/dev/null
  cmake --build "$root/build-fuzz" -j "$jobs" --target fuzzers
  stage_done
  stage "fuzz (clang 14, libFuzzer): ${FUZZ_SECONDS:-20} s per target, ASan + UBSan"
  "$root/tests/fuzz/run.sh" "$root/build-fuzz" "${FUZZ_SECONDS:-20}"
  stage_done

  # The ARM boards it is for, under qemu-user-static: the arm64 build's unit
  # suites, and the 32-bit armhf build's smoke run (the programs start; time
  # past 2038, sizes past 4 GiB); `dev.sh cross ARCH` runs every suite and
  # builds the packages.
  install_cross_deps arm64
  install_cross_deps armhf
  cross_run arm64 unit
  cross_run armhf smoke

  printf '\nall tests passed in %ss\n' "$(( $(date +%s) - total_start ))"
}

# install_cross_deps ARCH: the foreign architecture, its cross compilers,
# qemu-user-static and the ARCH libraries.
install_cross_deps() {
  local arch=$1
  if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
    stage "adding the Debian architecture $arch (dpkg --add-architecture)"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" dpkg --add-architecture "$arch"
    stage_done
  fi
  install_packages "crossbuild-essential-$arch" qemu-user-static "${cross_libraries[@]/%/:$arch}"
}

# configure_cross DIR ARCH [cmake args...]: a build tree for ARCH.
configure_cross() {
  local dir=$1 arch=$2
  shift 2
  configure_and_build "$dir" -DOUTBOX_TARGET_ARCH="$arch" \
    -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/debian-cross.cmake" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr "$@"
}

# The programs of a cross build start under the emulator, and an expires_at
# past 2038 survives a round trip through outboxctl (which matters most in
# the 32-bit armhf build).
cross_programs_start() {
  local dir=$1 emulator=$2 db
  db=$(mktemp -d)
  "$emulator" "$root/$dir/agent/outboxd" --version
  "$emulator" "$root/$dir/agent/outboxctl" --db "$db/smoke.db" init
  "$emulator" "$root/$dir/agent/outboxctl" --db "$db/smoke.db" enqueue --topic smoke --key k1 \
    --expires-at 2040-01-01T00:00:00Z </dev/null
  "$emulator" "$root/$dir/agent/outboxctl" --db "$db/smoke.db" show --topic smoke --key k1 |
    grep -q 'expires_at: *2040-01-01T00:00:00.000Z' ||
    { rm -rf "$db"; echo "cross smoke: an expires_at past 2038 did not survive" >&2; return 1; }
  rm -rf "$db"
  echo "  ok  outboxd --version, outboxctl init/enqueue/show (expires_at 2040) under $emulator"
}

# The smoke run of a cross build: the programs start, and the unit tests of
# time and sizes (every 32-bit hazard) pass.
cross_smoke() {
  cross_programs_start "$1" "$2"
  run_tests "$1" -R 'Year2038|Past2038|ParseRetryAfter|SizesPast4GiB|Rfc3339|ParseTimeArg'
}

# cross_run ARCH all|unit|smoke: the cross build, its tests under the
# emulator, and (all) the packages; the dependencies are installed already.
cross_run() {
  local arch=$1 scope=$2 triplet emulator
  case $arch in
    arm64) triplet=aarch64-linux-gnu emulator=qemu-aarch64-static ;;
    armhf) triplet=arm-linux-gnueabihf emulator=qemu-arm-static ;;
  esac
  stage "cross build ($arch, $triplet-g++)"
  if [ "$scope" = smoke ]; then
    configure_and_build_targets "build-$arch" "$arch" outboxd outboxctl util_test transport_test \
      agent_test
  elif [ "$scope" = unit ]; then
    configure_and_build_targets "build-$arch" "$arch" outboxd outboxctl unit_tests
  else
    configure_cross "build-$arch" "$arch"
  fi
  stage_done

  stage "tests ($arch under $emulator): $scope"
  # Emulation is 5-20x slower: deadlines scale by OUTBOX_TEST_SLOWDOWN; bounds
  # on time, memory or speed are judged natively only (OUTBOX_TEST_EMULATED).
  export OUTBOX_TEST_SLOWDOWN=10 OUTBOX_TEST_EMULATED=1
  # Tests left out under emulation, each as "NAME|reason" (printed). The
  # tests that judge a memory bound judge it natively only and print why
  # (OUTBOX_TEST_EMULATED).
  local emulation_skips=(
    "bench.Smoke|benchmarks are judged natively only: under qemu-user they would time the emulator"
  )
  local skip=() skip_regex="" entry
  for entry in "${emulation_skips[@]}"; do
    printf '  skipped under emulation: %s: %s\n' "${entry%%|*}" "${entry#*|}"
    skip_regex+="${skip_regex:+|}${entry%%|*}"
  done
  # And what this machine cannot run (install_node says why).
  local machine
  machine=$(machine_skip_regex)
  [ -z "$machine" ] || skip_regex+="${skip_regex:+|}$machine"
  [ -z "$skip_regex" ] || skip=(-E "$skip_regex")
  case $scope in
    all) run_tests "build-$arch" -LE 'soak' "${skip[@]}" --timeout 1800 ;;
    unit)
      cross_programs_start "build-$arch" "$emulator"
      run_tests "build-$arch" -L '^unit$' "${skip[@]}" --timeout 900
      ;;
    smoke) cross_smoke "build-$arch" "$emulator" ;;
  esac
  unset OUTBOX_TEST_SLOWDOWN OUTBOX_TEST_EMULATED
  stage_done

  if [ "$scope" = all ]; then
    stage "package ($arch): two .debs from a cross build without tests, lintian, staged install"
    configure_cross "build-deb-$arch" "$arch" -DOUTBOX_BUILD_TESTS=OFF
    "$root/packaging/check-package.sh" "$root/build-deb-$arch"
    stage_done
  fi
}

# cross ARCH [all|unit|smoke]
cmd_cross() {
  local arch=${1:-} scope=${2:-all}
  case $arch in arm64 | armhf) ;; *)
    echo "usage: $0 cross arm64|armhf [all|unit|smoke]" >&2
    exit 2
    ;;
  esac
  case $scope in all | unit | smoke) ;; *)
    echo "usage: $0 cross $arch [all|unit|smoke]" >&2
    exit 2
    ;;
  esac
  local total_start
  total_start=$(date +%s)
  install_deps
  install_node
  install_cross_deps "$arch"
  cross_run "$arch" "$scope"
  printf '\ncross %s (%s) passed in %ss\n' "$arch" "$scope" "$(( $(date +%s) - total_start ))"
}

# configure_and_build_targets DIR ARCH TARGET...: a cross tree, only TARGETs built.
configure_and_build_targets() {
  local dir=$1 arch=$2
  shift 2
  local launcher=()
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$root" -B "$root/$dir" -G Ninja -DCMAKE_COMPILE_WARNING_AS_ERROR=ON "${launcher[@]}" \
    -DOUTBOX_TARGET_ARCH="$arch" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/debian-cross.cmake" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
  cmake --build "$root/$dir" -j "$jobs" --target "$@"
}

# Everyday work: the g++ build and the fast suites (label unit: the util,
# store, transport and agent unit tests).
cmd_check() {
  local total_start
  total_start=$(date +%s)
  install_deps
  build_gcc
  stage "tests (g++): unit"
  run_tests build -L '^unit$'
  stage_done
  printf '\ncheck passed in %ss (packaging/dev.sh test runs everything)\n' \
    "$(( $(date +%s) - total_start ))"
}

cmd_demo() {
  install_deps
  build_gcc
  stage "demo"
  "$root/packaging/demo.sh" "$root/build"
  stage_done
}

cmd_bench() {
  install_deps
  install_bench_deps
  stage "build (g++, Release): the benchmarks, outboxd, outboxctl, the sink benchmarks"
  # Warnings stay warnings here: g++ 12 at -O3 reports false -Wrestrict
  # positives inside libstdc++'s std::string (GCC bug 105329); the test
  # command builds everything with warnings as errors.
  local launcher=()
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=gcc CXX=g++ cmake -S "$root" -B "$root/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_COMPILE_WARNING_AS_ERROR=OFF "${launcher[@]}" >/dev/null
  cmake --build "$root/build-bench" -j "$jobs" --target outbox_bench naive_relay bytes_bench outboxd \
    outboxctl sink_bench amqp_bench compression_bench
  stage_done
  stage "benchmarks"
  "$root/packaging/bench.sh" "$root/build-bench"
  stage_done
}

case "${1:-}" in
  check) cmd_check ;;
  cross)
    shift
    cmd_cross "$@"
    ;;
  test) cmd_test ;;
  demo) cmd_demo ;;
  bench) cmd_bench ;;
  soak)
    install_deps
    build_gcc
    stage "soak (${OUTBOX_SOAK_MINUTES:-30} min)"
    # -V: the figures (one JSON line) are printed on success too.
    OUTBOX_SOAK=1 ctest --test-dir "$root/build" -L soak -V
    stage_done
    ;;
  deps) install_deps ;;
  *)
    echo "usage: $0 demo|check|test|cross ARCH|bench|soak|deps" >&2
    exit 2
    ;;
esac
