#!/usr/bin/env bash
# Builds the Debian packages from a built tree and checks them and the
# installed CMake and pkg-config files, without touching the system:
# everything is extracted, staged and built under a throwaway directory.
#
# Usage: packaging/check-package.sh BUILD_DIR
#   BUILD_DIR is built and configured with -DCMAKE_INSTALL_PREFIX=/usr
#   -DOUTBOX_BUILD_TESTS=OFF, as docs/install.md says (packaging/dev.sh does
#   both). The packages are left in BUILD_DIR/package/. A cross build
#   (cmake/toolchains/debian-cross.cmake) gives packages of its architecture,
#   checked the same way: its programs and the consumers run under the
#   build's emulator.
#
# Checks, in order:
#   1. one cpack run builds edge-outbox_*.deb and edge-outbox-dev_*.deb; their
#      control data: Depends (dpkg-shlibdeps for edge-outbox, the libraries'
#      -dev packages for edge-outbox-dev), the conffile, the maintainer scripts;
#   2. each package's file list: the expected paths are there and nothing
#      else is; archives without debug info; programs hardened (PIE, full
#      RELRO, BIND_NOW, stack protector, fortified calls);
#   3. lintian: no error, no warning, no information tag (those not ours are
#      explained in the package's lintian overrides);
#   4. the installed CMake and pkg-config files name no build or stage path;
#      outboxctl and outboxd --check-config run from the extracted packages;
#      the man pages render without warnings;
#   5. the systemd unit passes systemd-analyze verify and keeps its
#      hardening (security exposure at most 2.0);
#   6. the example config is docs/configuration.md's; the alert rules pass
#      promtool check rules and cover the four alarms;
#   7. the maintainer scripts, run against stub commands: the user and group
#      are created once, nothing is ever enabled or started;
#   8. a staged install (DESTDIR): tests/consumer builds with
#      find_package(outbox) and runs; so does the same program built with
#      pkg-config --cflags --libs outbox.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:?usage: check-package.sh BUILD_DIR}" && pwd)

fail() {
  printf 'check-package: FAIL: %s\n' "$*" >&2
  exit 1
}
ok() { printf '  ok  %s\n' "$*"; }
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }

[ -f "$build/CPackConfig.cmake" ] || fail "$build is not a configured edge-outbox build tree"
prefix=$(cache CMAKE_INSTALL_PREFIX)
[ "$prefix" = /usr ] ||
  fail "$build is configured for prefix '$prefix'; a Debian package needs -DCMAKE_INSTALL_PREFIX=/usr"
libdir=$(cache CMAKE_INSTALL_LIBDIR) # lib/<multiarch>
cxx=$(cache CMAKE_CXX_COMPILER)
# A toolchain file's compiler is not cached; CMake records it here.
[ -n "$cxx" ] || cxx=$(sed -n 's/^set(CMAKE_CXX_COMPILER "\(.*\)")$/\1/p' \
  "$build"/CMakeFiles/[0-9]*/CMakeCXXCompiler.cmake | head -n 1)
