// `outboxctl archive-restore FILE`: puts the messages of a retention
// archive (PATH, or a rotated PATH.N.gz) back as pending rows, so that an
// operator can resend history. Bytes come back exactly as archived.
#include <zlib.h>

#include <array>
#include <iostream>
#include <memory>

#include "outboxctl_common.h"
#include "row_json.h"
#include "util/clock.h"

namespace outbox::ctl {
namespace {

constexpr int kLinesPerTransaction = 500;

// Reads a file line by line, gzip or plain (zlib reads both).
class LineReader {
 public:
  explicit LineReader(const std::string& path) : file_(::gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) throw std::invalid_argument("FILE: cannot read '" + path + "'");
  }
  ~LineReader() { ::gzclose(file_); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // False at the end. Throws std::runtime_error if the file is damaged.
  bool Next(std::string& line) {
    line.clear();
    for (;;) {
      if (const std::size_t end = pending_.find('\n', scanned_); end != std::string::npos) {
        line.assign(pending_, 0, end);
        pending_.erase(0, end + 1);
        scanned_ = 0;
        return true;
      }
      scanned_ = pending_.size();
      const int n = ::gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
      if (n < 0) {
        int code = 0;
        throw std::runtime_error(std::string("archive damaged: ") + ::gzerror(file_, &code));
      }
      if (n == 0) {
        line = std::move(pending_);
        pending_.clear();
        return !line.empty();
      }
      pending_.append(buffer_.data(), static_cast<std::size_t>(n));
    }
  }

 private:
  gzFile file_;
  std::string pending_;
  std::size_t scanned_ = 0;
  std::array<char, 1 << 16> buffer_{};
};

int RunArchiveRestore(const Context& context, const std::string& path) {
  LineReader reader(path);
  store::Store store = Open(context);
  store::Operator operator_actions(store);
  std::int64_t restored = 0;
  std::int64_t present = 0;
  std::int64_t refused = 0;
  std::int64_t line_number = 0;
  Progress progress("restoring");
  std::string line;
  bool more = true;
  while (more) {
    store::Store::WriteTransaction transaction(store);
    for (int i = 0; i < kLinesPerTransaction && (more = reader.Next(line)); ++i) {
      ++line_number;
      if (line.empty()) continue;
      try {
        const row_json::ArchivedMessage archived = row_json::ParseArchiveLine(line);
        store::NewMessage message;
        message.topic = archived.topic;
        message.key = archived.key;
        message.payload = archived.payload;
        message.headers_json = archived.headers_json.value_or("");
        message.schema_version = archived.schema_version;
        message.ordering_key = archived.ordering_key;
        (operator_actions.Restore(message) ? restored : present) += 1;
      } catch (const std::invalid_argument& e) {
        ++refused;
        std::cerr << "outboxctl: " << path << ":" << line_number << ": " << e.what() << '\n';
      } catch (const store::StoreError& e) {
        if (e.busy() || e.full()) throw;
        ++refused;  // a trigger refused it (e.g. the payload is over the limit)
        std::cerr << "outboxctl: " << path << ":" << line_number << ": " << e.what() << '\n';
      }
      progress.Update(line_number);
    }
    transaction.Commit();
  }
  operator_actions.RecordAudit(CurrentActor(), "archive-restore", restored, std::nullopt,
                               path + ": " + std::to_string(present) + " already present, " +
                                   std::to_string(refused) + " refused",
                               util::NowMs());
  std::cout << "restored " << Rows(restored) << " as pending; " << present
            << " already present, " << refused << " refused\n";
  return refused > 0 ? kExitFailure : kExitOk;
}

}  // namespace

void DeclareArchiveCommands(CLI::App& app, const Context& context, Commands& commands) {
  auto path = std::make_shared<std::string>();
  auto* restore = app.add_subcommand(
      "archive-restore", "put archived messages back as pending rows (to send them again)");
  restore->add_option("FILE", *path, "a retention archive: PATH or a rotated PATH.N.gz")
      ->required();
  commands.push_back({restore, [&context, path] { return RunArchiveRestore(context, *path); }});
}

}  // namespace outbox::ctl
