// main() of the AMQP test binary: one rabbitmq-server for all its tests,
// because the broker takes seconds to start. It is stopped (with its epmd)
// when the tests end, whatever their outcome.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "amqp_broker.h"

namespace outbox::transport::testing {
namespace {
std::unique_ptr<RabbitServer> broker;
}  // namespace

RabbitServer& Broker() { return *broker; }

}  // namespace outbox::transport::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  using outbox::transport::testing::RabbitServer;
  outbox::transport::testing::broker = std::make_unique<RabbitServer>(/*with_tls=*/true);
  std::printf("rabbitmq-server started in %lld ms\n",
              static_cast<long long>(outbox::transport::testing::broker->start_time().count()));
  const int status = RUN_ALL_TESTS();
  outbox::transport::testing::broker.reset();
  return status;
}
