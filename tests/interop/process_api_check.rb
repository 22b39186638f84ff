# Sidekiq's own API (ruby-sidekiq 6.4.1) against a live reliableq worker:
# Stats, Queue, ProcessSet, Workers and the Web UI read what the worker and
# the C++ client wrote, and Queue#clear, JobRecord#delete,
# Process#quiet! and Process#stop! act on it.
#
# usage: ruby process_api_check.rb REDIS_URL SPEC.json STEP
#
# Steps (SPEC is written by tests/interop/process_api_test.cc):
#   running  the worker runs SPEC["running"] jobs, blocked in their handlers;
#            SPEC["queued"] wait in queues no worker serves. Checks Stats,
#            Queue, ProcessSet, Workers, both work hashes and the Web UI,
#            then deletes SPEC["delete"] (a jid) with JobRecord#delete and
#            clears queue SPEC["clear"] with Queue#clear.
#   idle     the jobs finished: Workers is empty, busy is 0, then
#            Process#quiet! quiets the worker, which keeps beating.
#   stop     SPEC["process"] is a `reliableq worker` process running
#            SPEC["running"]: dump_threads and quiet! it, push a job it must
#            not take, then stop! it and see it leave with its jobs back in
#            their queue.

require_relative "process_api_helper"

spec, step = ProcessApi.start("process_api_check")
P = ProcessApi

EXPECTED = spec["process"]
IDENTITY = EXPECTED["identity"]

