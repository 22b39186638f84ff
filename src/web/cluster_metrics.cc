#include "web/cluster_metrics.h"

#include <prometheus/text_serializer.h>

#include <memory>

#include "web/web_context.h"

namespace reliableq::web {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Gauge(std::string name, std::string help, double value) {
  MetricFamily family{std::move(name), std::move(help), MetricType::Gauge, {}};
  ClientMetric metric;
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
  return family;
}

MetricFamily Counter(std::string name, std::string help, double value) {
  MetricFamily family{std::move(name), std::move(help), MetricType::Counter, {}};
  ClientMetric metric;
  metric.counter.value = value;
  family.metric.push_back(std::move(metric));
  return family;
}

}  // namespace

Result<std::vector<MetricFamily>> ClusterMetrics::Read() const {
  Result<AdminPool::Lease> admin = pool_->Acquire();
  if (!admin.ok()) return admin.status();
  Result<Stats> stats = (*admin)->GetStats();
  if (!stats.ok()) return stats.status();
  RecoverOptions dry;
  dry.dry_run = true;
  Result<RecoveryReport> report = (*admin)->Recover(dry);
  if (!report.ok()) return report.status();
  int64_t orphaned = 0;
  for (const IdentityRecovery& identity : report->identities) {
    if (identity.alive) continue;
    for (const QueueRecovery& q : identity.queues) orphaned += q.requeued + q.dead;
  }

  std::vector<MetricFamily> families;
  MetricFamily size{"reliableq_queue_size", "Jobs waiting in each queue.", MetricType::Gauge, {}};
  MetricFamily latency{"reliableq_queue_latency_seconds",
                       "Seconds since the oldest job of each queue was enqueued.",
                       MetricType::Gauge,
                       {}};
  for (const QueueStats& q : stats->queues) {
    ClientMetric s;
    s.label = {{"queue", q.name}};
    s.gauge.value = static_cast<double>(q.size);
    size.metric.push_back(std::move(s));
    ClientMetric l;
    l.label = {{"queue", q.name}};
    l.gauge.value = q.latency;
    latency.metric.push_back(std::move(l));
  }
  families.push_back(std::move(size));
  families.push_back(std::move(latency));
  families.push_back(Gauge("reliableq_retry_set_size", "Jobs in the retry set.",
                           static_cast<double>(stats->retries)));
  families.push_back(Gauge("reliableq_scheduled_set_size", "Jobs in the schedule set.",
                           static_cast<double>(stats->scheduled)));
  families.push_back(Gauge("reliableq_dead_set_size", "Jobs in the dead set.",
                           static_cast<double>(stats->dead)));
  families.push_back(Gauge("reliableq_processes", "Processes in Sidekiq's processes set.",
                           static_cast<double>(stats->processes)));
  families.push_back(Gauge("reliableq_busy_jobs", "Jobs the processes report running.",
                           static_cast<double>(stats->busy)));
  families.push_back(Gauge("reliableq_in_progress_jobs",
                           "Jobs in the working lists of registered processes.",
                           static_cast<double>(stats->in_progress)));
  families.push_back(Gauge("reliableq_orphaned_jobs",
                           "Jobs in the working lists of dead processes, waiting for the janitor.",
                           static_cast<double>(orphaned)));
  families.push_back(Gauge("reliableq_sequences_held",
                           "Sequence keys held by a job now (the others of each wait for it).",
                           static_cast<double>(stats->sequences_held)));
  families.push_back(Gauge("reliableq_sequence_oldest_hold_seconds",
                           "Seconds the sequence key held longest has been held; 0 when none is.",
                           stats->oldest_sequence_hold));
  families.push_back(Counter("reliableq_stat_processed_total",
                             "Sidekiq's stat:processed: jobs finished.",
                             static_cast<double>(stats->processed)));
  families.push_back(Counter("reliableq_stat_failed_total", "Sidekiq's stat:failed: jobs failed.",
                             static_cast<double>(stats->failed)));
  return families;
}

std::vector<MetricFamily> ClusterMetrics::Collect() const {
  Result<std::vector<MetricFamily>> families = Read();
  return families.ok() ? std::move(families.value()) : std::vector<MetricFamily>{};
}

void AddMetricsRoutes(http::HttpRoutes& server, Context& context) {
  auto metrics = std::make_shared<ClusterMetrics>(context.pool.get());
  Get(server, context, "/metrics", [metrics](Call& call) {
    Result<std::vector<MetricFamily>> families = metrics->Read();
    if (!families.ok()) {
      call.response.status = 503;
      call.response.SetContent("cannot read Redis: " + RedactUrls(families.status().ToString()) +
                                    "\n",
                                "text/plain; charset=utf-8");
      return;
    }
    call.response.SetContent(prometheus::TextSerializer().Serialize(*families),
                              "text/plain; version=0.0.4; charset=utf-8");
  });
  // Health needs no credentials: load balancers and supervisors probe it,
  // and it tells nothing but whether Redis answers.
  server.Get("/healthz", [&context](const http::HttpRequest&, http::HttpResponse& response) {
    Result<AdminPool::Lease> admin = context.pool->Acquire();
    Result<RedisServerInfo> info =
        admin.ok() ? (*admin)->ServerInfo() : Result<RedisServerInfo>(admin.status());
    if (!info.ok()) {
      response.status = 503;
      response.SetContent("redis: " + RedactUrls(info.status().ToString()) + "\n",
                           "text/plain; charset=utf-8");
      return;
    }
    response.SetContent("ok", "text/plain; charset=utf-8");
  });
}

}  // namespace reliableq::web
