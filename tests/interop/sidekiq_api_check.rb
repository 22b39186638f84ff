# Sidekiq's own API (the Debian ruby-sidekiq package, 6.4.1) against retry
# and dead entries that reliableq's worker wrote: it must read every field
# its Web UI shows, find each entry again by the "<score>-<jid>" id the Web
# UI uses, render the Retries and Dead pages, and "Retry now" one entry of
# each set back to its queue with the fields Sidekiq's client sets.
#
# usage: ruby sidekiq_api_check.rb REDIS_URL SPEC.json
#
# SPEC is written by tests/interop/sidekiq_api_test.cc:
#   {"retry":[EXPECTED, ...], "dead":[EXPECTED, ...],
#    "retry_now":{"retry":JID, "dead":JID}}
#   EXPECTED = {"jid":..., "class":..., "args":[...], "queue":...,
#               "retry_count":N, "error_class":..., "error_message":...}
#
# Prints each failed check on stderr and exits 1 if there was any; prints
# "sidekiq_api_check: N checks passed" and exits 0 otherwise.

require "json"
require "sidekiq"
require "sidekiq/api"
require "sidekiq/web"
require "rack/mock"
require "rack/session/cookie"
require "securerandom"
require_relative "check_helper"

url, spec_path = ARGV
abort("usage: sidekiq_api_check.rb REDIS_URL SPEC.json") unless url && spec_path

Sidekiq.configure_client { |config| config.redis = {url: url} }
spec = JSON.parse(File.read(spec_path))

def float_time?(value)
  value.is_a?(Float) && value > 1.0e9
end

check("Sidekiq is 6.4.1, not #{Sidekiq::VERSION}", Sidekiq::VERSION == "6.4.1")

started = Time.now.to_f
stats = Sidekiq::Stats.new
check("Stats#retry_size", stats.retry_size == spec["retry"].size)
check("Stats#dead_size", stats.dead_size == spec["dead"].size)

sets = {"retry" => Sidekiq::RetrySet, "dead" => Sidekiq::DeadSet}
sets.each do |name, set_class|
  set = set_class.new
  expected = spec[name]
  check("#{name}: size #{set.size}, expected #{expected.size}", set.size == expected.size)
  check("#{name}: each yields every entry", set.to_a.size == expected.size)
  expected.each do |want|
    jid = want["jid"]
    entry = set.find_job(jid)
    next unless check("#{name}: find_job(#{jid})", entry)
    where = "#{name} #{jid}"
    check("#{where}: klass", entry.klass == want["class"])
    check("#{where}: display_class", entry.display_class == want["class"])
    check("#{where}: args #{entry.args.inspect}", entry.args == want["args"])
    check("#{where}: display_args", entry.display_args == want["args"])
    check("#{where}: queue #{entry.queue.inspect}", entry.queue == want["queue"])
    check("#{where}: jid", entry.jid == jid)
    count = entry["retry_count"]
    check("#{where}: retry_count #{count.inspect}",
      count.is_a?(Integer) && count == want["retry_count"])
    check("#{where}: error?", entry.error?)
    check("#{where}: error_class", entry["error_class"] == want["error_class"])
    check("#{where}: error_message", entry["error_message"] == want["error_message"])
    check("#{where}: failed_at #{entry["failed_at"].inspect}", float_time?(entry["failed_at"]))
    # The retry detail page calls Time.at on retried_at once retry_count > 0.
    if count.is_a?(Integer) && count > 0
      check("#{where}: retried_at #{entry["retried_at"].inspect}",
        float_time?(entry["retried_at"]) && entry["retried_at"] >= entry["failed_at"])
    end
    check("#{where}: no error_backtrace", entry.error_backtrace.nil?)
    check("#{where}: created_at", entry.created_at.is_a?(Time) && entry.created_at.to_f > 1.0e9)
    check("#{where}: enqueued_at", entry.enqueued_at.is_a?(Time))
    check("#{where}: score is a Float", entry.score.is_a?(Float))
    if name == "retry"
      # The next attempt is at least Sidekiq's smallest delay (15 s) after
      # the failure.
      check("#{where}: at #{entry.at.to_f} after the failure",
        entry.at.to_f >= (entry["retried_at"] || entry["failed_at"]) + 15)
    else
      check("#{where}: died recently (#{entry.at.to_f})",
        entry.at.to_f <= started + 1 && entry.at.to_f > started - 600)
    end
    # The Web UI names an entry "<score>-<jid>" and finds it again with
    # ZRANGEBYSCORE score score and the jid (Helpers#job_params,
    # #parse_params).
    key = "#{entry.score}-#{entry.jid}"
    score, key_jid = key.split("-", 2)
    found = set.fetch(score.to_f, key_jid).first
    check("#{where}: fetch by the Web UI id #{key}", found && found.value == entry.value)
  end
end

# The Web UI's list and detail pages render every entry.
# Sidekiq::Web needs a session (for its CSRF protection) in front of it.
app = Rack::Builder.new do
  use Rack::Session::Cookie, secret: SecureRandom.hex(64), same_site: true
  run Sidekiq::Web.new
end
web = Rack::MockRequest.new(app)
{"retry" => "retries", "dead" => "morgue"}.each do |name, path|
  response = web.get("/#{path}")
  check("Web UI /#{path}: status #{response.status}", response.status == 200)
  spec[name].each do |want|
    check("Web UI /#{path} shows #{want["jid"]}", response.body.include?(want["jid"]))
    entry = sets[name].new.find_job(want["jid"])
    next unless entry
    detail = web.get("/#{path}/#{entry.score}-#{entry.jid}")
    check("Web UI /#{path}/<id> of #{want["jid"]}: status #{detail.status}",
      detail.status == 200 && detail.body.include?(want["error_class"]))
  end
end

# "Retry now" with Sidekiq's own code: SortedEntry#retry pushes the job
# through Sidekiq::Client with retry_count - 1 and a new enqueued_at.
spec["retry_now"].each do |name, jid|
  set = sets[name].new
  before = set.size
  entry = set.find_job(jid)
  next unless check("#{name}: find_job(#{jid}) before retry", entry)
  old = entry.item
  t0 = Time.now.to_f
  entry.retry
  t1 = Time.now.to_f
  where = "#{name} #{jid} retried"
  check("#{where}: left the set", sets[name].new.size == before - 1 &&
    sets[name].new.find_job(jid).nil?)
  queue = Sidekiq::Queue.new(old["queue"])
  job = queue.find_job(jid)
  next unless check("#{where}: in queue:#{old["queue"]}", job)
  check("#{where}: retry_count #{job["retry_count"].inspect}",
    job["retry_count"] == old["retry_count"] - 1)
  check("#{where}: enqueued_at #{job["enqueued_at"].inspect}",
    job["enqueued_at"].is_a?(Float) && job["enqueued_at"] >= t0 - 1 && job["enqueued_at"] <= t1 + 1)
  %w[class args queue created_at failed_at error_class error_message retry].each do |field|
    check("#{where}: #{field} kept", job[field] == old[field])
  end
  check("#{where}: queue listed", Sidekiq::Queue.all.map(&:name).include?(old["queue"]))
  check("#{where}: queue latency", queue.latency >= 0 && queue.latency < 60)
end

Checks.finish("sidekiq_api_check")
