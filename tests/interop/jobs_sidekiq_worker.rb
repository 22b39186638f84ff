# The Ruby worker of tests/interop/jobs_test.cc, loaded by a real Sidekiq
# 6.4.1 process:
#
#   sidekiq -r tests/interop/jobs_sidekiq_worker.rb -c 5 -q interop
#
# Environment:
#   RELIABLEQ_INTEROP_REDIS_SOCKET  the private redis-server's unix socket
#   RELIABLEQ_INTEROP_RECORD        file that gets one JSON line per job run
#   RELIABLEQ_INTEROP_FETCH         "basic" (Sidekiq's BasicFetch, the
#                                   default) or "gitlab" (gitlab's reliable
#                                   fetch, ruby-gitlab-sidekiq-fetcher)
#
# Job classes (the names reliableq pushes and registers):
#   InteropJob  any args; does nothing
#   RecordJob   [anything, milliseconds?]: sleeps that long, as the reliableq
#               demo plugin's RecordJob does
#
# Each successful run appends, with one write, a line
#   {"side":"ruby","pid":N,"jid":...,"class":...,"queue":...,
#    "args_json": JSON.generate(args), "retry":..., "created_at":...,
#    "created_at_type":"Float", "enqueued_at":..., "enqueued_at_type":...,
#    "ran_at": epoch seconds}
# taken from the job hash Sidekiq parsed, i.e. exactly what `perform` got.
require "json"
require "sidekiq"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

# Records a job after it ran without raising.
class InteropRecorder
  LOCK = Mutex.new
  PATH = ENV.fetch("RELIABLEQ_INTEROP_RECORD")

  def call(_worker, job, queue)
    yield
    line = JSON.generate(
      "side" => "ruby", "pid" => Process.pid, "jid" => job["jid"], "class" => job["class"],
      "queue" => queue, "args_json" => JSON.generate(job["args"]), "retry" => job["retry"],
      "created_at" => job["created_at"], "created_at_type" => job["created_at"].class.name,
      "enqueued_at" => job["enqueued_at"], "enqueued_at_type" => job["enqueued_at"].class.name,
      "ran_at" => Time.now.to_f
    ) + "\n"
    LOCK.synchronize { File.open(PATH, "a") { |f| f.write(line) } }
  end
end

socket = ENV.fetch("RELIABLEQ_INTEROP_REDIS_SOCKET")
Sidekiq.configure_server do |config|
  config.redis = {path: socket}
  config.logger.level = Logger::WARN
  # Scheduled jobs are due within seconds in the test: poll every ~1 s
  # instead of Sidekiq's cluster-wide 5 s (the first poll still waits up to
  # 5 s).
  config.options[:poll_interval_average] = 1
  config.server_middleware { |chain| chain.add InteropRecorder }
  case ENV.fetch("RELIABLEQ_INTEROP_FETCH", "basic")
  when "basic"
  when "gitlab"
    require "sidekiq-reliable-fetch"
    Sidekiq::ReliableFetch.setup_reliable_fetch!(config)
  else
    raise "RELIABLEQ_INTEROP_FETCH must be basic or gitlab"
  end
end
Sidekiq.configure_client { |config| config.redis = {path: socket} }

class InteropJob
  include Sidekiq::Worker

  def perform(*); end
end

class RecordJob
  include Sidekiq::Worker

  def perform(_anything = nil, millis = nil)
    sleep(millis / 1000.0) if millis.is_a?(Numeric) && millis > 0
  end
end
