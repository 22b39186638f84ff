// ProcessorConfig::For: a pool's configuration from the server's options,
// apart from the pool that runs with it.

#include "base/text_escape.h"
#include "server/processor_pool.h"

namespace reliableq::server {

ProcessorConfig ProcessorConfig::For(const ServerOptions& options, HandlerRegistry registry,
                                     std::shared_ptr<const ExternalHandlers> external,
                                     std::vector<std::string> queue_names,
                                     std::shared_ptr<const base::Logger> log,
                                     std::shared_ptr<const Clock> clock) {
  ProcessorConfig config;
  if (!options.http_address.empty()) {
    std::vector<std::string> classes = registry.Classes();
    if (external) {
      for (std::string& name : external->Classes()) classes.push_back(std::move(name));
    }
    std::vector<std::string> queues;
    for (const QueueSpec& queue : options.queues) queues.push_back(queue.name);
    config.metrics = std::make_shared<metrics::WorkerMetrics>(std::move(classes), std::move(queues),
                                                              options.concurrency);
  }
  config.threads = options.concurrency;
  config.registry = std::move(registry);
  if (external) {
    for (const std::string& line : external->Describe()) {
      log->Log(LogLevel::kInfo, "handler", "handler %s", base::Escaped(line).c_str());
    }
  }
  config.external = std::move(external);
  config.timeouts = TimeoutPolicy(options.job_timeouts);
  config.kill_grace = options.kill_grace;
  config.queue_names = std::move(queue_names);
  config.max_retries = options.max_retries;
  config.max_snoozes = options.max_snoozes;
  config.class_retries = options.class_retries;
  config.records = options.records;
  config.random_below = options.random_below;
  config.middleware = options.middleware;
  config.death_handlers = options.death_handlers;
  config.log = std::move(log);
  config.clock = std::move(clock);
  return config;
}

}  // namespace reliableq::server