[ -n "$cxx" ] || fail "$build names no C++ compiler"
# A cross build: the target's Debian architecture, and how to run its programs.
arch=$(cache OUTBOX_TARGET_ARCH)
[ -n "$arch" ] || arch=$(dpkg --print-architecture)
read -r -a emulator <<<"$(cache CMAKE_CROSSCOMPILING_EMULATOR)"
toolchain=$(cache CMAKE_TOOLCHAIN_FILE)
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What this build produced decides what the packages must hold.
programs=()
for p in outboxctl outboxd; do
  [ -n "$(find "$build" -name "$p" -type f -perm -u+x -not -path '*/CMakeFiles/*' \
    -not -path "$build/package/*" -print -quit)" ] &&
    programs+=("$p")
done
libraries=()
while IFS= read -r lib; do
  libraries+=("$lib")
done < <(find "$build" \( -name 'liboutbox_*.a' -o -name 'liboutbox_*.so' \) -not -path "$build/package/*" \
  -printf '%f\n' | sed 's/^lib\(outbox_[a-z_]*\)\..*/\1/' | sort -u)
[ ${#libraries[@]} -gt 0 ] || fail "no outbox library in $build: build it first"

# --- 1. the packages and their control data -----------------------------------
rm -rf "$build/package"
cpack --config "$build/CPackConfig.cmake" -B "$build/package" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack"; }
deb="$build/package/edge-outbox_${version}_$arch.deb"
dev="$build/package/edge-outbox-dev_${version}_$arch.deb"
for d in "$deb" "$dev"; do
  [ -f "$d" ] || fail "cpack made no ${d#"$build"/}: $(ls "$build/package")"
done
[ "$(find "$build/package" -maxdepth 1 -name '*.deb' | wc -l)" -eq 2 ] ||
  fail "cpack made other packages too: $(ls "$build/package")"
for d in "$deb" "$dev"; do
  printf '  %s (%s KiB, Installed-Size %s KiB)\n' "${d#"$build"/}" \
    "$(($(stat -c %s "$d") / 1024))" "$(dpkg-deb -f "$d" Installed-Size)"
done

field() { dpkg-deb -f "$1" "$2"; }
# has_dep LIST NAME: NAME is one of the comma-separated LIST's packages.
has_dep() { [[ ", $1," == *", $2"[\ ,]* ]]; }
[ "$(field "$deb" Package)" = edge-outbox ] || fail "Package: $(field "$deb" Package)"
[ "$(field "$dev" Package)" = edge-outbox-dev ] || fail "Package: $(field "$dev" Package)"
for d in "$deb" "$dev"; do
  # Native: this project packages itself (packaging/debian/changelog).
  [ "$(field "$d" Version)" = "$version" ] || fail "Version $(field "$d" Version) is not $version"
done
depends=$(field "$deb" Depends)
for d in adduser libc6 libstdc++6 libsqlite3-0 libcurl4 librabbitmq4; do
  has_dep "$depends" "$d" || fail "edge-outbox's Depends lacks $d (dpkg-shlibdeps?): $depends"
done
ok "edge-outbox: Depends: $depends"
dev_depends=$(field "$dev" Depends)
# What outboxConfig.cmake find_dependency()s, as the -dev packages holding it.
while IFS= read -r pkg; do
  case $pkg in
    SQLiteCpp) d=libsqlitecpp-dev ;;
    SQLite3) d=libsqlite3-dev ;;
    CURL) d=libcurl4-openssl-dev ;;
    OpenSSL) d=libssl-dev ;;
    spdlog) d=libspdlog-dev ;;
    fmt) d=libfmt-dev ;;
    CLI11) d=libcli11-dev ;;
    ZLIB) d=zlib1g-dev ;;
    Threads) continue ;;
    *) fail "outboxConfig.cmake needs $pkg: which Debian package has it? (add it here)" ;;
  esac
  has_dep "$dev_depends" "$d" || fail "edge-outbox-dev's Depends lacks $d (find_dependency($pkg))"
done < <(sed -n 's/^find_dependency(\([A-Za-z0-9_]*\))$/\1/p' "$build/packaging/outboxConfig.cmake")
# The broker sinks' C clients, linked by name (-lnats, -lmosquitto,
# -lrabbitmq in outbox.pc): a static consumer needs their -dev packages.
for d in libnats-dev libmosquitto-dev librabbitmq-dev; do
  has_dep "$dev_depends" "$d" || fail "edge-outbox-dev's Depends lacks $d (a broker sink's client)"
done
[ "$(field "$dev" Recommends)" = "edge-outbox (= $version)" ] ||
  fail "edge-outbox-dev's Recommends: $(field "$dev" Recommends)"
ok "edge-outbox-dev: Depends: $dev_depends; Recommends: edge-outbox (= $version)"
dpkg-deb -e "$deb" "$work/control"
[ "$(cat "$work/control/conffiles")" = /etc/outbox/outboxd.example.json ] ||
  fail "conffiles: $(cat "$work/control/conffiles")"
for s in postinst prerm postrm; do
  [ -x "$work/control/$s" ] || fail "no executable $s in edge-outbox"
done
dpkg-deb -e "$dev" "$work/control-dev"
[ -z "$(find "$work/control-dev" -type f -not -name control -not -name md5sums)" ] ||
  fail "edge-outbox-dev has maintainer scripts or conffiles: $(ls "$work/control-dev")"
ok "control: conffile /etc/outbox/outboxd.example.json; postinst, prerm, postrm in edge-outbox only"

