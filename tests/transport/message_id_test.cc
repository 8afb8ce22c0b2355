#include <gtest/gtest.h>

#include <vector>

#include "outbox/transport.h"

namespace outbox::transport {
namespace {

TEST(MessageId, IsLowercaseHexSha256OfTheLengthPrefixedIdentity) {
  // Computed independently: sha256(be64(len) || bytes, for each field).
  EXPECT_EQ(MessageId("db-1", "order.created", "order-42"),
            "c517b09627e6ed2a3a792ee8ada6a3f0bb74afc329bfe46a6b50591c156066ff");
  EXPECT_EQ(MessageId("a", "b", "c"),
            "bd735517dea8b04bba91d58ed956ea9ce3296d2f39b4a6e1103884815dd71d0d");
}

TEST(MessageId, IsStableAcrossCalls) {
  EXPECT_EQ(MessageId("db", "t", "k"), MessageId("db", "t", "k"));
}

TEST(MessageId, DiffersPerDatabaseTopicAndKey) {
  const std::string base = MessageId("db-1", "t", "k");
  EXPECT_NE(base, MessageId("db-2", "t", "k"));
  EXPECT_NE(base, MessageId("db-1", "u", "k"));
  EXPECT_NE(base, MessageId("db-1", "t", "l"));
}

TEST(MessageId, FieldBoundariesCannotBeShifted) {
  EXPECT_NE(MessageId("ab", "c", "d"), MessageId("a", "bc", "d"));
  EXPECT_NE(MessageId("a", "b", ""), MessageId("a", "", "b"));
}

TEST(BatchId, DependsOnTheMembersAndTheirOrder) {
  const std::vector<Message> ab = {{.message_id = "a"}, {.message_id = "b"}};
  const std::vector<Message> ba = {{.message_id = "b"}, {.message_id = "a"}};
  EXPECT_EQ(BatchId(ab), BatchId(ab));
  EXPECT_NE(BatchId(ab), BatchId(ba));
  EXPECT_EQ(BatchId(ab).size(), 64u);
}

}  // namespace
}  // namespace outbox::transport
