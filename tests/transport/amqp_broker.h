// The one rabbitmq-server of the AMQP test binary (amqp_broker_main.cc
// starts it before the tests and stops it after them).
#pragma once

#include "rabbit_server.h"

namespace outbox::transport::testing {

RabbitServer& Broker();

}  // namespace outbox::transport::testing