# --- 2. the file lists ---------------------------------------------------------------
# check_files DEB EXPECTED_REGEX PATH...: every PATH is in DEB, and every file
# of DEB matches EXPECTED_REGEX.
check_files() {
  local deb=$1 allowed=$2 name
  shift 2
  name=$(basename "$deb")
  dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\.||' >"$work/files"
  for p in "$@"; do
    grep -qxF "$p" "$work/files" || fail "$name lacks $p"
  done
  unexpected=$(grep -v '/$' "$work/files" | grep -Ev "^($allowed)$" || true)
  [ -z "$unexpected" ] || fail "unexpected files in $name:"$'\n'"$unexpected"
  ok "files of $name: $# expected paths present, nothing unexpected"
}
runtime=(
  /lib/systemd/system/outboxd@.service
  /etc/outbox/outboxd.example.json
  /var/lib/outbox/
  /usr/share/edge-outbox/prometheus/outbox-alerts.yml
  /usr/share/doc/edge-outbox/README.md
  /usr/share/doc/edge-outbox/copyright
  /usr/share/doc/edge-outbox/changelog.gz
  /usr/lib/python3/dist-packages/edge_outbox/__init__.py
  /usr/lib/python3/dist-packages/edge_outbox/testing.py
  /usr/share/lintian/overrides/edge-outbox
)
for page in "$src"/docs/*.md; do runtime+=("/usr/share/doc/edge-outbox/docs/$(basename "$page")"); done
for p in "${programs[@]}"; do runtime+=("/usr/bin/$p"); done
[[ " ${programs[*]} " == *" outboxd "* ]] && runtime+=(/usr/share/man/man8/outboxd.8.gz)
[[ " ${programs[*]} " == *" outboxctl "* ]] && runtime+=(/usr/share/man/man1/outboxctl.1.gz)
check_files "$deb" "/usr/bin/outbox(d|ctl)|/usr/share/man/man(8/outboxd\.8|1/outboxctl\.1)\.gz|/usr/share/doc/edge-outbox/(README\.md|docs/[a-z-]+\.md|copyright|changelog\.gz)|/usr/share/edge-outbox/prometheus/[a-z-]+\.yml|/usr/lib/python3/dist-packages/edge_outbox/(__init__|testing)\.py|/usr/share/lintian/overrides/edge-outbox|/lib/systemd/system/outboxd@\.service|/etc/outbox/outboxd\.example\.json" \
  "${runtime[@]}"
development=(
  "/usr/$libdir/cmake/outbox/outboxConfig.cmake"
  "/usr/$libdir/cmake/outbox/outboxConfigVersion.cmake"
  "/usr/$libdir/cmake/outbox/outboxTargets.cmake"
  "/usr/$libdir/pkgconfig/outbox.pc"
  /usr/share/doc/edge-outbox-dev/copyright
  /usr/share/doc/edge-outbox-dev/changelog.gz
)
for l in "${libraries[@]}"; do
  case $l in
    outbox_util | outbox_row_json) ;; # internal archives: no header installed
    *) development+=("/usr/include/outbox/${l#outbox_}.h") ;;
  esac
  development+=("/usr/$libdir/lib$l.a")
done
check_files "$dev" "/usr/include/outbox/[a-z_]+\.h|/usr/$libdir/(liboutbox_[a-z_]+\.a|cmake/outbox/outbox[A-Za-z-]+\.cmake|pkgconfig/outbox\.pc)|/usr/share/doc/edge-outbox-dev/(copyright|changelog\.gz)" \
  "${development[@]}"

root="$work/root"
dpkg-deb -x "$deb" "$root"
dpkg-deb -x "$dev" "$root"
for l in "${libraries[@]}"; do
  sections=$(readelf -S -W "$root/usr/$libdir/lib$l.a")
  ! grep -qE '\] \.(debug_|comment)' <<<"$sections" || fail "lib$l.a keeps debug info or .comment"
done
ok "static libraries stripped of debug info ($(du -ck "$root/usr/$libdir"/liboutbox_*.a | tail -1 | cut -f1) KiB together)"
for p in "${programs[@]}"; do
  b="$root/usr/bin/$p"
  # Whole outputs first: grep -q stopping early would fail readelf (pipefail).
  header=$(readelf -h -l -d -S -W "$b")
  symbols=$(readelf --dyn-syms -W "$b")
  grep -qE '^ *Type: *DYN' <<<"$header" || fail "$p is not PIE"
  grep -q GNU_RELRO <<<"$header" || fail "$p has no RELRO segment"
  grep -qE 'FLAGS.*(BIND_NOW|NOW)' <<<"$header" || fail "$p is not linked with -z now"
  grep -q ' __stack_chk_fail' <<<"$symbols" || fail "$p has no stack protector"
  grep -qE ' __[a-z_]+_chk(@| )' <<<"$symbols" || fail "$p calls no fortified function"
  ! grep -q '\] \.debug_' <<<"$header" || fail "$p is not stripped"
done
ok "programs: PIE, full RELRO, BIND_NOW, stack protector, _FORTIFY_SOURCE, stripped"

# --- 3. lintian ----------------------------------------------------------------------
# Errors and warnings fail, and so does any information tag: each is fixed
# or explained in packaging/debian/edge-outbox.lintian-overrides (shipped in
# the package, where lintian reads it).
lintian --fail-on error,warning --display-info "$deb" "$dev" >"$work/lintian.log" 2>&1 ||
  { cat "$work/lintian.log" >&2; fail "lintian: errors or warnings (above)"; }
if grep -v '^running with root privileges' "$work/lintian.log" | grep -q .; then
  cat "$work/lintian.log" >&2
  fail "lintian: information tags (above): fix them, or explain them in an override"
fi
ok "lintian $(lintian --print-version): nothing reported, errors and warnings fatal, information tags too"

# --- 4. relocatable CMake and pkg-config files -------------------------------
if grep -rlF -e "$build" -e "$src" -e "$work" "$root/usr/$libdir/cmake/outbox" "$root/usr/$libdir/pkgconfig"; then
  fail "installed CMake or pkg-config files name a build path (above)"
fi
for p in "${programs[@]}"; do
  if readelf -d "$root/usr/bin/$p" | grep -E 'R(UN)?PATH' | grep -qF "$build"; then
    fail "/usr/bin/$p has an RPATH into the build tree"
  fi
done
ok "installed config files and programs name no build path"
for page in "$root"/usr/share/man/man*/*.gz; do
  out=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null) ||
    fail "man $(basename "$page"): $out"
  [ -z "$out" ] || fail "man $(basename "$page") warns: $out"
