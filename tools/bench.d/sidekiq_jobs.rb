# The Sidekiq side of tools/bench: job classes with the same names as the
# reliableq demo plugin's, loaded with `sidekiq -r tools/bench.d/sidekiq_jobs.rb`.
#
#   NoopJob     does nothing but count itself (the drain scenarios)
#   LatencyJob  appends "<microseconds>\n", the time from the job's enqueued_at
#               to the start of its processing, to $RELIABLEQ_BENCH_LATENCY_LOG
#
# Redis: $RELIABLEQ_BENCH_REDIS_SOCKET (a unix socket path). With
# $RELIABLEQ_BENCH_FETCH=gitlab the gitlab reliable fetcher
# (ruby-gitlab-sidekiq-fetcher) replaces Sidekiq's BasicFetch.
#
# Sidekiq is measured at its best, the way its own load test runs it: the log
# level is WARN, so it does not write two log lines per job (reliableq logs
# jobs only at debug level), and redis-rb 4.8's deprecation warnings, which
# Debian's Sidekiq 6.4.1 triggers on every BRPOP, are silenced.
require "sidekiq"

Redis.silence_deprecations = true

class ReliableqBenchLatency
  def call(_worker, job, _queue)
    if job["class"] == "LatencyJob"
      micros = ((Time.now.to_f - job["enqueued_at"].to_f) * 1_000_000).round
      File.open(ENV.fetch("RELIABLEQ_BENCH_LATENCY_LOG"), "a") { |f| f.write("#{micros}\n") }
    end
    yield
  end
end

socket = ENV.fetch("RELIABLEQ_BENCH_REDIS_SOCKET")
Sidekiq.configure_server do |config|
  config.redis = { path: socket }
  config.logger.level = Logger::WARN
  # First in the chain: the latency is taken before any other middleware and
  # the job itself run, as the reliableq LatencyJob takes it first thing.
  config.server_middleware do |chain|
    chain.prepend ReliableqBenchLatency
  end
  if ENV["RELIABLEQ_BENCH_FETCH"] == "gitlab"
    require "sidekiq-reliable-fetch"
    Sidekiq::ReliableFetch.setup_reliable_fetch!(config)
  end
end
Sidekiq.configure_client do |config|
  config.redis = { path: socket }
end

# Sidekiq's basic fetch pops a job into memory, so an empty queue does not
# mean that every job has run. The job that finishes $RELIABLEQ_BENCH_EXPECT
# jobs sets $RELIABLEQ_BENCH_DONE_KEY, which tells reliableq-bench when the
# drain ended. The count costs one uncontended lock per job.
class NoopJob
  include Sidekiq::Worker

  EXPECT = Integer(ENV.fetch("RELIABLEQ_BENCH_EXPECT", "0"))
  DONE_KEY = ENV.fetch("RELIABLEQ_BENCH_DONE_KEY", "")
  @lock = Mutex.new
  @finished = 0

  def self.finished
    count = @lock.synchronize { @finished += 1 }
    return unless count == EXPECT && !DONE_KEY.empty?

    Sidekiq.redis { |conn| conn.set(DONE_KEY, count.to_s) }
  end

  def perform(*)
    self.class.finished
  end
end

class LatencyJob
  include Sidekiq::Worker
  def perform(*); end
end
