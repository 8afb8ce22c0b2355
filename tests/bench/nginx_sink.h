// A sink in another process: Debian's nginx (nginx-light is enough) started
// on a private config that answers every POST with an empty 204, so that
// figure 3 can be measured with the receiver's CPU outside the benchmark's
// process as well as inside it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace outbox::bench {

class NginxSink {
 public:
  // Starts nginx in the foreground (no master process) listening on a free
  // port of 127.0.0.1, its config, pid and logs under `dir`. Returns null
  // with `why` set when no nginx binary is installed; throws when one is
  // installed but does not start answering within a few seconds.
  static std::unique_ptr<NginxSink> Start(const std::string& dir, std::string& why);
  // Stops it (SIGQUIT, then SIGKILL) and reaps it.
  ~NginxSink();
  NginxSink(const NginxSink&) = delete;
  NginxSink& operator=(const NginxSink&) = delete;

  std::string Url() const;

 private:
  NginxSink(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_;
  int port_;
};

}  // namespace outbox::bench
