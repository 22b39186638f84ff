# Sidekiq's own API (ruby-sidekiq 6.4.1) on the schedule, retry and dead
# entries that reliableq wrote (the C++ client's PushIn/PushAt, a worker's
# real failures): it reads them, and its actions move them the way a
# Sidekiq user expects; a reliableq worker then runs what was moved
# (tests/interop/process_api_test.cc).
#
# usage: ruby process_api_sets.rb REDIS_URL SPEC.json STEP
#
# Steps:
#   act       SPEC["scheduled"], ["retry"], ["dead"] list the entries
#             expected. ScheduledSet: add_to_queue SPEC["add_to_queue"],
#             delete SPEC["delete_scheduled"], reschedule
#             SPEC["reschedule"] an hour later; RetrySet: kill SPEC["kill"],
#             delete SPEC["delete_retry"], then retry_all; DeadSet#clear.
#   kill_all  the retried jobs failed again in a reliableq worker and are
#             SPEC["retry"]: RetrySet#kill_all, then DeadSet#retry_all.

require_relative "process_api_helper"

spec, step = ProcessApi.start("process_api_sets")
P = ProcessApi

QUEUE = spec["queue"]

def sizes
  [Sidekiq::ScheduledSet.new.size, Sidekiq::RetrySet.new.size, Sidekiq::DeadSet.new.size]
end

# What every entry shows: the job's own fields and a score that the Web UI
# can use to find it again.
def check_entry(set, entry, want)
  where = "#{set.name} #{want["jid"]}"
  check("#{where}: klass", entry.klass == want["class"])
  check("#{where}: args #{entry.args.inspect}", entry.args == want["args"])
  check("#{where}: queue #{entry.queue.inspect}", entry.queue == want["queue"])
  check("#{where}: created_at", P.float_time?(entry["created_at"]))
  check("#{where}: score is a Float", entry.score.is_a?(Float))
  found = set.fetch(entry.score, entry.jid).first
  check("#{where}: fetch by the Web UI id", found && found.value == entry.value)
  # SortedEntry#reschedule finds the member by Sidekiq's own re-dump of it
  # (ZINCRBY), so the stored bytes must be exactly what Ruby writes.
  check("#{where}: stored as Sidekiq.dump_json writes it",
    Sidekiq.dump_json(entry.item) == entry.value)
end

def check_failure(entry, want, retry_count)
  where = "#{entry.parent.name} #{want["jid"]}"
  check("#{where}: error?", entry.error?)
  check("#{where}: error_class #{entry["error_class"].inspect}",
    entry["error_class"] == want["error_class"])
  check("#{where}: error_message #{entry["error_message"].inspect}",
    entry["error_message"] == want["error_message"])
  check("#{where}: retry_count #{entry["retry_count"].inspect}",
    entry["retry_count"].is_a?(Integer) && entry["retry_count"] == retry_count)
  check("#{where}: failed_at", P.float_time?(entry["failed_at"]))
end

# A job pushed to QUEUE by one of Sidekiq's actions between t0 and t1:
# Sidekiq::Client.push set a new enqueued_at and kept everything else.
def check_pushed(jid, old, t0, t1, retry_count)
  where = "#{jid} pushed to #{QUEUE}"
  job = Sidekiq::Queue.new(QUEUE).find_job(jid)
  return unless check("#{where}: in the queue", job)
  check("#{where}: enqueued_at #{job["enqueued_at"].inspect}",
    P.float_time?(job["enqueued_at"]) && job["enqueued_at"] >= t0 - 0.01 &&
      job["enqueued_at"] <= t1 + 0.01)
  check("#{where}: retry_count #{job["retry_count"].inspect}", job["retry_count"] == retry_count)
  (old.keys - %w[enqueued_at retry_count]).each do |field|
    check("#{where}: #{field} kept", job[field] == old[field])
  end
  check("#{where}: no at", !job.item.key?("at"))
end

