#!/bin/sh
# Prints a help2man include file: STATIC, then a [COMMANDS] section with the
# --help of each of PROGRAM's subcommands, so that the man page lists every
# subcommand with its flags straight from the program.
#
#   subcommands-h2m.sh PROGRAM STATIC > OUTPUT
set -eu
program=$1
static=$2
cat "$static"
printf '[COMMANDS]\n'
"$program" --help | sed -n '/^Subcommands:/,$p' | sed '1d' | awk '/^  [a-z]/ {print $1}' |
  while read -r command; do
    printf '.SS %s\n.nf\n' "$command"
    # roff: a backslash is written twice, a line starting with a dot escaped.
    "$program" --db FILE "$command" --help |
      sed 's/\\/\\\\/g; s/^\./\\\&./'
    printf '.fi\n'
  done
