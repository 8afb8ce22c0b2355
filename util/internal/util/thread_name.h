// Names the calling thread, so that top -H, perf and gdb tell the agent's
// threads apart. Linux keeps 15 characters; longer names are cut.
#pragma once

#include <pthread.h>

#include <string>

namespace outbox::util {

inline void NameThisThread(const std::string& name) {
  // Failure only loses the label.
  (void)pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace outbox::util