case step
when "act"
  scheduled = Sidekiq::ScheduledSet.new
  retries = Sidekiq::RetrySet.new
  dead = Sidekiq::DeadSet.new
  check("sizes #{sizes.inspect}",
    sizes == [spec["scheduled"].size, spec["retry"].size, spec["dead"].size])
  check("Stats#scheduled_size", Sidekiq::Stats.new.scheduled_size == spec["scheduled"].size)

  spec["scheduled"].each do |want|
    entry = scheduled.find_job(want["jid"])
    next unless check("schedule: find_job(#{want["jid"]})", entry)
    check_entry(scheduled, entry, want)
    check("schedule #{want["jid"]}: at #{entry.at.to_f} is #{want["at"]}",
      (entry.at.to_f - want["at"]).abs < 1e-3)
    check("schedule #{want["jid"]}: not yet enqueued",
      entry.enqueued_at.nil? && !entry.item.key?("enqueued_at"))
    check("schedule #{want["jid"]}: no at in the payload", !entry.item.key?("at"))
    check("schedule #{want["jid"]}: no error", !entry.error?)
  end
  spec["retry"].each do |want|
    entry = retries.find_job(want["jid"])
    next unless check("retry: find_job(#{want["jid"]})", entry)
    check_entry(retries, entry, want)
    check_failure(entry, want, 0)
    check("retry #{want["jid"]}: next attempt at least 15 s after the failure",
      entry.at.to_f >= entry["failed_at"] + 15)
  end
  spec["dead"].each do |want|
    entry = dead.find_job(want["jid"])
    next unless check("dead: find_job(#{want["jid"]})", entry)
    check_entry(dead, entry, want)
    check_failure(entry, want, 0)
  end
  response = P.web.get("/scheduled")
  check("Web UI /scheduled: status #{response.status}", response.status == 200)
  spec["scheduled"].each do |want|
    check("Web UI /scheduled shows #{want["jid"]}", response.body.include?(want["jid"]))
    entry = scheduled.find_job(want["jid"])
    next unless entry
    detail = P.web.get("/scheduled/#{entry.score}-#{entry.jid}")
    check("Web UI /scheduled/<id> of #{want["jid"]}: status #{detail.status}",
      detail.status == 200 && detail.body.include?(want["jid"]))
  end

  # ScheduledSet: "Add to queue" runs the job now, retry_count untouched.
  jid = spec["add_to_queue"]
  entry = scheduled.find_job(jid)
  if check("add_to_queue: find_job(#{jid})", entry)
    old = entry.item
    t0 = Time.now.to_f
    entry.add_to_queue
    t1 = Time.now.to_f
    check("add_to_queue: left the schedule", Sidekiq::ScheduledSet.new.find_job(jid).nil?)
    check_pushed(jid, old, t0, t1, nil)
  end
  jid = spec["delete_scheduled"]
  entry = scheduled.find_job(jid)
  if check("schedule delete: find_job(#{jid})", entry)
    entry.delete
    check("schedule delete: gone", Sidekiq::ScheduledSet.new.find_job(jid).nil?)
  end
  check("schedule: one entry left", Sidekiq::ScheduledSet.new.size == spec["scheduled"].size - 2)
  # Reschedule the one left an hour later: the same member gets a new score.
  jid = spec["reschedule"]
  entry = Sidekiq::ScheduledSet.new.find_job(jid)
  if check("reschedule: find_job(#{jid})", entry)
    entry.reschedule(entry.at + 3600)
    moved = Sidekiq::ScheduledSet.new.to_a
    check("reschedule: still one entry (#{moved.size})", moved.size == 1)
    check("reschedule: the same member, an hour later",
      moved.first&.value == entry.value && (moved.first.score - entry.score - 3600).abs < 1e-3)
  end

  # RetrySet: kill one (it goes to the dead set unchanged), delete one,
  # retry the others now.
  jid = spec["kill"]
  entry = retries.find_job(jid)
  if check("kill: find_job(#{jid})", entry)
    t0 = Time.now.to_f
    entry.kill
    t1 = Time.now.to_f
    check("kill: left the retry set", Sidekiq::RetrySet.new.find_job(jid).nil?)
    killed = Sidekiq::DeadSet.new.find_job(jid)
    if check("kill: in the dead set", killed)
      check("kill: the entry is unchanged", killed.value == entry.value)
      check("kill: died now (#{killed.score})",
        killed.score >= t0 - 0.01 && killed.score <= t1 + 0.01)
    end
  end
  jid = spec["delete_retry"]
  entry = retries.find_job(jid)
  if check("retry delete: find_job(#{jid})", entry)
    entry.delete
    check("retry delete: gone", Sidekiq::RetrySet.new.find_job(jid).nil? &&
      Sidekiq::DeadSet.new.find_job(jid).nil?)
  end
  olds = Sidekiq::RetrySet.new.to_a.to_h { |e| [e.jid, e.item] }
  check("retry_all: #{olds.size} entries left", olds.size == spec["retry"].size - 2)
  t0 = Time.now.to_f
  Sidekiq::RetrySet.new.retry_all
  t1 = Time.now.to_f
  check("retry_all: the retry set is empty", Sidekiq::RetrySet.new.size == 0)
  olds.each { |jid, old| check_pushed(jid, old, t0, t1, old["retry_count"] - 1) }

  check("DeadSet: #{Sidekiq::DeadSet.new.size} entries before clear",
    Sidekiq::DeadSet.new.size == spec["dead"].size + 1)
  Sidekiq::DeadSet.new.clear
  check("DeadSet#clear: empty", Sidekiq::DeadSet.new.size == 0)
  check("sizes after the actions #{sizes.inspect}", sizes == [spec["scheduled"].size - 2, 0, 0])
  check("Stats#enqueued", Sidekiq::Stats.new.enqueued == 1 + olds.size)

