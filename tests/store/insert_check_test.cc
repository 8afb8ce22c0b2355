// The insert trigger's field checks of schema 8 (store/src/sql.h,
// kMigration8): plain SQL is refused what the Producer and the language
// modules refuse, with the trigger's "outbox: <field>: <reason>" message.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "outbox/store.h"

namespace outbox::store {
namespace {

Options Memory() {
  Options options;
  options.path = ":memory:";
  options.create = true;
  return options;
}

class InsertCheckTest : public ::testing::Test {
 protected:
  InsertCheckTest() : store_(Memory()) {}

  // The error of a plain-SQL insert with `columns` set to `values` (SQL
  // expressions) beside a valid topic, key and payload; "" if accepted.
  std::string PlainInsert(const std::string& columns, const std::string& values,
                          const std::string& topic = "'t'") {
    const std::string sql = "INSERT INTO outbox(topic, msg_key, payload" + columns +
                            ") VALUES(" + topic + ", 'k" + std::to_string(++keys_) + "', 'p'" +
                            values + ")";
    try {
      store_.connection().exec(sql);
      return "";
    } catch (const SQLite::Exception& e) {
      return e.what();
    }
  }

  Store store_;
  int keys_ = 0;
};

TEST_F(InsertCheckTest, RetryColumnsTakeWhatTheLanguageModulesTake) {
  EXPECT_EQ(PlainInsert(", backoff", ", 'linear'"),
            "outbox: backoff: must be 'fixed' or 'exponential'");
  EXPECT_EQ(PlainInsert(", backoff", ", 1"), "outbox: backoff: must be 'fixed' or 'exponential'");
  EXPECT_EQ(PlainInsert(", max_attempts", ", 0"),
            "outbox: max_attempts: must be a positive integer");
  EXPECT_EQ(PlainInsert(", max_attempts", ", 2.5"),
            "outbox: max_attempts: must be a positive integer");
  EXPECT_EQ(PlainInsert(", max_attempts", ", 'three'"),
            "outbox: max_attempts: must be a positive integer");
  // The column's INTEGER affinity has made '3' the integer 3 by then.
  EXPECT_EQ(PlainInsert(", max_attempts", ", '3'"), "");
  EXPECT_EQ(PlainInsert(", first_interval_ms", ", -5"),
            "outbox: first_interval_ms: must be a positive integer");
  EXPECT_EQ(PlainInsert(", first_interval_ms", ", 0"),
            "outbox: first_interval_ms: must be a positive integer");
  EXPECT_EQ(PlainInsert(", max_attempts, backoff, first_interval_ms", ", 1, 'fixed', 1"), "");
  EXPECT_EQ(PlainInsert(", max_attempts, backoff, first_interval_ms",
                        ", 9223372036854775807, 'exponential', 9223372036854775807"),
            "");
  EXPECT_EQ(PlainInsert(", max_attempts, backoff, first_interval_ms", ", NULL, NULL, NULL"), "");
}

TEST_F(InsertCheckTest, TopicsAreAtMost255Bytes) {
  EXPECT_EQ(PlainInsert("", "", "printf('%.*c', 255, 't')"), "");
  EXPECT_EQ(PlainInsert("", "", "printf('%.*c', 256, 't')"),
            "outbox: topic: must be a non-empty string of at most 255 bytes");
  // Bytes, not characters: 127 two-byte characters fit, 128 do not.
  EXPECT_EQ(PlainInsert("", "", "replace(printf('%.*c', 127, 'x'), 'x', char(233))"), "");
  EXPECT_EQ(PlainInsert("", "", "replace(printf('%.*c', 128, 'x'), 'x', char(233))"),
            "outbox: topic: must be a non-empty string of at most 255 bytes");
  EXPECT_EQ(PlainInsert("", "", "''"),
            "outbox: topic: must be a non-empty string of at most 255 bytes");
}

TEST_F(InsertCheckTest, HeadersAreAtMost64KiBAndJudgedBeforeTheyAreParsed) {
  // {"a":"xxx...x"}: 8 bytes of JSON around the value.
  EXPECT_EQ(PlainInsert(", headers", ", json_object('a', printf('%.*c', 65528, 'x'))"), "");
  EXPECT_EQ(PlainInsert(", headers", ", json_object('a', printf('%.*c', 65529, 'x'))"),
            "outbox: headers: longer than 65536 bytes");
  // Too large and not JSON either: the size is what it hears.
  EXPECT_EQ(PlainInsert(", headers", ", printf('%.*c', 5000000, '[')"),
            "outbox: headers: longer than 65536 bytes");
}

TEST_F(InsertCheckTest, TheProducerRefusesTheSameTopicsAndHeaders) {
  Producer producer(store_.connection());
  NewMessage message;
  message.topic = std::string(kMaxTopicBytes, 't');
  message.key = "k";
  message.payload = "p";
  EXPECT_EQ(producer.Enqueue(message, {true, false}).id, 1);
  message.key = "k2";
  message.topic += "t";
  EXPECT_THROW(producer.Enqueue(message, {true, false}), std::invalid_argument);
  message.topic = "t";
  message.headers_json = "{\"a\":\"" + std::string(kMaxHeadersBytes - 7, 'x') + "\"}";
  EXPECT_THROW(producer.Enqueue(message, {true, false}), std::invalid_argument);
  message.headers_json = "{\"a\":\"" + std::string(kMaxHeadersBytes - 8, 'x') + "\"}";
  EXPECT_EQ(producer.Enqueue(message, {true, false}).id, 2);
}

}  // namespace
}  // namespace outbox::store
