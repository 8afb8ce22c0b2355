// Issue #10, hostile rows: what other applications may write into the outbox
// table with plain SQL, including rows that skip the checks of the BEFORE
// INSERT trigger (the test drops it and recreates it, as a careless migration
// of another application might). Every row must end in a defined state with a
// clear last_error, without crashing the agent or outboxctl, and the
// well-formed rows beside them must be delivered as usual.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <climits>

#include "../agent/agent_fixture.h"
#include "fault_server.h"
#include "run_process.h"

namespace outbox::reliability::testing {
namespace {

using agent::Agent;
using agent::Options;
using agent::TopicOptions;
using agent::testing::WaitFor;
using namespace std::chrono_literals;

enum class End {
  kDelivered,  // acknowledged by the receiver
  kDead,       // dead with `error` in last_error
  kPending,    // never sent: stays pending (no route, or a type that matches no claim)
  kRetrying,   // failed once at a cost, retried within the policy's bounds
  kUntouched,  // a status the agent does not own: left as it is
};

struct Case {
  std::string name;
  std::string topic_sql = "'t'";
  std::string key_sql;  // default: the case's name
  std::string payload_sql = "'{\"ok\":true}'";
  std::string columns;  // extra columns, each with a leading ", "
  std::string values;   // their values, likewise
  End end = End::kDelivered;
  std::string error;  // expected in last_error (kDead)
  std::int64_t id = 0;
};

Case C(std::string name, std::string topic_sql = "'t'", std::string key_sql = "",
       std::string payload_sql = "'{}'", std::string columns = "", std::string values = "",
       End end = End::kDelivered, std::string error = "") {
  Case c;
  c.name = std::move(name);
  c.topic_sql = std::move(topic_sql);
  c.key_sql = std::move(key_sql);
  c.payload_sql = std::move(payload_sql);
  c.columns = std::move(columns);
  c.values = std::move(values);
  c.end = end;
  c.error = std::move(error);
  return c;
}

std::string Quote(const std::string& text) { return "'" + text + "'"; }

bool IsValidUtf8Json(const std::string& text) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseValidateEncodingFlag>(text.c_str(), text.size());
  return !document.HasParseError();
}

class HostileRowsTest : public agent::testing::AgentTest {
 protected:
  // Inserts with the field checks of the triggers switched off, the way an
  // application that dropped them would, and puts the triggers back.
  void InsertBypassingTriggers(std::vector<Case>& cases) {
    std::vector<std::string> triggers;
    {
      SQLite::Statement q(*app_,
                          "SELECT sql FROM sqlite_schema WHERE name = 'outbox_check_insert'");
      while (q.executeStep()) triggers.push_back(q.getColumn(0).getString());
      ASSERT_EQ(triggers.size(), 1u);
    }
    app_->exec("BEGIN IMMEDIATE");
    app_->exec("DROP TRIGGER outbox_check_insert");
    for (Case& c : cases) {
      const std::string key = c.key_sql.empty() ? Quote(c.name) : c.key_sql;
      const std::string sql = "INSERT INTO outbox(topic, msg_key, payload" + c.columns +
                              ") VALUES(" + c.topic_sql + ", " + key + ", " + c.payload_sql +
                              c.values + ")";
      try {
        app_->exec(sql);
      } catch (const std::exception& e) {
        ADD_FAILURE() << c.name << ": " << e.what() << "\n" << sql;
      }
      c.id = app_->getLastInsertRowid();
    }
    for (const std::string& trigger : triggers) app_->exec(trigger);
    app_->exec("COMMIT");
  }

  SQLite::Statement RowState(std::int64_t id) {
    SQLite::Statement q(*observer_,
                        "SELECT status, coalesce(last_error, ''), attempts, next_attempt_at,"
                        " coalesce(last_attempt_at, 0) FROM outbox WHERE id = ?");
    q.bind(1, id);
    q.executeStep();
    return q;
  }