when "kill_all"
  retries = Sidekiq::RetrySet.new
  check("sizes #{sizes.inspect}", sizes[1..] == [spec["retry"].size, 0])
  olds = {}
  spec["retry"].each do |want|
    entry = retries.find_job(want["jid"])
    next unless check("retry: find_job(#{want["jid"]})", entry)
    olds[entry.jid] = entry.value
    check_entry(retries, entry, want)
    # Ran with retry_count -1 after "Retry now" and failed again: 0, with
    # the time of this failure in retried_at.
    check_failure(entry, want, 0)
    check("retry #{want["jid"]}: retried_at #{entry["retried_at"].inspect}",
      P.float_time?(entry["retried_at"]) && entry["retried_at"] > entry["failed_at"])
    detail = P.web.get("/retries/#{entry.score}-#{entry.jid}")
    check("Web UI /retries/<id> of #{want["jid"]}: status #{detail.status}", detail.status == 200)
  end

  t0 = Time.now.to_f
  Sidekiq::RetrySet.new.kill_all
  t1 = Time.now.to_f
  check("kill_all: the retry set is empty", Sidekiq::RetrySet.new.size == 0)
  dead = Sidekiq::DeadSet.new
  check("kill_all: #{dead.size} dead", dead.size == spec["retry"].size)
  olds.each do |jid, value|
    entry = dead.find_job(jid)
    next unless check("kill_all: #{jid} in the dead set", entry)
    check("kill_all: #{jid} unchanged", entry.value == value)
    check("kill_all: #{jid} died now", entry.score >= t0 - 0.01 && entry.score <= t1 + 0.01)
  end

  t0 = Time.now.to_f
  Sidekiq::DeadSet.new.retry_all
  t1 = Time.now.to_f
  check("DeadSet#retry_all: the dead set is empty", Sidekiq::DeadSet.new.size == 0)
  olds.each { |jid, value| check_pushed(jid, JSON.parse(value), t0, t1, -1) }
  check("sizes after the actions #{sizes.inspect}", sizes[1..] == [0, 0])
else
  abort("unknown step #{step}")
end

P.finish