# Sidekiq::Process of our worker, checked against SPEC["process"].
def check_process(process, busy:, quiet:)
  where = "process #{IDENTITY}"
  return unless check("#{where}: in ProcessSet", process)
  check("#{where}: identity", process.identity == IDENTITY)
  check("#{where}: identity is <hostname>:<pid>:<12 hex>",
    IDENTITY.match?(/\A#{Regexp.escape(EXPECTED["hostname"])}:#{EXPECTED["pid"]}:[0-9a-f]{12}\z/))
  check("#{where}: hostname #{process["hostname"].inspect}",
    process["hostname"] == EXPECTED["hostname"])
  check("#{where}: pid #{process["pid"].inspect}",
    process["pid"].is_a?(Integer) && process["pid"] == EXPECTED["pid"])
  check("#{where}: concurrency #{process["concurrency"].inspect}",
    process["concurrency"] == EXPECTED["concurrency"])
  check("#{where}: queues #{process.queues.inspect}", process.queues == EXPECTED["queues"])
  check("#{where}: labels #{process.labels.inspect}", process.labels == EXPECTED["labels"])
  check("#{where}: tag #{process.tag.inspect}", process.tag == EXPECTED["tag"])
  check("#{where}: busy #{process["busy"].inspect}, expected #{busy}", process["busy"] == busy)
  check("#{where}: quiet #{process["quiet"].inspect}",
    process["quiet"] == (quiet ? "true" : "false"))
  check("#{where}: stopping? #{process.stopping?}", process.stopping? == quiet)
  now = Time.now.to_f
  # The worker beats every beat_interval; a beat older than a few of them
  # (or one from the future) is wrong.
  check("#{where}: beat #{process["beat"]} is recent (now #{now})",
    process["beat"] > now - 3 * EXPECTED["beat_interval"] - 1 && process["beat"] < now + 1)
  started = process["started_at"]
  check("#{where}: started_at #{started.inspect} in [#{EXPECTED["started_after"]}, " \
        "#{EXPECTED["started_before"]}]",
    P.float_time?(started) && started >= EXPECTED["started_after"] - 0.01 &&
      started <= EXPECTED["started_before"] + 0.01)
  check("#{where}: rss #{process["rss"]} KB", process["rss"] > 0)
  check("#{where}: rtt_us #{process["rtt_us"]}", process["rtt_us"] >= 0)

  # The hash as stored: six string fields, float seconds for beat and
  # started_at, a 60 s expiry refreshed on every beat.
  info, busy_s, beat_s, quiet_s, rss_s, rtt_s = P.redis { |c|
    c.hmget(IDENTITY, "info", "busy", "beat", "quiet", "rss", "rtt_us")
  }
  check("#{where}: hash has info, busy, quiet, rss, rtt_us",
    [info, busy_s, quiet_s, rss_s, rtt_s].none?(&:nil?))
  check("#{where}: beat stored as float seconds #{beat_s.inspect}", P.float_time_text?(beat_s))
  info = JSON.parse(info.to_s) rescue {}
  check("#{where}: info.started_at is a JSON float", P.float_time?(info["started_at"]))
  check("#{where}: info.queues is an array", info["queues"].is_a?(Array))
  check("#{where}: info.labels is an array", info["labels"].is_a?(Array))
  ttl = P.redis { |c| c.ttl(IDENTITY) }
  check("#{where}: hash expires within 60 s (ttl #{ttl})", ttl > 0 && ttl <= 60)
end

# Checks Sidekiq::Workers (WorkSet) and the two work hashes against the
# jobs of SPEC["running"].
def check_running(running)
  by_jid = running.to_h { |job| [job["jid"], job] }
  works = Sidekiq::Workers.new
  check("Workers#size #{works.size}, expected #{running.size}", works.size == running.size)
  entries = works.to_a.select { |process_id, _, _| process_id == IDENTITY }
  check("Workers lists #{entries.size} jobs of #{IDENTITY}, expected #{running.size}",
    entries.size == running.size)
  check("Workers: every thread id differs",
    entries.map { |_, tid, _| tid }.uniq.size == entries.size)
  now = Time.now.to_f
  entries.each do |_, tid, work|
    payload = work["payload"]
    jid = payload.is_a?(Hash) ? payload["jid"] : nil
    want = by_jid.delete(jid)
    where = "Workers #{tid} (#{jid.inspect})"
    next unless check("#{where}: one of the running jobs", want)
    check("#{where}: queue #{work["queue"].inspect}", work["queue"] == want["queue"])
    check("#{where}: run_at #{work["run_at"].inspect} is an integer, recent",
      work["run_at"].is_a?(Integer) && work["run_at"] <= now + 1 && work["run_at"] > now - 60)
    check("#{where}: class", payload["class"] == want["class"])
    check("#{where}: args #{payload["args"].inspect}", payload["args"] == want["args"])
    check("#{where}: enqueued_at", P.float_time?(payload["enqueued_at"]))
    check("#{where}: created_at", P.float_time?(payload["created_at"]))
    record = Sidekiq::JobRecord.new(payload)
    check("#{where}: JobRecord of the payload", record.klass == want["class"] && record.jid == jid)
  end
  check("Workers: missing #{by_jid.keys.inspect}", by_jid.empty?)

  # Sidekiq 6.4.1 reads <identity>:workers, 6.4.2 to 8.x read
  # <identity>:work: both hold the same entries, the payload as the job's
  # JSON string, with a 60 s expiry.
  work, workers = P.redis { |c| [c.hgetall("#{IDENTITY}:work"), c.hgetall("#{IDENTITY}:workers")] }
  check("#{IDENTITY}:work has #{work.size} entries, expected #{running.size}",
    work.size == running.size)
  check("#{IDENTITY}:work and :workers are equal", work == workers)
  work.each do |tid, json|
    entry = JSON.parse(json) rescue {}
    check(":work #{tid}: payload is the job's JSON string", entry["payload"].is_a?(String) &&
      (JSON.parse(entry["payload"]) rescue {})["jid"].is_a?(String))
    check(":work #{tid}: queue and run_at",
      entry["queue"].is_a?(String) && entry["run_at"].is_a?(Integer))
  end
  %w[work workers].each do |suffix|
    ttl = P.redis { |c| c.ttl("#{IDENTITY}:#{suffix}") }
    check("#{IDENTITY}:#{suffix} expires within 60 s (ttl #{ttl})", ttl > 0 && ttl <= 60)
  end
end

def check_work_hashes_gone
  exists = P.redis { |c| [c.exists?("#{IDENTITY}:work"), c.exists?("#{IDENTITY}:workers")] }
  check("no work hashes once idle (exists? #{exists.inspect})", exists == [false, false])
end

# A job waiting in a queue, read through Queue#each / JobRecord.
def check_queued_job(record, want)
  where = "queue #{want["queue"]} #{want["jid"]}"
  check("#{where}: klass", record.klass == want["class"])
  check("#{where}: display_class", record.display_class == want["class"])
  check("#{where}: args #{record.args.inspect}", record.args == want["args"])
  check("#{where}: display_args", record.display_args == want["args"])
  check("#{where}: queue", record.queue == want["queue"] && record["queue"] == want["queue"])
  check("#{where}: retry", record["retry"] == true)
  check("#{where}: stored as Sidekiq.dump_json writes it",
    Sidekiq.dump_json(record.item) == record.value)
  lo = want["pushed_after"] - 0.01
  hi = want["pushed_before"] + 0.01
  %w[enqueued_at created_at].each do |field|
    value = record[field]
    check("#{where}: #{field} #{value.inspect} is float seconds in [#{lo}, #{hi}]",
      P.float_time?(value) && value >= lo && value <= hi)
  end
  check("#{where}: enqueued_at as a Time",
    record.enqueued_at.is_a?(Time) && (record.enqueued_at.to_f - record["enqueued_at"]).abs < 1e-3)
  check("#{where}: created_at as a Time",
    record.created_at.is_a?(Time) && (record.created_at.to_f - record["created_at"]).abs < 1e-3)
end

# Latency of a queue whose oldest job was pushed within [after, before]:
# read between t0 and t1, it lies in [t0 - before, t1 - after].
def check_latency(what, after, before, min)
  t0 = Time.now.to_f
  latency = yield
  t1 = Time.now.to_f
  check("#{what} #{latency.inspect} in [#{t0 - before}, #{t1 - after}]",
    latency.is_a?(Float) && latency >= t0 - before - 0.01 && latency <= t1 - after + 0.01)
  check("#{what} #{latency.inspect} >= #{min} s", latency.is_a?(Float) && latency >= min)
end

def web_get(path, *wanted)
  response = P.web.get(path)
  check("Web UI #{path}: status #{response.status}", response.status == 200)
  wanted.each do |text|
    check("Web UI #{path} shows #{text.inspect}", response.body.include?(text.to_s))
  end
  response
end

case step
when "running"
  stats = spec["stats"]
  s = Sidekiq::Stats.new
  check("Stats#processed #{s.processed}, expected #{stats["processed"]}",
    s.processed == stats["processed"])
  check("Stats#failed #{s.failed}, expected #{stats["failed"]}", s.failed == stats["failed"])
  check("Stats#scheduled_size #{s.scheduled_size}", s.scheduled_size == stats["scheduled"])
  check("Stats#retry_size #{s.retry_size}", s.retry_size == stats["retry"])
  check("Stats#dead_size #{s.dead_size}", s.dead_size == stats["dead"])
  check("Stats#processes_size #{s.processes_size}", s.processes_size == stats["processes"])
  check("Stats#workers_size #{s.workers_size}", s.workers_size == stats["workers"])
  check("Stats#enqueued #{s.enqueued}", s.enqueued == stats["enqueued"])
  check("Stats#queues #{s.queues.inspect}", s.queues == stats["queues"])
  today = Time.now.utc.strftime("%Y-%m-%d")
  history = Sidekiq::Stats::History.new(1)
  check("Stats::History processed #{history.processed.inspect}",
    history.processed[today] == stats["processed"])
  check("Stats::History failed #{history.failed.inspect}", history.failed[today] == stats["failed"])
  latency = spec["latency"]
  check_latency("Stats#default_queue_latency", latency["pushed_after"], latency["pushed_before"],
    latency["min"]) { Sidekiq::Stats.new.default_queue_latency }
  check_latency("Queue#latency", latency["pushed_after"], latency["pushed_before"],
    latency["min"]) { Sidekiq::Queue.new("default").latency }

  check("Queue.all #{Sidekiq::Queue.all.map(&:name).inspect}",
    Sidekiq::Queue.all.map(&:name) == stats["queues"].keys.sort)
  spec["queued"].group_by { |job| job["queue"] }.each do |name, jobs|
    queue = Sidekiq::Queue.new(name)
    check("Queue #{name}: size #{queue.size}, expected #{jobs.size}", queue.size == jobs.size)
    records = queue.to_a
    check("Queue #{name}: each yields #{records.size}", records.size == jobs.size)
    # Newest first: the oldest job is the one fetched next.
    check("Queue #{name}: newest first",
      records.map(&:jid) == jobs.sort_by { |job| -job["pushed_after"] }.map { |job| job["jid"] })
    jobs.each do |want|
      record = queue.find_job(want["jid"])
      check_queued_job(record, want) if check("Queue #{name}: find_job(#{want["jid"]})", record)
    end
  end

  # ProcessSet.new cleans up before it reads: a live reliableq process
  # stays; so does it after an explicit cleanup.
  processes = Sidekiq::ProcessSet.new
  check("ProcessSet#size #{processes.size}", processes.size == stats["processes"])
  check("ProcessSet#cleanup removes nothing", processes.cleanup == 0)
  check("ProcessSet#size after cleanup", Sidekiq::ProcessSet.new.size == stats["processes"])
  check("ProcessSet#each yields #{processes.to_a.size}", processes.to_a.size == stats["processes"])
  check("ProcessSet#total_concurrency #{processes.total_concurrency}",
    processes.total_concurrency == EXPECTED["concurrency"])
  check("ProcessSet#total_rss", processes.total_rss > 0)
  check("ProcessSet#leader is empty (no Enterprise leader)", processes.leader == "")
  check_process(P.process_with(IDENTITY), busy: spec["running"].size, quiet: false)
  check_running(spec["running"])

  web_get("/", "Dashboard")
  web_get("/busy", "#{EXPECTED["hostname"]}:#{EXPECTED["pid"]}", EXPECTED["tag"],
    *EXPECTED["labels"], *spec["running"].map { |job| job["jid"] })
  web_get("/queues", *stats["queues"].keys)
  web_get("/queues/default", *spec["queued"].select { |job| job["queue"] == "default" }
    .map { |job| job["jid"] })

  # Actions on our queues: JobRecord#delete is LREM of the exact string,
  # Queue#clear is UNLINK plus SREM queues.
  jid = spec["delete"]
  queue = Sidekiq::Queue.new("default")
  before = queue.size
  record = queue.find_job(jid)
  if check("JobRecord#delete: find_job(#{jid})", record)
    check("JobRecord#delete returns true", record.delete == true)
    check("JobRecord#delete: gone", queue.size == before - 1 && queue.find_job(jid).nil?)
  end
  trash = Sidekiq::Queue.new(spec["clear"])
  trash.clear
  check("Queue#clear: empty", trash.size == 0)
  check("Queue#clear: no longer listed", !Sidekiq::Queue.all.map(&:name).include?(spec["clear"]))

when "idle"
  stats = spec["stats"]
  s = Sidekiq::Stats.new
  check("Stats#processed #{s.processed}, expected #{stats["processed"]}",
    s.processed == stats["processed"])
  check("Stats#failed #{s.failed}", s.failed == stats["failed"])
  check("Stats#workers_size #{s.workers_size}", s.workers_size == 0)
  check("Workers#size #{Sidekiq::Workers.new.size}", Sidekiq::Workers.new.size == 0)
  check("Workers#each yields nothing", Sidekiq::Workers.new.to_a.empty?)
  check_work_hashes_gone
  check_process(P.process_with(IDENTITY), busy: 0, quiet: false)

  # Quiet, as the Web UI's Quiet button does it: TSTP on the signals list.
  process = P.process_with(IDENTITY)
  t0 = Time.now.to_f
  process.quiet!
  quiet = P.wait_for(5) { P.process_with(IDENTITY)&.stopping? }
  check("quiet! shows quiet within 5 s (#{(Time.now.to_f - t0).round(2)} s)", quiet)
  if quiet
    beat = P.process_with(IDENTITY)["beat"]
    check("a quiet process keeps beating",
      P.wait_for(3 * EXPECTED["beat_interval"] + 2) { P.process_with(IDENTITY)["beat"] > beat })
    check_process(P.process_with(IDENTITY), busy: 0, quiet: true)
    check("ProcessSet#cleanup keeps the quiet process", Sidekiq::ProcessSet.new.cleanup == 0)
    body = web_get("/busy", IDENTITY).body
    check("Web UI /busy labels it quiet", body.include?(">quiet</span>"))
  end

when "stop"
  running = spec["running"]
  queue_name = EXPECTED["queues"].first
  check_process(P.process_with(IDENTITY), busy: running.size, quiet: false)
  check_running(running)

  # TTIN first (the worker logs its threads; the test reads its log), then
  # TSTP: the worker takes one signal per beat, in the order pushed.
  process = P.process_with(IDENTITY)
  t0 = Time.now.to_f
  process.dump_threads
  process.quiet!
  quiet = P.wait_for(5) { P.process_with(IDENTITY)&.stopping? }
  check("quiet! shows quiet within 5 s (#{(Time.now.to_f - t0).round(2)} s)", quiet)
  check("the signals list is drained", P.redis { |c| c.llen("#{IDENTITY}-signals") } == 0)
  # A job pushed now stays in its queue: a quiet worker fetches nothing.
  late = Sidekiq::Client.push("class" => "RecordJob", "queue" => queue_name,
    "args" => ["pushed after quiet"])
  sleep 4 * EXPECTED["beat_interval"] + 0.5
  queue = Sidekiq::Queue.new(queue_name)
  check("quiet: the job pushed after quiet! is still queued (size #{queue.size})",
    queue.size == 1 && queue.find_job(late))
  check("quiet: the running jobs still run", P.process_with(IDENTITY)&.[]("busy") == running.size)

  # Stop: the worker waits its shutdown timeout for the running jobs, hands
  # them back to their queue and leaves the process set.
  t0 = Time.now.to_f
  process.stop!
  gone = P.wait_for(15) { Sidekiq::ProcessSet.new.none? { |p| p.identity == IDENTITY } }
  check("stop!: gone from ProcessSet within 15 s (#{(Time.now.to_f - t0).round(2)} s)", gone)
  check("stop!: not a member of processes",
    !P.redis { |c| c.sismember("processes", IDENTITY) })
  check("stop!: process hash removed", !P.redis { |c| c.exists?(IDENTITY) })
  check_work_hashes_gone
  check("stop!: Workers is empty", Sidekiq::Workers.new.to_a.empty?)
  check("stop!: Stats#processes_size 0", Sidekiq::Stats.new.processes_size == 0)
  records = Sidekiq::Queue.new(queue_name).to_a
  want = running.map { |job| job["jid"] } + [late]
  check("stop!: the running jobs are back in #{queue_name}: #{records.map(&:jid).inspect}",
    records.map(&:jid).sort == want.sort)
  running.each do |job|
    record = records.find { |r| r.jid == job["jid"] }
    next unless record
    check("stop!: #{job["jid"]} back as it was",
      record.klass == job["class"] && record.args == job["args"] &&
        P.float_time?(record["enqueued_at"]) && P.float_time?(record["created_at"]))
  end
else
  abort("unknown step #{step}")
end

P.finish
