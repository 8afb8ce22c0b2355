// Runs a program to completion and captures what it wrote, for tests of the
// command-line tools. Header-only: a few lines of posix_spawn.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace outbox::reliability::testing {

struct ProcessResult {
  int wait_status = 0;
  std::string out;
  std::string err;

  bool Exited() const { return WIFEXITED(wait_status); }
  int ExitCode() const { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }
  // Non-zero when a signal ended it (a crash).
  int Signal() const { return WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0; }
};

// Runs `argv` (argv[0] is the program's path) with `input` on standard input.
// Throws std::runtime_error if it cannot start.
inline ProcessResult RunProcess(const std::vector<std::string>& argv,
                                const std::string& input = "") {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (spawned != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error("cannot start " + argv[0]);
  }
  // Small inputs only: written before reading, the pipe buffer holds them.
  std::string_view pending = input;
  while (!pending.empty()) {
    const ssize_t n = ::write(in[1], pending.data(), pending.size());
    if (n <= 0) break;
    pending.remove_prefix(static_cast<std::size_t>(n));
  }
  ::close(in[1]);
  ProcessResult result;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open = 2;
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char chunk[4096];
      const ssize_t n = ::read(fds[i].fd, chunk, sizeof chunk);
      if (n > 0) {
        sinks[i]->append(chunk, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  ::waitpid(pid, &result.wait_status, 0);
  return result;
}

}  // namespace outbox::reliability::testing
