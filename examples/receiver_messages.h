// The messages one POST to outbox-receiver carries, each with the key the
// Inbox records it under (docs/receiving.md, "What to key on").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace outbox::receiver {

struct ReceivedMessage {
  std::string key;   // what the Inbox records: a signed identity when signing is on
  std::string body;  // what is applied: the request body, or one batch member
  std::optional<std::string> source;  // the sender, when it says (ce-source, a member's source)
};

// The identity headers of a request, as received.
struct RequestIdentity {
  std::string content_type;     // Content-Type, parameters included
  std::string idempotency_key;  // Idempotency-Key (not covered by the signature)
  std::string webhook_id;       // webhook-id (covered by the signature)
  std::string ce_source;        // ce-source of a binary CloudEvent
};

// Either the messages, or why the request is refused (400).
struct Split {
  std::vector<ReceivedMessage> messages;
  std::string refusal;  // empty when accepted
};

// One message per request, keyed by the signed `webhook-id` when `signed_request` (a
// disagreeing Idempotency-Key is refused: an attacker could otherwise replay
// one signed body under fresh keys) and by the Idempotency-Key otherwise. A
// batch (application/x-ndjson, application/cloudevents-batch+json) is one
// message per member, keyed by the member's own `id`, which lies inside the
// body (and so under the signature), so a member sent again alone or in
// another batch is recognised. The body is parsed without recursion: deep
// nesting costs no stack.
Split SplitRequest(const RequestIdentity& identity, std::string_view body, bool signed_request);

}  // namespace outbox::receiver
