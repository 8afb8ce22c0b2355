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

// Reads a file line by line, gzip or plain (zlib reads both), holding at
// most `max_line_bytes` of one line: a longer line (a hostile file can
// inflate one gzip line to gigabytes) is skipped to its end, unread.
class LineReader {
 public:
  enum class Read { kLine, kTooLong, kEnd };

  LineReader(const std::string& path, std::size_t max_line_bytes)
      : file_(::gzopen(path.c_str(), "rb")), max_line_bytes_(max_line_bytes) {
    if (file_ == nullptr) throw std::invalid_argument("FILE: cannot read '" + path + "'");
  }
  ~LineReader() { ::gzclose(file_); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Throws std::runtime_error if the file is damaged.
  Read Next(std::string& line) {
    line.clear();
    bool too_long = false;
    for (;;) {
      if (const std::size_t end = pending_.find('\n', scanned_); end != std::string::npos) {
        if (!too_long) line.assign(pending_, 0, end);
        pending_.erase(0, end + 1);
        scanned_ = 0;
        return too_long ? Read::kTooLong : Read::kLine;
      }
      if (pending_.size() > max_line_bytes_) {  // drop what we have, find the end
        too_long = true;
        pending_.clear();
      }
      scanned_ = pending_.size();
      const int n = ::gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
      if (n < 0) {
        int code = 0;
        throw std::runtime_error(std::string("archive damaged: ") + ::gzerror(file_, &code));
      }
      if (n == 0) {
        if (!too_long) line = std::move(pending_);
        pending_.clear();
        if (too_long) return Read::kTooLong;
        return line.empty() ? Read::kEnd : Read::kLine;
      }
      pending_.append(buffer_.data(), static_cast<std::size_t>(n));
    }
  }

 private:
  gzFile file_;
  const std::size_t max_line_bytes_;
  std::string pending_;
  std::size_t scanned_ = 0;
  std::array<char, 1 << 16> buffer_{};
};

// The longest archive line that can hold a message this database accepts:
// the payload as base64 (4/3), plus room for the other fields (topic, keys,
// headers, times). Without a payload limit, 64 MiB.
std::size_t MaxLineBytes(store::Store& store) {
  const std::int64_t payload = store.GetStats().limits.max_payload_bytes;
  constexpr std::size_t kOtherFields = 1 << 20;
  if (payload <= 0) return std::size_t{64} << 20;
  return static_cast<std::size_t>(payload) / 3 * 4 + 4 + kOtherFields;
}

int RunArchiveRestore(const Context& context, const std::string& path) {
  store::Store store = Open(context);
  const std::size_t max_line_bytes = MaxLineBytes(store);
  LineReader reader(path, max_line_bytes);
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
    for (int i = 0; i < kLinesPerTransaction; ++i) {
      const LineReader::Read read = reader.Next(line);
      if (!(more = read != LineReader::Read::kEnd)) break;
      ++line_number;
      if (read == LineReader::Read::kTooLong) {
        ++refused;
        std::cerr << "outboxctl: " << path << ":" << line_number << ": longer than "
                  << max_line_bytes << " bytes (limits.max_payload_bytes as base64, plus 1 MiB)\n";
        continue;
      }
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
