// The queue table that `reliableq queues` and `reliableq stats` print, as
// text and as JSON, so that both show the same columns.

#ifndef RELIABLEQ_CLI_QUEUE_TABLE_H_
#define RELIABLEQ_CLI_QUEUE_TABLE_H_

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>
#include <vector>

#include "reliableq/admin.h"

namespace reliableq::cli {

// A latency in seconds with three decimals: milliseconds are all it can
// claim.
std::string LatencyText(double seconds);

// "queue size latency" rows, names escaped, aligned; a fourth column marks
// the paused queues when there is one. "no queues" when empty.
std::string QueueTableText(const std::vector<QueueStats>& queues);

// The key "queues" and its array of {"name","size","latency","paused"}.
void WriteQueuesJson(rapidjson::Writer<rapidjson::StringBuffer>& writer,
                     const std::vector<QueueStats>& queues);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_QUEUE_TABLE_H_
