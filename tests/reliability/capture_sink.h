// A spdlog sink that keeps every formatted line in memory, readable from any
// thread while the logger writes: the tests search logs for secrets and
// errors.
#pragma once

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <string>

namespace outbox::reliability::testing {

class CaptureSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string Text() {
    std::lock_guard lock(mutex_);
    return text_;
  }
  // Lines containing `needle`.
  int Count(const std::string& needle) {
    std::lock_guard lock(mutex_);
    int count = 0;
    for (auto at = text_.find(needle); at != std::string::npos; at = text_.find(needle, at + 1)) {
      ++count;
    }
    return count;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(message, formatted);
    text_.append(formatted.data(), formatted.size());
  }
  void flush_() override {}

 private:
  std::string text_;  // guarded by mutex_ (the base sink's)
};

// A logger writing only to `sink`, at every level.
inline std::shared_ptr<spdlog::logger> CaptureLogger(std::shared_ptr<CaptureSink> sink) {
  auto logger = std::make_shared<spdlog::logger>("outbox", std::move(sink));
  logger->set_level(spdlog::level::trace);
  return logger;
}

}  // namespace outbox::reliability::testing
