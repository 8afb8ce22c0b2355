// Listening sockets for the HTTP server: TCP from a ListenAddress, or a Unix
// socket path created without following links. Internal to outbox_util.
#pragma once

#include <sys/types.h>

#include <string>

#include "util/listen_address.h"

namespace outbox::util::http {

// A listening, non-blocking, close-on-exec socket. Throws
// std::runtime_error "cannot listen on HOST:PORT (reason)". `port` gets the
// bound port.
int ListenTcp(const ListenAddress& address, int& port);

// Binds a Unix socket at `path` with `mode`. An existing path is refused
// unless it is a socket nobody answers on (a dead server's), which is
// replaced; a link or any other file is never followed or removed. The
// socket is bound under a temporary name beside `path`, given its mode and
// then renamed into place, so nobody can connect before the mode holds.
// Throws std::runtime_error "cannot listen on PATH (reason)".
int ListenUnix(const std::string& path, mode_t mode);

}  // namespace outbox::util::http
