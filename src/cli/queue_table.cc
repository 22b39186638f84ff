#include "cli/queue_table.h"

#include <algorithm>
#include <cstdio>

#include "base/text_escape.h"

namespace reliableq::cli {

std::string LatencyText(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", seconds);
  return buf;
}

std::string QueueTableText(const std::vector<QueueStats>& queues) {
  if (queues.empty()) return "no queues\n";
  size_t name_width = 5, size_width = 4, latency_width = 7;
  bool any_paused = false;
  for (const QueueStats& queue : queues) {
    name_width = std::max(name_width, base::Escaped(queue.name).size());
    size_width = std::max(size_width, std::to_string(queue.size).size());
    latency_width = std::max(latency_width, LatencyText(queue.latency).size());
    any_paused = any_paused || queue.paused;
  }
  std::string out;
  auto row = [&](const std::string& name, const std::string& size, const std::string& latency,
                 std::string_view state) {
    out += name + std::string(name_width - name.size() + 2, ' ');
    out += std::string(size_width - size.size(), ' ') + size + "  ";
    out += std::string(latency_width - latency.size(), ' ') + latency;
    if (any_paused && !state.empty()) {
      out += "  ";
      out += state;
    }
    out += "\n";
  };
  row("queue", "size", "latency", "state");
  for (const QueueStats& queue : queues) {
    row(base::Escaped(queue.name), std::to_string(queue.size), LatencyText(queue.latency),
        queue.paused ? "paused" : "");
  }
  return out;
}

void WriteQueuesJson(rapidjson::Writer<rapidjson::StringBuffer>& writer,
                     const std::vector<QueueStats>& queues) {
  writer.Key("queues");
  writer.StartArray();
  for (const QueueStats& queue : queues) {
    writer.StartObject();
    writer.Key("name");
    writer.String(queue.name.data(), static_cast<rapidjson::SizeType>(queue.name.size()));
    writer.Key("size");
    writer.Int64(queue.size);
    writer.Key("latency");
    std::string latency = LatencyText(queue.latency);
    writer.RawValue(latency.data(), latency.size(), rapidjson::kNumberType);
    writer.Key("paused");
    writer.Bool(queue.paused);
    writer.EndObject();
  }
  writer.EndArray();
}

}  // namespace reliableq::cli