done
ok "man pages render without warnings: $(cd "$root/usr/share/man" && echo man*/*.gz)"

# --- 4a. the installed documentation: every relative link of README.md and
# docs/*.md leads to a file of the package.
broken=$(cd "$root/usr/share/doc/edge-outbox" && for page in README.md docs/*.md; do
  grep -oE '\]\([^)#: ]+(#[^)]*)?\)' "$page" | sed -E 's/^\]\(//; s/[)#].*$//' |
    while read -r target; do
      [ -e "$(dirname "$page")/$target" ] || echo "$page -> $target"
    done
done)
[ -z "$broken" ] || fail "links to files the package lacks:"$'\n'"$broken"
ok "installed documentation: README.md and $(find "$root/usr/share/doc/edge-outbox/docs" -name '*.md' | wc -l) pages, every relative link resolves"

# --- 4b. the programs, run from the extracted packages --------------------------
export LD_LIBRARY_PATH="$root/usr/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ctl="$root/usr/bin/outboxctl"
"${emulator[@]}" "$ctl" --help >"$work/help.txt" || fail "outboxctl --help"
grep -q init "$work/help.txt" || fail "outboxctl --help does not mention init"
"${emulator[@]}" "$ctl" --db "$work/extracted.db" init >/dev/null || fail "outboxctl --db X init"
"${emulator[@]}" "$ctl" --db "$work/extracted.db" stats >/dev/null || fail "outboxctl --db X stats"
ok "outboxctl from the package: --help, init, stats"
if [ -x "$root/usr/bin/outboxd" ]; then
  # The example's secrets are env: references; give them dummy values.
  ORDERS_TOKEN="Bearer check-package" \
    ORDERS_WEBHOOK_SECRET="whsec_$(printf 'check-package-secret-32-bytes!!!' | base64)" \
    "${emulator[@]}" "$root/usr/bin/outboxd" --db "$work/extracted.db" \
    --config "$root/etc/outbox/outboxd.example.json" --check-config ||
    fail "outboxd --check-config on the example config"
  "${emulator[@]}" "$root/usr/bin/outboxd" --version >/dev/null || fail "outboxd --version"
  ok "outboxd from the package: --version, --check-config on the example config"
else
  echo "  (outboxd is not built yet: its --check-config step is skipped)"
fi

# --- 5. the systemd unit ----------------------------------------------------------
unit="$root/lib/systemd/system/outboxd@.service"
mkdir "$work/unit"
daemon=/bin/true # until outboxd exists, verify everything else
[ -x "$root/usr/bin/outboxd" ] && daemon="$root/usr/bin/outboxd"
sed "s|/usr/bin/outboxd|$daemon|" "$unit" >"$work/unit/outboxd@.service"
systemd-analyze verify "$work/unit/outboxd@.service" >"$work/verify.log" 2>&1 ||
  { cat "$work/verify.log" >&2; fail "systemd-analyze verify"; }
[ ! -s "$work/verify.log" ] || { cat "$work/verify.log" >&2; fail "systemd-analyze verify warns"; }
exposure=$(systemd-analyze security --offline=true --threshold=20 "$work/unit/outboxd@.service" 2>&1 | tail -1) ||
  fail "the unit lost its hardening: $exposure"
# shellcheck disable=SC2016 # $MAINPID is systemd's, not ours
for key in 'ProtectSystem=strict' 'ReadWritePaths=/var/lib/outbox/%i' 'NoNewPrivileges=yes' \
  'UMask=0007' 'User=outbox' 'Restart=on-failure' 'ExecReload=/bin/kill -HUP $MAINPID' \
  'EnvironmentFile=/etc/outbox/%i.env'; do
  grep -qxF "$key" "$unit" || fail "the unit lacks $key"
done
ok "unit: systemd-analyze verify clean; ${exposure#→ }"

# --- 6. example config and alert rules ------------------------------------------
python3 - "$root/etc/outbox/outboxd.example.json" "$src/docs/configuration.md" <<'PY' || fail "example config"
import json, re, sys
text = open(sys.argv[1]).read()
json.loads(text)
block = re.search(r"```json\n(.*?)```", open(sys.argv[2]).read(), re.S)
if not block or block.group(1) != text:
    sys.exit("outboxd.example.json differs from the config example in docs/configuration.md")
print("  ok  example config: valid JSON, identical to docs/configuration.md's")
PY
rules="$root/usr/share/edge-outbox/prometheus/outbox-alerts.yml"
promtool check rules "$rules" >"$work/promtool.log" 2>&1 ||
  { cat "$work/promtool.log" >&2; fail "promtool check rules $(basename "$rules")"; }
ok "promtool check rules: $(grep -o 'SUCCESS: [0-9]* rules found' "$work/promtool.log")"
python3 - "$root/usr/share/edge-outbox/prometheus/outbox-alerts.yml" <<'PY' || fail "alert rules"
import sys, yaml
rules = [r for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"]]
assert all(r.get("alert") and r.get("expr") for r in rules), "every rule needs alert and expr"
exprs = " ".join(r["expr"] for r in rules)
for metric in ("outbox_dead", "outbox_oldest_pending_age_seconds",
               "outbox_recycled_total", "outbox_pool_rejections_total"):
    assert metric in exprs, "no alert on " + metric
print("  ok  alert rules: %d alerts, the four alarms covered" % len(rules))
PY

# --- 7. maintainer scripts against stubs -------------------------------------------
# Stubs record every call; a fake /run/systemd/system makes the scripts take
# their "systemd is running" branch.
stubs="$work/stubs" state="$work/state"
mkdir -p "$stubs" "$state" "$work/run-systemd"
cat >"$stubs/getent" <<EOF
#!/bin/sh
case "\$1" in
  group) [ -e "$state/group" ] ;;
  passwd) [ -e "$state/passwd" ] ;;
  shadow) [ -e "$state/passwd" ] && echo "outbox:*:19000:0:99999:7::\$(cat "$state/expire" 2>/dev/null):" ;;
  *) exit 2 ;;
esac
EOF
for cmd in addgroup adduser usermod systemctl deb-systemd-invoke; do
  cat >"$stubs/$cmd" <<EOF
#!/bin/sh
echo "$cmd \$*" >>"$work/calls"
case "$cmd \$*" in
  addgroup*) touch "$state/group" ;;
  adduser*) touch "$state/passwd" ;;
  *"--expiredate 1"*) echo 1 >"$state/expire" ;;
  *"--expiredate "*) : >"$state/expire" ;;
esac
EOF
done
chmod +x "$stubs"/*
run_script() {
  sed "s|/run/systemd/system|$work/run-systemd|" "$work/control/$1" >"$work/$1"
  PATH="$stubs:$PATH" sh -e "$work/$1" "$2" || fail "$1 $2"
}
run_script postinst configure # fresh install
run_script postinst configure # reconfigure: nothing to create
run_script prerm upgrade
run_script prerm remove
run_script postrm remove
run_script postrm purge
run_script postinst configure # reinstall after purge
cat >"$work/calls.expected" <<'EOF'
addgroup --system --quiet outbox
adduser --system --quiet --ingroup outbox --no-create-home --home /nonexistent --shell /usr/sbin/nologin --gecos edge-outbox agent outbox
systemctl --system daemon-reload
systemctl --system daemon-reload
deb-systemd-invoke stop outboxd@*.service
systemctl --system daemon-reload
usermod --lock --expiredate 1 outbox
systemctl --system daemon-reload
usermod --expiredate  outbox
systemctl --system daemon-reload
EOF
diff -u "$work/calls.expected" "$work/calls" >&2 || fail "maintainer scripts made other calls (diff above)"
! grep -Ew 'enable|start|restart|try-restart|reload-or-restart|preset|unmask' "$work/calls" ||
  fail "a maintainer script enables or starts a unit"
ok "maintainer scripts: user and group created once, re-enabled after purge; nothing enabled or started"

# --- 8. staged install: find_package and pkg-config consumers -----------------
stage="$work/stage"
DESTDIR="$stage" cmake --install "$build" >/dev/null || fail "DESTDIR=$stage cmake --install"
cross=()
[ -z "$toolchain" ] || cross=(-DCMAKE_TOOLCHAIN_FILE="$toolchain" -DOUTBOX_TARGET_ARCH="$arch")
cmake -S "$src/tests/consumer" -B "$work/consumer" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
  "${cross[@]}" -DCMAKE_PREFIX_PATH="$stage/usr" >"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log" >&2; fail "configuring tests/consumer against the stage"; }
found=$(sed -n 's/^outbox_DIR:PATH=//p' "$work/consumer/CMakeCache.txt")
[ "$found" = "$stage/usr/$libdir/cmake/outbox" ] || fail "find_package(outbox) found '$found', not the stage"
cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log" >&2; fail "building tests/consumer"; }
out=$("${emulator[@]}" "$work/consumer/consumer" "$work/consumer.db") || fail "tests/consumer: $out"
[ "$out" = pending=1 ] || fail "tests/consumer printed '$out'"
linked=$(sed -n 's/^-- consumer links: //p' "$work/consumer.log")
ok "tests/consumer via find_package(outbox) from the stage: $out (links $linked)"
if [ -x "$work/consumer/consumer_testing" ]; then
  out=$("${emulator[@]}" "$work/consumer/consumer_testing") || fail "tests/consumer consumer_testing: $out"
  [ "$out" = delivered=1 ] || fail "tests/consumer consumer_testing printed '$out'"
  ok "tests/consumer with outbox::testing via find_package(outbox): $out"
elif [[ " ${libraries[*]} " == *" outbox_testing "* ]]; then
  fail "tests/consumer built no consumer_testing although outbox_testing is installed"
fi

export PKG_CONFIG_PATH="$stage/usr/$libdir/pkgconfig"
# A cross build: the dependencies' .pc files of the target architecture only.
[ -z "$toolchain" ] || export PKG_CONFIG_LIBDIR="/usr/$libdir/pkgconfig:/usr/share/pkgconfig"
pc() { pkg-config --define-variable=prefix="$stage/usr" "$@" outbox; }
[ "$(pc --modversion)" = "$version" ] || fail "pkg-config --modversion outbox: $(pc --modversion)"
[ "$(pkg-config --path outbox)" = "$stage/usr/$libdir/pkgconfig/outbox.pc" ] || fail "pkg-config found $(pkg-config --path outbox)"
flags=$(pc --cflags --libs) || fail "pkg-config --cflags --libs outbox"
flags=${flags% }
# shellcheck disable=SC2086 # the flags are words
"$cxx" -std=c++20 "$src/tests/consumer/main.cc" -o "$work/consumer-pc" $flags ||
  fail "building tests/consumer/main.cc with: $flags"
out=$("${emulator[@]}" "$work/consumer-pc" "$work/consumer-pc.db") || fail "pkg-config consumer: $out"
[ "$out" = pending=1 ] || fail "pkg-config consumer printed '$out'"
ok "pkg-config --cflags --libs outbox: $flags"
ok "the same program built with those flags: $out"
