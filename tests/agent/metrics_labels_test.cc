// Metrics labels with a "*" route: the first metrics.max_topics topics seen
// get their own label, the rest count as "other".
#include <gtest/gtest.h>

#include <string>

#include "outbox/agent.h"

namespace outbox::agent {
namespace {

TEST(MetricsLabels, WildcardTopicsGetTheirOwnLabelUpToTheLimit) {
  Metrics metrics;
  metrics.SetLabels({"configured", "*"}, 2);
  metrics.Enqueued("configured");
  metrics.Delivered("order.created", 0.1);
  metrics.Delivered("order.paid", 0.1);
  metrics.Delivered("order.created", 0.1);
  metrics.Delivered("third.topic", 0.1);  // over the limit
  const MetricsSnapshot snapshot = metrics.Snapshot();
  EXPECT_EQ(snapshot.topics.at("configured").enqueued, 1);
  EXPECT_EQ(snapshot.topics.at("order.created").delivered, 2);
  EXPECT_EQ(snapshot.topics.at("order.paid").delivered, 1);
  EXPECT_EQ(snapshot.topics.at("other").delivered, 1);
  EXPECT_FALSE(snapshot.topics.contains("third.topic"));
}

TEST(MetricsLabels, WithoutAWildcardUnconfiguredTopicsAreOther) {
  Metrics metrics;
  metrics.SetLabels({"a"}, 100);
  metrics.Delivered("b", 0.1);
  EXPECT_FALSE(metrics.Snapshot().topics.contains("b"));
  EXPECT_EQ(metrics.Snapshot().topics.at("other").delivered, 1);
}

TEST(MetricsLabels, TopicsThatAreNotUtf8NeverBecomeLabels) {
  Metrics metrics;
  metrics.SetLabels({"*"}, 100);
  metrics.Delivered(std::string("bad\xff", 4), 0.1);
  metrics.Delivered("other", 0.1);  // the name of the catch-all stays one label
  const MetricsSnapshot snapshot = metrics.Snapshot();
  EXPECT_EQ(snapshot.topics.size(), 1u);
  EXPECT_EQ(snapshot.topics.at("other").delivered, 2);
}

}  // namespace
}  // namespace outbox::agent