  bool Settled(const Case& c) {
    SQLite::Statement q = RowState(c.id);
    const int status = q.getColumn(0).getInt();
    switch (c.end) {
      case End::kDelivered:
        return status == 1;
      case End::kDead:
        return status == 2;
      case End::kRetrying: {
        // Failed at a cost at least once, and rescheduled within the cap
        // (50 ms) whatever the row's own interval said.
        const std::int64_t delay = q.getColumn(3).getInt64() - q.getColumn(4).getInt64();
        return status == 0 && q.getColumn(2).getInt() >= 1 && delay >= 0 && delay <= 50;
      }
      case End::kPending:
      case End::kUntouched:
        return true;
    }
    return false;
  }
};

TEST_F(HostileRowsTest, EveryHostileRowEndsDefinedAndTheOthersAreDelivered) {
  // The receiver refuses bodies over 2 KiB (413) and fails (503) whatever a
  // row marks with X-Fail; everything else is acknowledged.
  FaultServer server([](const FaultRequest& request) {
    if (request.Header("x-fail") == "1") return Fault::kUnavailable;
    if (request.body.size() > 2048) return Fault::kTooLarge;
    return Fault::kOk;
  });
  server.Start();

  const std::string fail = ", headers";
  const std::string fail_value = ", '{\"X-Fail\": \"1\"}'";
  std::vector<Case> cases = {
      // Routing.
      C("unknown topic", "'nobody'", "", "'{}'", "", "", End::kPending),
      C("non-UTF-8 topic", "CAST(x'fffe' AS TEXT)", "", "'{}'", "", "", End::kPending),
      C("empty topic", "''", "", "'{}'", "", "", End::kPending),
      C("topic stored as a blob", "x'74'", "", "'{}'", "", "", End::kPending),
      C("unknown topic, created_at INT64_MIN", "'nobody'", "", "'{}'", ", created_at",
        ", -9223372036854775808", End::kPending),
      // Headers.
      C("NULL headers", "'t'", "", "'{}'", ", headers", ", NULL"),
      C("headers not JSON", "'t'", "", "'{}'", ", headers", ", '{not json'", End::kDead,
       "malformed row: headers: not a JSON object"),
      C("headers a JSON array", "'t'", "", "'{}'", ", headers", ", '[1,2]'", End::kDead,
       "malformed row: headers: not a JSON object"),
      C("header value a number", "'t'", "", "'{}'", ", headers", ", '{\"X-A\": 1}'", End::kDead,
       "is not a string"),
      C("header value with CR LF", "'t'", "", "'{}'", ", headers",
       ", '{\"X-A\": \"a\\r\\nInjected: 1\"}'", End::kDead, "holds a control character"),
      C("header name not a token", "'t'", "", "'{}'", ", headers", ", '{\"bad name\": \"x\"}'",
       End::kDead, "is not an HTTP header name"),
      C("headers a blob with NUL", "'t'", "", "'{}'", ", headers", ", x'00ff'", End::kDead,
       "malformed row: headers"),
      C("headers an integer", "'t'", "", "'{}'", ", headers", ", 42", End::kDead,
       "malformed row: headers: not a JSON object"),
      C("headers with invalid UTF-8", "'t'", "", "'{}'", ", headers",
       ", CAST(x'7b2258223a2280227d' AS TEXT)", End::kDead, "malformed row: headers"),
      C("headers forging reserved names", "'t'", "", "'{}'", ", headers",
       ", '{\"Idempotency-Key\": \"forged\", \"Authorization\": \"Bearer stolen\","
       " \"Content-Length\": \"1\", \"ce-id\": \"forged\", \"Host\": \"evil.example\","
       " \"Transfer-Encoding\": \"chunked\"}'"),
      // Payloads.
      C("payload over the limit", "'t'", "", "randomblob(4096)", "", "", End::kDead, "HTTP 413"),
      C("payload not UTF-8", "'t'", "", "x'fffe00ff'"),
      C("payload not UTF-8, structured CloudEvents", "'s'", "", "x'fffe00ff'"),
      C("payload an integer", "'t'", "", "12345"),
      C("payload cut inside a UTF-8 sequence", "'s'", "",
        "x'4141414141414141414141414141414141414141e0'"),
      C("payload empty", "'t'", "", "''"),
      // Keys.
      C("non-UTF-8 key", "'t'", "CAST(x'ff41' AS TEXT)"),
      C("empty key", "'t'", "''"),
      C("10 000-byte key", "'t'", "printf('%.*c', 10000, 'k')"),
      // Schedule.
      C("negative next_attempt_at", "'t'", "", "'{}'", ", next_attempt_at", ", -5"),
      C("huge next_attempt_at", "'t'", "", "'{}'", ", next_attempt_at", ", 9223372036854775807"),
      C("next_attempt_at text", "'t'", "", "'{}'", ", next_attempt_at", ", 'soon'"),
      C("next_attempt_at 1e300", "'t'", "", "'{}'", ", next_attempt_at", ", 1e300"),
      // Attempts and policy.
      C("negative attempts", "'t'", "", "'{}'", ", attempts", ", -5"),
      C("attempts INT_MAX", "'t'", "", "'{}'", ", attempts", ", 2147483647"),
      C("attempts INT64_MAX", "'t'", "", "'{}'", ", attempts", ", 9223372036854775807"),
      C("attempts INT_MAX, failing", "'t'", "", "'{}'", ", attempts" + fail,
       ", 2147483647" + fail_value, End::kDead, "HTTP 503"),
      C("max_attempts 0, failing", "'t'", "", "'{}'", ", max_attempts" + fail,
       ", 0" + fail_value, End::kDead, "(after 1 attempts)"),
      C("max_attempts -3, failing", "'t'", "", "'{}'", ", max_attempts" + fail,
       ", -3" + fail_value, End::kDead, "(after 1 attempts)"),
      C("first_interval_ms negative, failing", "'t'", "", "'{}'",
       ", max_attempts, first_interval_ms" + fail, ", 1000, -100" + fail_value, End::kRetrying),
      C("first_interval_ms INT64_MAX, failing", "'t'", "", "'{}'",
       ", max_attempts, first_interval_ms, backoff" + fail,
       ", 1000, 9223372036854775807, 'exponential'" + fail_value, End::kRetrying),
      C("unknown backoff", "'t'", "", "'{}'", ", backoff", ", 'bogus'"),
      // Times.
      C("created_at INT64_MIN", "'t'", "", "'{}'", ", created_at", ", -9223372036854775808"),
      C("created_at INT64_MAX", "'t'", "", "'{}'", ", created_at", ", 9223372036854775807"),
      C("created_at INT64_MIN, binary CloudEvents", "'ce'", "", "'{}'", ", created_at",
       ", -9223372036854775808"),
      C("created_at INT64_MAX, structured CloudEvents", "'s'", "", "'{}'", ", created_at",
       ", 9223372036854775807"),
      C("created_at text", "'ce'", "", "'{}'", ", created_at", ", 'yesterday'"),
      // Columns the store owns.
      C("status 7", "'t'", "", "'{}'", ", status", ", 7", End::kUntouched),
      C("status -1", "'t'", "", "'{}'", ", status", ", -1", End::kUntouched),
      C("in flight without owner or lease", "'t'", "", "'{}'", ", status", ", 3"),
      C("in flight with a lease far ahead", "'t'", "", "'{}'",
       ", status, lease_owner, lease_expires_at", ", 3, 'garbage', 9223372036854775807"),
      C("quarantined 1", "'t'", "", "'{}'", ", quarantined", ", 1"),
      C("quarantined 2", "'t'", "", "'{}'", ", quarantined", ", 2"),
      C("lease_token INT64_MAX", "'t'", "", "'{}'", ", lease_token", ", 9223372036854775807"),
  };
  for (int i = 0; i < 20; ++i) {
    cases.push_back(C("well-formed " + std::to_string(i), "'t'", "", "'{\"order\": 1}'"));
  }
  InsertBypassingTriggers(cases);

  Options options = BaseOptions();
  options.sweep_interval_ms = 20;
  store::Limits limits;
  limits.max_payload_bytes = 1024;
  options.limits = limits;
  TopicOptions plain;
  plain.endpoint.url = server.Url("/events");
  plain.endpoint.timeout_ms = 2000;
  plain.retry.max_attempts = 1;
  plain.retry.first_interval_ms = 5;
  plain.retry.max_interval_ms = 50;
  plain.breaker.failure_threshold = 100'000;  // X-Fail rows must not stop the others
  options.topics["t"] = plain;
  TopicOptions binary = plain;
  binary.endpoint.cloudevents = transport::CloudEventsMode::kBinary;
  options.topics["ce"] = binary;
  TopicOptions structured = plain;
  structured.endpoint.cloudevents = transport::CloudEventsMode::kStructured;
  options.topics["s"] = structured;
  Agent agent(options);
  agent.Start();

  // A failure costs an attempt only if the endpoint acknowledged something
  // since the row's previous attempt: a trickle of well-formed rows keeps
  // the acknowledgements coming.
  int polls = 0;
  int fillers = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (++polls % 10 == 0) InsertPlain("t", "filler-" + std::to_string(fillers++));
        return std::all_of(cases.begin(), cases.end(), [&](const Case& c) { return Settled(c); });
      },
      30s))
      << [&] {
           std::string stuck;
           for (const Case& c : cases) {
             if (!Settled(c)) stuck += c.name + "; ";
           }
           return "not settled: " + stuck;
         }();
  const agent::MetricsSnapshot snapshot = agent.Snapshot();
  agent.Stop();
  // /metrics renders whatever the rows hold (the oldest pending row of
  // "nobody" was created at INT64_MIN).
  const std::string metrics = agent::RenderPrometheus(snapshot);
  EXPECT_NE(metrics.find("outbox_oldest_pending_age_seconds"), std::string::npos);

  const auto requests = server.Requests();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SQLite::Statement q = RowState(c.id);
    const int status = q.getColumn(0).getInt();
    const std::string last_error = q.getColumn(1).getString();
    switch (c.end) {
      case End::kDelivered:
        EXPECT_EQ(status, 1) << last_error;
        break;
      case End::kDead:
        EXPECT_EQ(status, 2);
        EXPECT_NE(last_error.find(c.error), std::string::npos) << last_error;
        EXPECT_LE(last_error.size(), 1100u);
        break;
      case End::kPending:
        EXPECT_EQ(status, 0);
        EXPECT_EQ(last_error, "");
        break;
      case End::kRetrying:
        EXPECT_EQ(status, 0);
        EXPECT_GE(q.getColumn(2).getInt(), 1);
        EXPECT_NE(last_error.find("HTTP 503"), std::string::npos) << last_error;
        break;
      case End::kUntouched:
        EXPECT_TRUE(status == 7 || status == -1) << status;
        break;
    }
  }
  // Pending rows with no route are counted row by row: two of "nobody",
  // the non-UTF-8 topic's and the empty topic's.
  EXPECT_EQ(snapshot.unrouted_pending, 4);

  // A row can never override what identifies or frames the request.
  const auto forged = std::find_if(cases.begin(), cases.end(), [](const Case& c) {
    return c.name == "headers forging reserved names";
  });
  const std::string forged_id = transport::MessageId(agent.database_id(), "t", forged->name);
  bool seen = false;
  for (const FaultRequest& request : requests) {
    if (request.Header("idempotency-key") != forged_id) continue;
    seen = true;
    EXPECT_EQ(request.headers.count("authorization"), 0u);
    EXPECT_EQ(request.Header("content-length"), std::to_string(request.body.size()));
    EXPECT_EQ(request.headers.count("transfer-encoding"), 0u);
    EXPECT_EQ(request.headers.count("ce-id"), 0u);
    EXPECT_EQ(request.Header("host"), "127.0.0.1:" + std::to_string(server.port()));
  }
  EXPECT_TRUE(seen);
  for (const FaultRequest& request : requests) {
    EXPECT_NE(request.Header("idempotency-key"), "forged");
  }
  // Binary payloads arrive byte for byte.
  const std::string binary_id =
      transport::MessageId(agent.database_id(), "t", "payload not UTF-8");
  for (const FaultRequest& request : requests) {
    if (request.Header("idempotency-key") == binary_id) {
      EXPECT_EQ(request.body, std::string("\xff\xfe\x00\xff", 4));
    }
  }

  // outboxctl reads every one of these rows without crashing, and its JSON
  // stays valid UTF-8 JSON whatever the rows hold.
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"stats"},
                                             {"stats", "--json"},
                                             {"list", "--limit", "1000"},
                                             {"list", "--limit", "1000", "--json"},
                                             {"list", "--status", "dead", "--json"}}) {
    std::vector<std::string> argv = {OUTBOX_OUTBOXCTL, "--db", db_path_};
    argv.insert(argv.end(), command.begin(), command.end());
    const ProcessResult result = RunProcess(argv);
    SCOPED_TRACE(argv[3] + " " + argv.back());
    EXPECT_EQ(result.ExitCode(), 0) << result.err;
    if (command.back() == "--json") {
      EXPECT_TRUE(IsValidUtf8Json(result.out)) << result.out;
    }
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (const bool json : {false, true}) {
      std::vector<std::string> argv = {OUTBOX_OUTBOXCTL, "--db", db_path_, "show",
                                       std::to_string(c.id)};
      if (json) argv.push_back("--json");
      const ProcessResult result = RunProcess(argv);
      EXPECT_EQ(result.ExitCode(), 0) << result.err;
      if (json) {
        EXPECT_TRUE(IsValidUtf8Json(result.out)) << result.out;
      }
    }
  }
  std::printf("hostile rows: %zu rows (%zu hostile kinds) beside 20 well-formed ones; all "
              "ended as expected\n",
              cases.size(), cases.size() - 20);
}

