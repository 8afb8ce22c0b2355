// Agents sharing a file must order each topic alike: the first records the
// topic's ordering in the database, the others compare. Not installed.
#pragma once

#include "runtime.h"

namespace outbox::agent {

// Records the ordering of every configured topic (not "*") that the database
// does not know yet, through the writer. Throws std::invalid_argument, one
// line naming the topic, when the database records another ordering for a
// configured topic than this agent's options give it.
void AgreeOrderings(Runtime& runtime);

}  // namespace outbox::agent
