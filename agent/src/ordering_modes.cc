#include "ordering_modes.h"

#include <stdexcept>

namespace outbox::agent {

void AgreeOrderings(Runtime& rt) {
  for (const auto& [topic, options] : rt.options.topics) {
    if (topic == "*") continue;  // no ordering there (Validate)
    store::TopicOrdering recorded;
    rt.writer->Run([&, &topic = topic, &options = options](store::Store& s) {
      recorded = s.AgreeOrdering(topic, options.ordering, rt.clock->WallMs());
    });
    // dead_head means nothing without ordering.
    const bool agree = recorded.by_key == options.ordering.by_key &&
                       (!recorded.by_key || recorded.dead_head == options.ordering.dead_head);
    if (agree) continue;
    // A topic's claims follow the recorded mode whatever this agent thinks;
    // starting anyway would hide that from its operator.
    throw std::invalid_argument(
        "topics.\"" + topic + "\".ordering: the database records ordering " +
        store::Describe(recorded) + " for this topic, this agent is configured with " +
        store::Describe(options.ordering) +
        "; agents sharing a file must agree (to change it, stop every agent and run "
        "`outboxctl ordering --forget " + topic + "`)");
  }
}

}  // namespace outbox::agent