// created_at reaches request bodies and ce-time; RFC 3339 has four-digit
// years, and INT64_MIN once overflowed the date arithmetic (UBSan).
TEST(HostileValues, TimesOutsideRfc3339ClampToItsRange) {
  const std::string payload = "{}";
  transport::Message message;
  message.message_id = "id";
  message.topic = "t";
  message.payload = payload;
  message.created_at_ms = std::numeric_limits<std::int64_t>::min();
  EXPECT_NE(transport::BuildNdjsonBatch({&message, 1}).find("\"time\":\"0000-01-01T00:00:00.000Z\""),
            std::string::npos);
  message.created_at_ms = std::numeric_limits<std::int64_t>::max();
  EXPECT_NE(transport::BuildNdjsonBatch({&message, 1}).find("\"time\":\"9999-12-31T23:59:59.999Z\""),
            std::string::npos);
}

// Text cut inside a UTF-8 sequence once made RapidJSON's validating writer
// read past the end of the buffer (ASan, found by the message_builders
// fuzzer); now it is refused as not UTF-8.
TEST(HostileValues, TextCutInsideAUtf8SequenceIsRefusedWithoutOverreading) {
  // Constructed from a view: on the heap with no slack after its NUL.
  const std::string topic(std::string_view("tttttttttttttttttttt\xe0"));
  const std::string payload = "{}";
  transport::Message message;
  message.message_id = "id";
  message.topic = topic;
  message.payload = payload;
  transport::EndpointOptions options;
  options.url = "http://127.0.0.1/";
  EXPECT_THROW(transport::BuildCloudEvent(options, message), std::invalid_argument);
  EXPECT_THROW(transport::BuildNdjsonBatch({&message, 1}), std::invalid_argument);
}

// SQLite's json_valid() in the trigger accepts headers that are not Unicode;
// the agent's parser refuses them, so the Producer refuses them up front
// (found by the enqueue fuzzer: a lone surrogate escape).
TEST(HostileValues, EnqueueRefusesHeadersTheAgentCouldNotParse) {
  store::Options options;
  options.path = ":memory:";
  options.create = true;
  store::Store s(options);
  store::Producer producer(s.connection());
  store::EnqueueOptions standalone;
  standalone.standalone = true;
  int n = 0;
  const auto enqueue = [&](const std::string& headers) {
    producer.Enqueue({"t", "k" + std::to_string(n++), "{}", headers, {}}, standalone);
  };
  for (const std::string& bad : {std::string("{\"X\": \"\x80\"}"), std::string("{\"X\": \"\xed\xa0\x80\"}"),
                                std::string("{\"X\": \"\\ud800\"}"), std::string("{\"X\": \"\\udc00\"}"),
                                std::string("{\"X\": \"\\ud800\\u0041\"}")}) {
    SCOPED_TRACE(bad);
    // (The agent's parser lets a lone low surrogate through as CESU bytes;
    // the Producer, asked for Unicode, refuses it too.)
    EXPECT_THROW(enqueue(bad), std::invalid_argument);
  }
  for (const std::string& good : {std::string("{\"X\": \"\\ud83d\\ude00\"}"), std::string("{\"X\": \"\\\\ud800\"}"),
                                 std::string("{\"X\": \"\xc3\xa9\"}")}) {
    SCOPED_TRACE(good);
    EXPECT_NO_THROW(enqueue(good));
    EXPECT_NO_THROW(transport::ParseRowHeaders(good));
  }
}

}  // namespace
}  // namespace outbox::reliability::testing
